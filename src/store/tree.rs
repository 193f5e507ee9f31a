//! A session's tree read in one statement: the session, and below it any of its relationships
//! that a query selects (stages, their agents and sub-agents, the pages of their timelines,
//! messages and LLM and MCP interactions), each level an array of records nested in its
//! parent's record, each record holding only the columns asked for. PostgreSQL sends it in its
//! binary form, which [`binary`] reads without a text round trip; the GraphQL layer
//! ([`crate::api::compiled`]) turns it into a response.
//!
//! Every level names the session as the statement's one parameter, so a table partitioned or
//! sharded by session is pruned as the statement starts.

mod binary;

use uuid::Uuid;

pub use binary::Datum;

use super::{Record as _, Scope, Store, TimelineEventRow};
use crate::error::{Error, Result};

/// What a level of the tree reads: which rows, in which order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rows {
    /// The session itself (the root).
    Session,
    /// A session's stages, by stage index.
    Stages,
    /// A stage's agents, by agent index; with the sub-agents they spawned, or without.
    Executions { sub_agents: bool },
    /// The sub-agents an agent spawned, by agent index.
    SubAgents,
    /// A page of the timeline of a session, stage or agent, in sequence order.
    Timeline(Scope),
    /// A page of the messages of a stage or agent, in conversation order.
    Messages(Scope),
    /// A page of the LLM interactions of a session, stage or agent, in time order.
    LlmInteractions(Scope),
    /// A page of the MCP interactions of a session, stage or agent, in time order.
    McpInteractions(Scope),
    /// A page of the messages an LLM interaction sent, in the order sent (each with its
    /// `position` there): its agent's conversation up to its last message, or the messages it
    /// recorded (`sent_message_ids`), as [`super::SentMessageRow`] reads them.
    Conversation,
    /// The last message an LLM interaction sent (none, or one).
    LastMessage,
    /// A page of a session's chats, oldest first; the deleted ones too, or not.
    Chats { include_deleted: bool },
    /// A page of the questions asked in a chat, oldest first.
    Questions,
}

impl Rows {
    /// The table (or view, or subquery of the parent's row) read, the condition that ties a
    /// row (aliased `r`) to its parent (aliased `p`), and the rows' order (empty: at most one
    /// row).
    fn source(self, r: &str, p: &str, session: &str) -> (String, String, String) {
        let under = |scope: Scope| format!("{r}.{} = {p}.id", scope.column());
        let (table, under, order) = match self {
            Rows::Session => ("sessions", format!("{r}.id = {session}"), String::new()),
            Rows::Stages => ("stages", under(Scope::Session), format!("{r}.stage_index")),
            Rows::Executions { sub_agents } => {
                let top_level = if sub_agents {
                    String::new()
                } else {
                    format!(" AND {r}.parent_execution_id IS NULL")
                };
                (
                    "agent_executions",
                    format!("{r}.stage_id = {p}.id{top_level}"),
                    format!("{r}.agent_index"),
                )
            }
            Rows::SubAgents => (
                "agent_executions",
                format!("{r}.parent_execution_id = {p}.id"),
                format!("{r}.agent_index"),
            ),
            Rows::Timeline(scope) => {
                return (
                    TimelineEventRow::source(Some(session)).into_owned(),
                    under(scope),
                    format!("{r}.sequence_number"),
                );
            }
            Rows::Messages(scope) => (
                "messages",
                under(scope),
                format!("{r}.execution_id, {r}.sequence_number"),
            ),
            Rows::LlmInteractions(scope) => (
                "llm_interactions",
                under(scope),
                format!("{r}.created_at, {r}.id"),
            ),
            Rows::McpInteractions(scope) => (
                "mcp_interactions",
                under(scope),
                format!("{r}.created_at, {r}.id"),
            ),
            Rows::LastMessage => (
                "messages",
                format!("{r}.id = {p}.last_message_id"),
                String::new(),
            ),
            Rows::Chats { include_deleted } => {
                let mut under = under(Scope::Session);
                if !include_deleted {
                    under.push_str(&format!(" AND {r}.deleted_at IS NULL"));
                }
                ("chats", under, format!("{r}.created_at, {r}.id"))
            }
            Rows::Questions => (
                "chat_user_messages",
                format!("{r}.chat_id = {p}.id"),
                format!("{r}.created_at, {r}.id"),
            ),
            // The two cases of `SentMessageRow`'s relation, for the one interaction `p`.
            Rows::Conversation => {
                let sent = format!(
                    "(SELECT m.*, m.sequence_number AS position FROM messages m \
                     WHERE {p}.sent_message_ids IS NULL AND m.execution_id = {p}.execution_id \
                     AND m.session_id = {session} AND m.sequence_number <= \
                     (SELECT last.sequence_number FROM messages last \
                     WHERE last.id = {p}.last_message_id AND last.session_id = {session}) \
                     UNION ALL SELECT m.*, s.position::integer FROM \
                     unnest({p}.sent_message_ids) WITH ORDINALITY AS s(id, position) \
                     JOIN messages m ON m.id = s.id AND m.session_id = {session})"
                );
                return (
                    sent,
                    "TRUE".to_owned(),
                    format!("{r}.execution_id, {r}.position"),
                );
            }
        };
        (table.to_owned(), under, order)
    }
}

