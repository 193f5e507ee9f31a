//! The compiled path: a query of one session's tree (`session(id:)` and, below it, the fields
//! [`fields`] lists) answered from one statement ([`crate::store::tree`]) instead of a
//! statement per relationship and level, and without resolving field by field. The answer is
//! the one the resolvers would give, byte for byte (the `compiled_reads` tests compare the two
//! on random selections); any query it does not answer exactly goes to the resolvers.

mod answer;
mod connection;
mod fields;
mod plan;

use async_graphql::indexmap::IndexMap;
use async_graphql::parser::types::ExecutableDocument;
use async_graphql::{PathSegment, Response, ServerError, Value, Variables};

use crate::api::Limits;
use crate::api::pagination::edges_of;
use crate::api::runner::response_size::ResponseSize;
use crate::api::runner::selected_operation;
use crate::auth::Identity;
use crate::cursor::session_cursor;
use crate::error::{Error, Result};
use crate::store::Store;
use crate::store::sessions::{SessionFilter, SessionSort};
use connection::Edge;
use plan::{Arguments, SessionQuery, SessionsQuery};

/// A query the compiled path answers.
pub enum Compiled {
    Session(SessionQuery),
    Sessions(SessionsQuery),
}

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
        plan::session_query(&args, identity)
            .map(Compiled::Session)
            .or_else(|| plan::sessions_query(&args, identity).map(Compiled::Sessions))
    }

    /// Reads the trees and answers; `None` when what it read changed under it (a listed
    /// session purged before its tree was read), for the resolvers to answer.
    pub async fn run(&self, store: &Store, size: &ResponseSize) -> Option<Response> {
        let (key, pos, answer, nullable) = match self {
            Compiled::Session(query) => (
                &query.key,
                query.pos,
                session(query, store, size).await,
                true,
            ),
            Compiled::Sessions(query) => (
                &query.key,
                query.pos,
                sessions(query, store, size).await?,
                false,
            ),
        };
        Some(match answer {
            Ok(value) => Response::new(Value::Object(IndexMap::from([(key.clone(), value)]))),
            Err(err) => {
                // As a failed root field (coded and logged at the edge): null, or, for the
                // non-null `sessions`, no data at all.
                let mut err: ServerError =
                    async_graphql::Error::new_with_source(err).into_server_error(pos);
                err.path = vec![PathSegment::Field(key.to_string())];
                let data = if nullable {
                    Value::Object(IndexMap::from([(key.clone(), Value::Null)]))
                } else {
                    Value::Null
                };
                let mut response = Response::new(data);
                response.errors.push(err);
                response
            }
        })
    }
}

/// A session's tree: one statement (one round trip).
async fn session(query: &SessionQuery, store: &Store, size: &ResponseSize) -> Result<Value> {
    crate::observe::request::count_round_trip();
    match store.session_tree(query.session, &query.level).await? {
        None => Ok(Value::Null),
        Some(record) => answer::object(&query.object, &query.level, &record, size).map_err(unbuilt),
    }
}

/// A page of sessions (read as the resolver reads it), then their trees: two round trips;
/// `None` when a listed session has no tree (purged in between).
async fn sessions(
    query: &SessionsQuery,
    store: &Store,
    size: &ResponseSize,
) -> Option<Result<Value>> {
    let sort = SessionSort::CreatedAt;
    crate::observe::request::count_round_trip();
    let page = match store
        .list_sessions(&SessionFilter::default(), sort, true, &query.slice)
        .await
    {
        Ok(page) => page,
        Err(err) => return Some(Err(err)),
    };
    let ids: Vec<_> = page.rows.iter().map(|listed| listed.session.id).collect();
    let trees = if query.connection.selects_nodes() {
        crate::observe::request::count_round_trip();
        match store.session_trees(&ids, &query.level).await {
            Ok(trees) if trees.iter().all(Option::is_some) => trees,
            Ok(_) => return None,
            Err(err) => return Some(Err(err)),
        }
    } else {
        vec![None; ids.len()]
    };
    let (cursors, info) = edges_of(
        page,
        |listed| session_cursor(sort, sort.key_of(&listed)),
        |cursor| cursor,
    );
    let edges: Vec<_> = (cursors.iter().zip(&trees))
        .map(|(cursor, tree)| Edge {
            row: tree.as_deref().unwrap_or_default(),
            cursor: Some(cursor.as_str()),
        })
        .collect();
    Some(
        query
            .connection
            .answer(&edges, Some(&info), |node, record| {
                answer::object(node, &query.level, record, size)
            })
            .map_err(unbuilt),
    )
}

/// An answer that could not be built from what was read.
fn unbuilt(err: String) -> Error {
    Error::Internal(format!("a compiled answer: {err}"))
}
