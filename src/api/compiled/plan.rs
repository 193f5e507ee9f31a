//! A query's selection, read into the tree one statement reads ([`Level`]) and the shape of
//! the answer made from it ([`Object`]). Anything the compiled path does not answer exactly as
//! the resolvers would (a field it does not list, an argument past the first page, a fragment,
//! a directive, a response key given twice) makes the plan `None`: the query goes to the
//! resolvers.

use async_graphql::parser::types::{
    Field as Selected, OperationDefinition, Selection, SelectionSet,
};
use async_graphql::{Name, Pos, Positioned, Value, Variables};

use async_graphql::parser::types::OperationType;
use uuid::Uuid;

use super::connection::{self, Connection, Cursors};
use super::fields::{Field, ObjectType, SESSION, SESSIONS};
use crate::api::Limits;
use crate::api::ids::{self, NodeType};
use crate::api::pagination::{DEFAULT_PAGE_SIZE, PageArgs};
use crate::auth::Identity;
use crate::cursor::decode_session_cursor;
use crate::model::Role;
use crate::store::page::Slice;
use crate::store::sessions::{SessionKey, SessionSort};
use crate::store::tree::{Column, Level, Rows};

/// The most levels (subqueries) one compiled statement reads: a session page has 6, every
/// relationship under every level about 20.
const MAX_LEVELS: usize = 32;

/// How many levels `level` and those below it are.
fn levels(level: &Level) -> usize {
    1 + level.below.iter().map(levels).sum::<usize>()
}

/// A query answered from one session's tree: `session(id:)` alone, for a caller who may read
/// it.
pub struct SessionQuery {
    pub session: Uuid,
    /// The root field's response key, and where it is in the document.
    pub key: Name,
    pub pos: Pos,
    pub level: Level,
    pub object: Object,
}

/// A query answered from a page of sessions and their trees: `sessions(first:, after:)` alone,
/// newest first and unfiltered, for a reader.
pub struct SessionsQuery {
    pub key: Name,
    pub pos: Pos,
    pub slice: Slice<SessionKey>,
    /// The page's selection; its nodes select of each session's tree (the root level).
    pub connection: Connection<Object>,
    pub level: Level,
}

/// The plan of a page of sessions, if the compiled path answers it.
pub fn sessions_query(args: &Arguments<'_>, identity: Option<&Identity>) -> Option<SessionsQuery> {
    let (key, pos, root) = root_field(args.operation, "sessions")?;
    // The field's guard: a reader, not a share link.
    let identity = identity?;
    if identity.scope.is_some() || identity.role < Role::Reader {
        return None;
    }
    if root
        .arguments
        .iter()
        .any(|(argument, _)| !["first", "after"].contains(&argument.node.as_str()))
    {
        return None;
    }
    let first = match args.get(root, "first") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => Some(i32::try_from(n.as_i64()?).ok()?),
        Some(_) => return None,
    };
    let after = match args.get(root, "after") {
        None | Some(Value::Null) => None,
        Some(Value::String(cursor)) => Some(cursor),
        Some(_) => return None,
    };
    let page = PageArgs {
        first,
        after,
        last: None,
        before: None,
    };
    // A page size or cursor the resolver refuses is refused in its words.
    let slice = page
        .slice(args.limits, |cursor| {
            decode_session_cursor(cursor, SessionSort::CreatedAt)
        })
        .ok()?;
    let mut level = empty_level(Rows::Session, None);
    let connection = connection::plan(&SESSIONS, &root.selection_set, Cursors::Answered, |set| {
        object(&SESSION, set, &mut level, args)
    })?;
    if levels(&level) > MAX_LEVELS {
        return None;
    }
    Some(SessionsQuery {
        key: key.clone(),
        pos,
        slice,
        connection,
        level,
    })
}

