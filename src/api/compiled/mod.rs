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
use crate::api::pagination::edges_of;
use crate::api::runner::response_size::ResponseSize;
use crate::api::runner::selected_operation;
use crate::auth::Identity;
use crate::cursor::session_cursor;
use crate::error::{Error, Result};
use crate::store::Store;
use crate::store::sessions::{SessionFilter, SessionSort};
use plan::{Arguments, ListEdgeOutput, ListOutput, PageInfoOutput, SessionQuery, SessionsQuery};

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
    let trees = if query.outputs.iter().any(|(_, output)| {
        matches!(output, ListOutput::Edges(edges) if edges.iter().any(|(_, e)| matches!(e, ListEdgeOutput::Node(_))))
    }) {
        crate::observe::request::count_round_trip();
        match store.session_trees(&ids, &query.level).await {
            Ok(trees) if trees.iter().all(Option::is_some) => trees,
            Ok(_) => return None,
            Err(err) => return Some(Err(err)),
        }
    } else {
        vec![None; ids.len()]
    };
    let (edges, info) = edges_of(
        page,
        |listed| session_cursor(sort, sort.key_of(&listed)),
        |cursor| cursor,
    );
    let mut fields = IndexMap::with_capacity(query.outputs.len());
    for (key, output) in &query.outputs {
        let value = match output {
            ListOutput::Typename(name) => Value::String((*name).to_owned()),
            ListOutput::PageInfo(outputs) => {
                let mut info_fields = IndexMap::with_capacity(outputs.len());
                for (key, output) in outputs {
                    let cursor = |c: &Option<String>| c.clone().map_or(Value::Null, Value::String);
                    let value = match output {
                        PageInfoOutput::Typename => Value::String("PageInfo".to_owned()),
                        PageInfoOutput::HasPreviousPage => Value::Boolean(info.has_previous_page),
                        PageInfoOutput::HasNextPage => Value::Boolean(info.has_next_page),
                        PageInfoOutput::StartCursor => cursor(&info.start_cursor),
                        PageInfoOutput::EndCursor => cursor(&info.end_cursor),
                    };
                    info_fields.insert(key.clone(), value);
                }
                Value::Object(info_fields)
            }
            ListOutput::Edges(outputs) => {
                let mut list = Vec::with_capacity(edges.len());
                for (cursor, tree) in edges.iter().zip(&trees) {
                    let mut edge = IndexMap::with_capacity(outputs.len());
                    for (key, output) in outputs {
                        let value = match output {
                            ListEdgeOutput::Typename(name) => Value::String((*name).to_owned()),
                            ListEdgeOutput::Cursor => Value::String(cursor.clone()),
                            ListEdgeOutput::Node(object) => {
                                let record = tree.as_deref().unwrap_or_default();
                                match answer::object(object, &query.level, record, size) {
                                    Ok(value) => value,
                                    Err(err) => return Some(Err(unbuilt(err))),
                                }
                            }
                        };
                        edge.insert(key.clone(), value);
                    }
                    list.push(Value::Object(edge));
                }
                Value::List(list)
            }
        };
        fields.insert(key.clone(), value);
    }
    Some(Ok(Value::Object(fields)))
}

/// An answer that could not be built from what was read.
fn unbuilt(err: String) -> Error {
    Error::Internal(format!("a compiled answer: {err}"))
}
