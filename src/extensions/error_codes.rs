//! Gives every GraphQL error an `extensions.code`, once, at the edge.
//!
//! Errors raised by casefile carry the original [`Error`] as their source: it decides the code
//! and the public message, and internal ones are logged here with their path and hidden from the
//! client. Errors raised by async-graphql itself get the codes Apollo clients know.

use std::sync::Arc;

use async_graphql::extensions::{
    Extension, ExtensionContext, ExtensionFactory, NextParseQuery, NextRequest, NextSubscribe,
    NextValidation,
};
use async_graphql::parser::types::ExecutableDocument;
use async_graphql::{Response, ServerError, ServerResult, ValidationResult, Variables};
use futures::StreamExt as _;
use futures::stream::BoxStream;

use crate::error::{Error, Log};

pub const PARSE_FAILED: &str = "GRAPHQL_PARSE_FAILED";
pub const VALIDATION_FAILED: &str = "GRAPHQL_VALIDATION_FAILED";

/// Installs the error-code mapping.
pub struct ErrorCodes;

impl ExtensionFactory for ErrorCodes {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(ErrorCodes)
    }
}

#[async_graphql::async_trait::async_trait]
impl Extension for ErrorCodes {
    async fn request(&self, ctx: &ExtensionContext<'_>, next: NextRequest<'_>) -> Response {
        let mut response = next.run(ctx).await;
        response.errors.iter_mut().for_each(assign_code);
        response
    }

    fn subscribe<'s>(
        &self,
        ctx: &ExtensionContext<'_>,
        stream: BoxStream<'s, Response>,
        next: NextSubscribe<'_>,
    ) -> BoxStream<'s, Response> {
        next.run(ctx, stream)
            .map(|mut response| {
                response.errors.iter_mut().for_each(assign_code);
                response
            })
            .boxed()
    }

    async fn parse_query(
        &self,
        ctx: &ExtensionContext<'_>,
        query: &str,
        variables: &Variables,
        next: NextParseQuery<'_>,
    ) -> ServerResult<ExecutableDocument> {
        next.run(ctx, query, variables).await.map_err(|mut err| {
            set_code(&mut err, PARSE_FAILED);
            err
        })
    }

    async fn validation(
        &self,
        ctx: &ExtensionContext<'_>,
        next: NextValidation<'_>,
    ) -> Result<ValidationResult, Vec<ServerError>> {
        next.run(ctx).await.map_err(|mut errors| {
            for err in &mut errors {
                // A value of the wrong shape (bad enum value, wrong type) is the user's input;
                // anything else (unknown field, limits exceeded) is an invalid document.
                let code = if err.message.starts_with("Invalid value for argument")
                    || err.message.starts_with("Invalid value for variable")
                {
                    "BAD_USER_INPUT"
                } else {
                    VALIDATION_FAILED
                };
                set_code(err, code);
            }
            errors
        })
    }
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

fn assign_code(err: &mut ServerError) {
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
        None => {
            tracing::error!(path = ?err.path, error = %err.message, "unclassified error while resolving");
            err.message = "internal server error".to_owned();
            set_code(err, "INTERNAL_SERVER_ERROR");
        }
    }
}
