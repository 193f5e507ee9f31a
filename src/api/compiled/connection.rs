//! A connection's selection (type names, `edges { cursor node }`, `pageInfo`) read into a plan,
//! and the answer made from it: one reader and one writer for every page the compiled path
//! answers, the sessions of a list and the pages nested in a tree alike.

use async_graphql::connection::PageInfo;
use async_graphql::indexmap::IndexMap;
use async_graphql::parser::types::SelectionSet;
use async_graphql::{Name, Positioned, Value};

use super::fields::ConnectionType;
use super::plan::fields_of;

/// What a connection's selection asks for, each part under its response key; `N` is the plan
/// of its nodes.
pub struct Connection<N> {
    pub outputs: Vec<(Name, Part<N>)>,
}

pub enum Part<N> {
    Typename(&'static str),
    Edges(Vec<(Name, EdgePart<N>)>),
    PageInfo(Vec<(Name, PageInfoPart)>),
}

pub enum EdgePart<N> {
    Typename(&'static str),
    Cursor,
    Node(N),
}

pub enum PageInfoPart {
    Typename,
    HasPreviousPage,
    HasNextPage,
    StartCursor,
    EndCursor,
}

/// Whether a connection's answer can hold cursors and page information: a list read as its
/// resolver reads it can, a page nested in a tree (read without its edges' keys) cannot, and
/// a selection of them goes to the resolvers.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Cursors {
    Answered,
    Unanswered,
}

/// The plan of `set`, a selection of a connection of type `ty`, its nodes planned by `node`;
/// `None` for anything else (an argument, a count, a cursor where `cursors` has none).
pub fn plan<N>(
    ty: &ConnectionType,
    set: &Positioned<SelectionSet>,
    cursors: Cursors,
    mut node: impl FnMut(&Positioned<SelectionSet>) -> Option<N>,
) -> Option<Connection<N>> {
    let answered = cursors == Cursors::Answered;
    let mut outputs = Vec::new();
    for (key, selected) in fields_of(&set.node)? {
        if !selected.arguments.is_empty() {
            return None;
        }
        let part = match selected.name.node.as_str() {
            "__typename" => Part::Typename(ty.name),
            "edges" => {
                let mut edges = Vec::new();
                for (key, selected) in fields_of(&selected.selection_set.node)? {
                    if !selected.arguments.is_empty() {
                        return None;
                    }
                    let part = match selected.name.node.as_str() {
                        "__typename" => EdgePart::Typename(ty.edge),
                        "cursor" if answered => EdgePart::Cursor,
                        "node" => EdgePart::Node(node(&selected.selection_set)?),
                        _ => return None,
                    };
                    edges.push((key.clone(), part));
                }
                Part::Edges(edges)
            }
            "pageInfo" if answered => {
                let mut info = Vec::new();
                for (key, selected) in fields_of(&selected.selection_set.node)? {
                    if !selected.arguments.is_empty() {
                        return None;
                    }
                    let part = match selected.name.node.as_str() {
                        "__typename" => PageInfoPart::Typename,
                        "hasPreviousPage" => PageInfoPart::HasPreviousPage,
                        "hasNextPage" => PageInfoPart::HasNextPage,
                        "startCursor" => PageInfoPart::StartCursor,
                        "endCursor" => PageInfoPart::EndCursor,
                        _ => return None,
                    };
                    info.push((key.clone(), part));
                }
                Part::PageInfo(info)
            }
            _ => return None,
        };
        outputs.push((key.clone(), part));
    }
    Some(Connection { outputs })
}

/// An edge to answer: its node's row, and its cursor when the connection has cursors.
pub struct Edge<'a, R> {
    pub row: R,
    pub cursor: Option<&'a str>,
}

impl<N> Connection<N> {
    /// Whether any edge selects its node (else no node need be read).
    pub fn selects_nodes(&self) -> bool {
        self.outputs.iter().any(|(_, part)| {
            matches!(part, Part::Edges(edges) if edges.iter().any(|(_, e)| matches!(e, EdgePart::Node(_))))
        })
    }

    /// The answer over `edges`, each node's made by `node`; `info` is where the page is (for
    /// a plan with cursors).
    pub fn answer<R: Copy>(
        &self,
        edges: &[Edge<'_, R>],
        info: Option<&PageInfo>,
        mut node: impl FnMut(&N, R) -> Result<Value, String>,
    ) -> Result<Value, String> {
        let mut fields = IndexMap::with_capacity(self.outputs.len());
        for (key, part) in &self.outputs {
            let value = match part {
                Part::Typename(name) => Value::String((*name).to_owned()),
                Part::PageInfo(parts) => {
                    let info = info.ok_or("page information without a page read for it")?;
                    let cursor = |c: &Option<String>| c.clone().map_or(Value::Null, Value::String);
                    let mut info_fields = IndexMap::with_capacity(parts.len());
                    for (key, part) in parts {
                        let value = match part {
                            PageInfoPart::Typename => Value::String("PageInfo".to_owned()),
                            PageInfoPart::HasPreviousPage => Value::Boolean(info.has_previous_page),
                            PageInfoPart::HasNextPage => Value::Boolean(info.has_next_page),
                            PageInfoPart::StartCursor => cursor(&info.start_cursor),
                            PageInfoPart::EndCursor => cursor(&info.end_cursor),
                        };
                        info_fields.insert(key.clone(), value);
                    }
                    Value::Object(info_fields)
                }
                Part::Edges(parts) => {
                    let mut list = Vec::with_capacity(edges.len());
                    for edge in edges {
                        let mut edge_fields = IndexMap::with_capacity(parts.len());
                        for (key, part) in parts {
                            let value = match part {
                                EdgePart::Typename(name) => Value::String((*name).to_owned()),
                                EdgePart::Cursor => Value::String(
                                    edge.cursor
                                        .ok_or("a cursor without a page read for it")?
                                        .to_owned(),
                                ),
                                EdgePart::Node(plan) => node(plan, edge.row)?,
                            };
                            edge_fields.insert(key.clone(), value);
                        }
                        list.push(Value::Object(edge_fields));
                    }
                    Value::List(list)
                }
            };
            fields.insert(key.clone(), value);
        }
        Ok(Value::Object(fields))
    }
}
