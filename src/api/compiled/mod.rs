//! The compiled path: a query of one session's tree (`session(id:)` and, below it, the fields
//! [`fields`] lists) answered from one statement ([`crate::store::tree`]) instead of a
//! statement per relationship and level, and without resolving field by field. The answer is
//! the one the resolvers would give, byte for byte (the `compiled_reads` tests compare the two
//! on random selections); any query it does not answer exactly goes to the resolvers.

mod answer;
mod fields;
mod plan;

use async_graphql::indexmap::IndexMap;
use async_graphql::parser::types::ExecutableDocument;
use async_graphql::{PathSegment, Response, ServerError, Value, Variables};

use crate::api::Limits;
use crate::api::runner::response_size::ResponseSize;
use crate::api::runner::selected_operation;
use crate::auth::Identity;
use crate::store::Store;
use plan::{Arguments, SessionQuery};

/// A query the compiled path answers.
pub struct Compiled(SessionQuery);

impl Compiled {
    /// The plan of the request's operation, if this path answers it.
    pub fn plan(
        document: &ExecutableDocument,
        operation_name: Option<&str>,
        variables: &Variables,
        identity: Option<&Identity>,
        limits: &Limits,
    ) -> Option<Compiled> {
        let (_, operation) = selected_operation(document, operation_name)?;
        let args = Arguments {
            operation,
            variables,
            limits,
        };
        plan::session_query(&args, identity).map(Compiled)
    }

    /// Reads the tree and answers.
    pub async fn run(&self, store: &Store, size: &ResponseSize) -> Response {
        let SessionQuery {
            session,
            key,
            pos,
            level,
            object,
        } = &self.0;
        crate::observe::request::count_round_trip();
        let answer = match store.session_tree(*session, level).await {
            Ok(None) => Ok(Value::Null),
            Ok(Some(record)) => answer::object(object, level, &record, size)
                .map_err(|err| crate::error::Error::Internal(format!("a compiled answer: {err}"))),
            Err(err) => Err(err),
        };
        let (value, error) = match answer {
            Ok(value) => (value, None),
            Err(err) => (Value::Null, Some(err)),
        };
        let mut response = Response::new(Value::Object(IndexMap::from([(key.clone(), value)])));
        if let Some(err) = error {
            // As a failed root field: null, with its error (coded and logged at the edge).
            let mut err: ServerError =
                async_graphql::Error::new_with_source(err).into_server_error(*pos);
            err.path = vec![PathSegment::Field(key.to_string())];
            response.errors.push(err);
        }
        response
    }
}