/// What a record holds of a column of the level's table (by name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    /// Its value.
    Value(&'static str),
    /// Whether it is null: a boolean, without reading the value (a long text, a large array).
    IsNull(&'static str),
}

/// A level of the tree: its rows, the columns of each, at most how many (a page), and the
/// levels below each row. A record holds the columns, then one array per level below, in this
/// order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Level {
    pub rows: Rows,
    pub columns: Vec<Column>,
    pub limit: Option<i64>,
    pub below: Vec<Level>,
}

impl Store {
    /// The session `id` with the levels below it that `root` asks for (`root.rows` is
    /// [`Rows::Session`]): its record, `None` when there is no such session.
    pub async fn session_tree(&self, id: Uuid, root: &Level) -> Result<Option<Vec<Datum>>> {
        let (sql, limits) = tree_statement(root, Sessions::One);
        let mut query = sqlx::query(&sql).bind(id);
        for limit in limits {
            query = query.bind(limit);
        }
        let row = query.fetch_optional(self.reader().await?.traced()).await?;
        row.map(|row| record_in(&row, 0)).transpose()
    }

    /// The trees of the sessions `ids` (as [`Store::session_tree`] reads one), in their order;
    /// `None` for an id no session has.
    pub async fn session_trees(
        &self,
        ids: &[Uuid],
        root: &Level,
    ) -> Result<Vec<Option<Vec<Datum>>>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let (sql, limits) = tree_statement(root, Sessions::Many);
        let mut query = sqlx::query(&sql).bind(ids);
        for limit in limits {
            query = query.bind(limit);
        }
        let rows = query.fetch_all(self.reader().await?.traced()).await?;
        let mut trees = vec![None; ids.len()];
        for row in rows {
            let ord: i64 = sqlx::Row::try_get(&row, 0)?;
            let at = usize::try_from(ord - 1).ok().filter(|at| *at < ids.len());
            let at = at.ok_or_else(|| Error::Internal(format!("a tree of key {ord}")))?;
            trees[at] = Some(record_in(&row, 1)?);
        }
        Ok(trees)
    }
}

/// The record in column `column` of `row`.
fn record_in(row: &sqlx::postgres::PgRow, column: usize) -> Result<Vec<Datum>> {
    let bytes = sqlx::Row::try_get_raw(row, column)?
        .as_bytes()
        .map_err(|err| Error::Internal(format!("a session tree without its record: {err}")))?;
    binary::record(bytes).map_err(|err| Error::Internal(format!("a session tree unread: {err}")))
}

/// Which sessions a statement reads the trees of, and so what each level names as its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sessions {
    /// One, the parameter `$1`: each level is pruned to its partition as the statement starts.
    One,
    /// Those of the array `$1`, each level in its root's session (`r0.id`).
    Many,
}

/// The statement that reads the trees `root` describes, and the page limits it binds after
/// `$1` (`$2`, …).
fn tree_statement(root: &Level, sessions: Sessions) -> (String, Vec<i64>) {
    let mut limits = Vec::new();
    let session = match sessions {
        Sessions::One => "$1",
        Sessions::Many => "r0.id",
    };
    let record = record_of(root, 0, session, &mut limits);
    let sql = match sessions {
        Sessions::One => format!("SELECT {record} FROM sessions r0 WHERE r0.id = $1"),
        Sessions::Many => format!(
            "SELECT k.ord, {record} FROM unnest($1::uuid[]) WITH ORDINALITY AS k (id, ord) \
             JOIN sessions r0 ON r0.id = k.id"
        ),
    };
    (sql, limits)
}