/// The operation's one root field, if it is a query of `name` alone.
fn root_field<'a>(
    operation: &'a OperationDefinition,
    name: &str,
) -> Option<(&'a Name, Pos, &'a Selected)> {
    if operation.ty != OperationType::Query || !operation.directives.is_empty() {
        return None;
    }
    let [(key, root)] = fields_of(&operation.selection_set.node)?[..] else {
        return None;
    };
    (root.name.node == name).then_some((key, operation.selection_set.node.items[0].pos, root))
}

/// The plan of `operation`, if the compiled path answers it.
pub fn session_query(args: &Arguments<'_>, identity: Option<&Identity>) -> Option<SessionQuery> {
    let (key, pos, root) = root_field(args.operation, "session")?;
    if root.arguments.len() != 1 {
        return None;
    }
    let Some(Value::String(id)) = args.get(root, "id") else {
        return None;
    };
    let session = ids::decode_as(NodeType::Session, &id).ok()?;
    // What the field's guard and resolver check; a refusal is theirs to word.
    let identity = identity?;
    if !identity.may_read(session) || (identity.scope.is_none() && identity.role < Role::Reader) {
        return None;
    }
    let mut level = empty_level(Rows::Session, None);
    let object = object(&SESSION, &root.selection_set, &mut level, args)?;
    // A statement of many subqueries costs PostgreSQL more to plan than the query's cost
    // says (aliases of cheap pages): past a few, the resolvers batch them instead.
    if levels(&level) > MAX_LEVELS {
        return None;
    }
    Some(SessionQuery {
        session,
        key: key.clone(),
        pos,
        level,
        object,
    })
}

/// An object of the answer: each response key and what answers it.
pub struct Object {
    pub outputs: Vec<(Name, Output)>,
}

pub enum Output {
    Typename(&'static str),
    /// A column of the record (by index), made a value by the field.
    Column {
        column: usize,
        field: &'static Field,
    },
    GlobalId {
        column: usize,
        node: NodeType,
    },
    /// A list of the records of a level below (by index among the levels below).
    List {
        below: usize,
        object: Object,
    },
    /// The one record of a level below, or null.
    One {
        below: usize,
        object: Object,
    },
    /// A connection over the records of a level below.
    Page {
        below: usize,
        connection: Connection<Object>,
    },
}

/// What the plan reads arguments with.
pub struct Arguments<'a> {
    pub operation: &'a OperationDefinition,
    pub variables: &'a Variables,
    pub limits: &'a Limits,
}

impl Arguments<'_> {
    /// The value of `field`'s argument `name`, with variables (and their defaults) put in;
    /// `None` when it is not given.
    fn get(&self, field: &Selected, name: &str) -> Option<Value> {
        let value = field.get_argument(name)?;
        value
            .node
            .clone()
            .into_const_with(|variable| {
                Ok::<_, ()>(match self.variables.get(&variable) {
                    Some(value) => value.clone(),
                    None => self
                        .operation
                        .variable_definitions
                        .iter()
                        .find(|definition| definition.node.name.node == variable)
                        .and_then(|definition| definition.node.default_value.as_ref())
                        .map(|default| default.node.clone())
                        .unwrap_or(Value::Null),
                })
            })
            .ok()
    }

    /// The page size `first` asks for (the default without it), if the resolvers would accept
    /// it.
    fn first(&self, field: &Selected) -> Option<i64> {
        let max = self.limits.max_page_size;
        match self.get(field, "first") {
            None | Some(Value::Null) => Some(DEFAULT_PAGE_SIZE.min(max) as i64),
            Some(Value::Number(n)) => n.as_i64().filter(|&n| n >= 0 && n as usize <= max),
            Some(_) => None,
        }
    }
}

/// The fields of a selection set by response key, if it holds fields alone, without
/// directives, each key once.
pub(super) fn fields_of(set: &SelectionSet) -> Option<Vec<(&Name, &Selected)>> {
    let mut fields: Vec<(&Name, &Selected)> = Vec::with_capacity(set.items.len());
    for item in &set.items {
        let Selection::Field(field) = &item.node else {
            return None;
        };
        let field = &field.node;
        let key = &field.response_key().node;
        if !field.directives.is_empty() || fields.iter().any(|(seen, _)| *seen == key) {
            return None;
        }
        fields.push((key, field));
    }
    Some(fields)
}

