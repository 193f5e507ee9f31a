//! Gives every GraphQL error an `extensions.code`, once, at the edge.
//!
//! Errors raised by casefile carry the original [`Error`] as their source: it decides the code
//! and the public message, and internal ones are logged here with their path and hidden from the
//! client. Errors raised by async-graphql itself get the codes Apollo clients know.

use std::sync::Arc;

use async_graphql::ServerError;

use crate::error::{Error, Log};

pub const PARSE_FAILED: &str = "GRAPHQL_PARSE_FAILED";
pub const VALIDATION_FAILED: &str = "GRAPHQL_VALIDATION_FAILED";

/// A document that does not parse.
pub fn parse_failed(err: impl Into<ServerError>) -> ServerError {
    let mut err = err.into();
    set_code(&mut err, PARSE_FAILED);
    err
}

/// An error of validation: a value of the wrong shape (bad enum value, wrong type) is the
/// user's input; anything else (unknown field) is an invalid document.
pub fn code_validation_error(err: &mut ServerError) {
    let code = if err.message.starts_with("Invalid value for argument")
        || err.message.starts_with("Invalid value for variable")
    {
        "BAD_USER_INPUT"
    } else {
        VALIDATION_FAILED
    };
    set_code(err, code);
}

fn has_code(err: &ServerError) -> bool {
    err.extensions
        .as_ref()
        .is_some_and(|ext| ext.get("code").is_some())
}

fn set_code(err: &mut ServerError, code: &str) {
    if !has_code(err) {
        err.extensions
            .get_or_insert_with(Default::default)
            .set("code", code);
    }
}

/// Gives `err` its code (and its public message, if casefile raised it), unless it has one.
pub fn assign_code(err: &mut ServerError) {
    let ours = err
        .source::<Error>()
        .or_else(|| err.source::<Arc<Error>>().map(|e| &**e))
        .map(|e| (e.public(), e.to_string()));
    match ours {
        Some((public, detail)) => {
            match public.log {
                Log::No => {}
                Log::Warn => {
                    tracing::warn!(path = ?err.path, error = %detail, "refused by the database");
                }
                Log::Error => {
                    tracing::error!(path = ?err.path, error = %detail, "internal error while resolving");
                }
            }
            err.message = public.message;
            set_code(err, public.code);
        }
        None if has_code(err) => {}
        // async-graphql's own coercion of argument values inside resolvers.
        None if err.message.starts_with("Failed to parse")
            || err.message.starts_with("Expected input type") =>
        {
            set_code(err, "BAD_USER_INPUT");
        }
        // A subscription sent where only a stream can carry it (a plain POST or GET).
        None if err.message.starts_with("Subscriptions are not supported") => {
            set_code(err, "BAD_REQUEST");
        }
        // The request names no operation the document has: the client's mistake.
        None if err.message.starts_with("Unknown operation named")
            || err.message == "Operation name required in request." =>
        {
            set_code(err, "BAD_REQUEST")
        }
        // Selection sets (through fragments) nested past --max-query-nesting.
        None if err
            .message
            .starts_with("The recursion depth of the query cannot be greater than") =>
        {
            err.message = format!("{} (--max-query-nesting)", err.message);
            set_code(err, super::limits::TOO_DEEP);
        }
        None => {
            tracing::error!(path = ?err.path, error = %err.message, "unclassified error while resolving");
            err.message = "internal server error".to_owned();
            set_code(err, "INTERNAL_SERVER_ERROR");
        }
    }
}