/// `level`'s record, its rows aliased `r{depth}`: its columns, then an array per level below.
fn record_of(level: &Level, depth: usize, session: &str, limits: &mut Vec<i64>) -> String {
    let alias = format!("r{depth}");
    let mut fields: Vec<String> = level
        .columns
        .iter()
        .map(|column| match column {
            Column::Value(name) => format!("{alias}.{name}"),
            Column::IsNull(name) => format!("{alias}.{name} IS NULL"),
        })
        .collect();
    for below in &level.below {
        fields.push(array_of(below, depth + 1, session, limits));
    }
    // A record of one field is still a record (`ROW(x)`); of none, `ROW()`.
    format!("ROW({})", fields.join(", "))
}

/// The array of the rows of `level` under their parent (aliased `r{depth - 1}`), in `session`.
fn array_of(level: &Level, depth: usize, session: &str, limits: &mut Vec<i64>) -> String {
    let (alias, parent) = (format!("r{depth}"), format!("r{}", depth - 1));
    let (table, under, order) = level.rows.source(&alias, &parent, session);
    let record = record_of(level, depth, session, limits);
    let limit = match level.limit {
        Some(limit) => {
            limits.push(limit);
            format!(" LIMIT ${}", limits.len() + 1)
        }
        None => String::new(),
    };
    // Every level names its session (for one session, the statement's parameter: pruned as
    // it starts), unless its parent is the session.
    let in_session = format!("{alias}.session_id = {session}");
    let condition = if under
        .split(" AND ")
        .any(|condition| condition == in_session)
    {
        under
    } else {
        format!("{under} AND {in_session}")
    };
    let order = if order.is_empty() {
        order
    } else {
        format!(" ORDER BY {order}")
    };
    format!("ARRAY(SELECT {record} FROM {table} {alias} WHERE {condition}{order}{limit})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_level_is_an_array_under_its_parent_in_the_session() {
        let root = Level {
            rows: Rows::Session,
            columns: vec![Column::Value("id"), Column::IsNull("error_message")],
            limit: None,
            below: vec![Level {
                rows: Rows::Stages,
                columns: vec![Column::Value("id")],
                limit: None,
                below: vec![Level {
                    rows: Rows::Timeline(Scope::Stage),
                    columns: vec![Column::Value("id"), Column::Value("content")],
                    limit: Some(100),
                    below: vec![],
                }],
            }],
        };
        let (sql, limits) = tree_statement(&root, Sessions::One);
        // The live timeline of the session the statement names.
        let live = TimelineEventRow::source(Some("$1"));
        assert!(live.ends_with(" FROM timeline_events le WHERE le.session_id = $1)"));
        assert_eq!(
            sql,
            format!(
                "SELECT ROW(r0.id, r0.error_message IS NULL, ARRAY(SELECT ROW(r1.id, \
                 ARRAY(SELECT ROW(r2.id, r2.content) FROM {live} r2 WHERE r2.stage_id = r1.id \
                 AND r2.session_id = $1 ORDER BY r2.sequence_number LIMIT $2)) FROM stages r1 \
                 WHERE r1.session_id = r0.id AND r1.session_id = $1 ORDER BY r1.stage_index)) \
                 FROM sessions r0 WHERE r0.id = $1"
            )
        );
        assert_eq!(limits, vec![100]);
        // Many sessions: each level in its root's, named once where its parent is the session.
        let (sql, _) = tree_statement(&root, Sessions::Many);
        assert!(sql.starts_with(
            "SELECT k.ord, ROW(r0.id, r0.error_message IS NULL, ARRAY(SELECT ROW(r1.id, "
        ));
        assert!(sql.contains("FROM stages r1 WHERE r1.session_id = r0.id ORDER BY"));
        assert!(sql.contains(&format!(
            "FROM {} r2 WHERE r2.stage_id = r1.id AND r2.session_id = r0.id ORDER BY",
            TimelineEventRow::source(Some("r0.id"))
        )));
        assert!(sql.ends_with(
            "FROM unnest($1::uuid[]) WITH ORDINALITY AS k (id, ord) JOIN sessions r0 ON r0.id = k.id"
        ));
    }
}