/// The object `set` selects of `ty`, its columns and levels below added to `level`.
pub fn object(
    ty: &'static ObjectType,
    set: &Positioned<SelectionSet>,
    level: &mut Level,
    args: &Arguments<'_>,
) -> Option<Object> {
    let mut outputs = Vec::new();
    for (key, selected) in fields_of(&set.node)? {
        let name = selected.name.node.as_str();
        if name == "__typename" {
            outputs.push((key.clone(), Output::Typename(ty.name)));
            continue;
        }
        let field = ty.field(name)?;
        // Only a page's `first`, the chats' `includeDeleted` and the agents'
        // `includeSubAgents` are read: any other argument is for the resolvers.
        let allowed: &[&str] = match field {
            Field::Page {
                rows: Rows::Chats { .. },
                ..
            } => &["first", "includeDeleted"],
            Field::Page { .. } => &["first"],
            Field::List {
                rows: Rows::Executions { .. },
                ..
            } => &["includeSubAgents"],
            _ => &[],
        };
        if selected
            .arguments
            .iter()
            .any(|(argument, _)| !allowed.contains(&argument.node.as_str()))
        {
            return None;
        }
        let output = match field {
            Field::Column { column, .. } => Output::Column {
                column: column_of(level, *column),
                field,
            },
            Field::GlobalId(node) => Output::GlobalId {
                column: column_of(level, Column::Value("id")),
                node: *node,
            },
            Field::List { of, rows } => {
                let mut below = empty_level(chosen_rows(*rows, selected, args)?, None);
                let object = object(of, &selected.selection_set, &mut below, args)?;
                Output::List {
                    below: push_below(level, below),
                    object,
                }
            }
            Field::One { of, rows } => {
                let mut below = empty_level(*rows, None);
                let object = object(of, &selected.selection_set, &mut below, args)?;
                Output::One {
                    below: push_below(level, below),
                    object,
                }
            }
            Field::Page { of, rows } => {
                let rows = chosen_rows(*rows, selected, args)?;
                let mut below = empty_level(rows, Some(args.first(selected)?));
                // A page nested in a tree is read without its edges' keys: no cursors.
                let connection =
                    connection::plan(of, &selected.selection_set, Cursors::Unanswered, |set| {
                        object(of.node, set, &mut below, args)
                    })?;
                Output::Page {
                    below: push_below(level, below),
                    connection,
                }
            }
        };
        outputs.push((key.clone(), output));
    }
    Some(Object { outputs })
}

/// A level of `rows` (at most `limit`) before its columns and levels below are added.
fn empty_level(rows: Rows, limit: Option<i64>) -> Level {
    Level {
        rows,
        columns: Vec::new(),
        limit,
        below: Vec::new(),
    }
}

/// Adds `below` under `level`: its index among the levels below.
fn push_below(level: &mut Level, below: Level) -> usize {
    level.below.push(below);
    level.below.len() - 1
}

/// The rows a relationship reads, as its boolean argument chooses (the agents' sub-agents, the
/// chats' deleted ones), with the resolvers' defaults.
fn chosen_rows(rows: Rows, selected: &Selected, args: &Arguments<'_>) -> Option<Rows> {
    let flag = |name: &str, default: bool| match args.get(selected, name) {
        None => Some(default),
        Some(Value::Boolean(chosen)) => Some(chosen),
        Some(_) => None,
    };
    Some(match rows {
        Rows::Executions { .. } => Rows::Executions {
            sub_agents: flag("includeSubAgents", true)?,
        },
        Rows::Chats { .. } => Rows::Chats {
            include_deleted: flag("includeDeleted", false)?,
        },
        rows => rows,
    })
}

/// The index of `column` among the level's columns, added if it is not there yet.
fn column_of(level: &mut Level, column: Column) -> usize {
    match level.columns.iter().position(|c| *c == column) {
        Some(at) => at,
        None => {
            level.columns.push(column);
            level.columns.len() - 1
        }
    }
}
