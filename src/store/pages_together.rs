//! The pages one level of a query asks of its parents (the timeline, messages, LLM and MCP
//! interactions of its sessions, stages or executions), read by one statement: each
//! relationship's page statement is a branch of a `UNION ALL`, its rows told apart by `part`.
//! PostgreSQL pays a fixed cost for every statement (its protocol round, a transaction, executor
//! start-up and shut-down, the kept plan's revalidation) that outweighs the reading of the few
//! rows a page holds; apart, the four statements of an agent list also ran side by side, each
//! on a connection of its own, waking four backends for one level.
//!
//! The branches share one list of columns, by name: a column two relationships both have
//! (`id`, `session_id`, `created_at`, …) is one column, each branch leaves the others' columns
//! null, and a row decodes by name as its relationship's row. Which columns a branch has is what
//! PostgreSQL describes its statement as returning, prepared once per statement text and kept
//! ([`Descriptions`]). Should two relationships name a column alike with different types, the
//! pages are read one statement per relationship instead.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sqlx::postgres::{PgRow, PgTypeInfo};
use sqlx::{Column as _, Executor as _, PgConnection, Row as _, Statement as _, TypeInfo as _};
use uuid::Uuid;

use super::child_pages::{
    CountedPage, MessagePageKey, RecordPageKey, child_pages_from, child_pages_statement,
    in_time_order, messages_in_order,
};
use super::page::{KeyArrays, Page};
use super::timeline::{self, TimelineFilter, TimelinePageKey};
use super::{
    LlmInteractionInPage, McpInteractionInPage, MessageRow, Scope, Store, TimelineEventRow,
};
use crate::error::Result;

/// A page of one relationship of a session, stage or execution.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ChildPage {
    Timeline(TimelinePageKey),
    Messages(MessagePageKey),
    LlmInteractions(RecordPageKey),
    McpInteractions(RecordPageKey),
}

impl ChildPage {
    /// The session whose rows the page reads.
    pub fn session(&self) -> Uuid {
        match self {
            ChildPage::Timeline(key) => key.session,
            ChildPage::Messages(key) => key.session,
            ChildPage::LlmInteractions(key) | ChildPage::McpInteractions(key) => key.session,
        }
    }
}

/// What a [`ChildPage`] read: the page of its own relationship.
#[derive(Debug, Clone)]
pub enum PageRead {
    Timeline(Page<Arc<TimelineEventRow>>),
    Messages(CountedPage<Arc<MessageRow>>),
    LlmInteractions(CountedPage<Arc<LlmInteractionInPage>>),
    McpInteractions(CountedPage<Arc<McpInteractionInPage>>),
}

impl PageRead {
    pub fn timeline(self) -> Option<Page<Arc<TimelineEventRow>>> {
        match self {
            PageRead::Timeline(page) => Some(page),
            _ => None,
        }
    }

    pub fn messages(self) -> Option<CountedPage<Arc<MessageRow>>> {
        match self {
            PageRead::Messages(page) => Some(page),
            _ => None,
        }
    }

    pub fn llm_interactions(self) -> Option<CountedPage<Arc<LlmInteractionInPage>>> {
        match self {
            PageRead::LlmInteractions(page) => Some(page),
            _ => None,
        }
    }

    pub fn mcp_interactions(self) -> Option<CountedPage<Arc<McpInteractionInPage>>> {
        match self {
            PageRead::McpInteractions(page) => Some(page),
            _ => None,
        }
    }
}

/// One branch: the pages of one relationship (of one filter, for the timeline).
enum Part {
    Timeline(TimelineFilter, Vec<TimelinePageKey>),
    Messages(Vec<MessagePageKey>),
    LlmInteractions(Vec<RecordPageKey>),
    McpInteractions(Vec<RecordPageKey>),
}

impl Part {
    /// The branches `keys` need, in a fixed order (so that one shape of query always sends
    /// one statement text): the timeline's by filter, then messages, LLM and MCP interactions.
    fn of(keys: &[ChildPage]) -> Vec<Part> {
        let mut timeline: Vec<(TimelineFilter, Vec<TimelinePageKey>)> = Vec::new();
        let (mut messages, mut llm, mut mcp) = (Vec::new(), Vec::new(), Vec::new());
        for key in keys {
            match key {
                ChildPage::Timeline(key) => {
                    match timeline
                        .iter_mut()
                        .find(|(filter, _)| *filter == key.filter)
                    {
                        Some((_, keys)) => keys.push(key.clone()),
                        None => timeline.push((key.filter.clone(), vec![key.clone()])),
                    }
                }
                ChildPage::Messages(key) => messages.push(key.clone()),
                ChildPage::LlmInteractions(key) => llm.push(key.clone()),
                ChildPage::McpInteractions(key) => mcp.push(key.clone()),
            }
        }
        timeline.sort_by_cached_key(|(filter, _)| format!("{filter:?}"));
        let mut parts: Vec<Part> = timeline
            .into_iter()
            .map(|(filter, keys)| Part::Timeline(filter, keys))
            .collect();
        if !messages.is_empty() {
            parts.push(Part::Messages(messages));
        }
        for (keys, part) in [
            (llm, Part::LlmInteractions as fn(_) -> Part),
            (mcp, Part::McpInteractions),
        ] {
            if !keys.is_empty() {
                parts.push(part(keys));
            }
        }
        parts
    }

    /// The branch's statement, its parameters bound after those of `earlier`.
    fn statement(&self, scope: Scope, earlier: KeyArrays) -> Result<(String, KeyArrays)> {
        let by_time = || in_time_order(scope.column());
        match self {
            Part::Timeline(filter, keys) => timeline::pages_statement(scope, filter, keys, earlier),
            Part::Messages(keys) => {
                child_pages_statement::<MessageRow, _, _>(&messages_in_order(scope), keys, earlier)
            }
            Part::LlmInteractions(keys) => {
                child_pages_statement::<LlmInteractionInPage, _, _>(&by_time(), keys, earlier)
            }
            Part::McpInteractions(keys) => {
                child_pages_statement::<McpInteractionInPage, _, _>(&by_time(), keys, earlier)
            }
        }
    }

    /// The pages of the branch's keys from its rows.
    fn read(&self, rows: &[&PgRow], into: &mut HashMap<ChildPage, PageRead>) -> Result<()> {
        match self {
            Part::Timeline(_, keys) => into.extend(
                (timeline::pages_from(keys, rows)?.into_iter())
                    .map(|(key, page)| (ChildPage::Timeline(key), PageRead::Timeline(page))),
            ),
            Part::Messages(keys) => into.extend(
                (child_pages_from(keys, rows)?.into_iter())
                    .map(|(key, page)| (ChildPage::Messages(key), PageRead::Messages(page))),
            ),
            Part::LlmInteractions(keys) => into.extend(
                child_pages_from(keys, rows)?
                    .into_iter()
                    .map(|(key, page)| {
                        (
                            ChildPage::LlmInteractions(key),
                            PageRead::LlmInteractions(page),
                        )
                    }),
            ),
            Part::McpInteractions(keys) => into.extend(
                child_pages_from(keys, rows)?
                    .into_iter()
                    .map(|(key, page)| {
                        (
                            ChildPage::McpInteractions(key),
                            PageRead::McpInteractions(page),
                        )
                    }),
            ),
        }
        Ok(())
    }
}

/// A column a statement returns.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Column {
    name: String,
    type_info: PgTypeInfo,
}

/// Statement texts this many at most keep their descriptions (a text is one shape of page
/// statement: a few hundred exist); past it the kept ones are let go and described again.
const DESCRIPTIONS_KEPT: usize = 2048;

/// The columns PostgreSQL describes statements as returning, by statement text.
#[derive(Default)]
pub(super) struct Descriptions(Mutex<HashMap<String, Arc<[Column]>>>);

impl Descriptions {
    /// The columns `sql` returns, asked of PostgreSQL on `connection` the first time.
    async fn of(&self, connection: &mut PgConnection, sql: &str) -> Result<Arc<[Column]>> {
        if let Some(kept) = self.lock().get(sql) {
            return Ok(kept.clone());
        }
        // Prepared, as its execution would prepare it (`describe` would also ask the catalog
        // which columns may be null).
        let prepared = connection.prepare(sql).await?;
        let columns: Arc<[Column]> = (prepared.columns().iter())
            .map(|c| Column {
                name: c.name().to_owned(),
                type_info: c.type_info().clone(),
            })
            .collect();
        let mut kept = self.lock();
        if kept.len() >= DESCRIPTIONS_KEPT {
            kept.clear();
        }
        kept.insert(sql.to_owned(), columns.clone());
        Ok(columns)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<[Column]>>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Branches read by one statement, and the columns they share: every branch's, each name once.
#[derive(Debug, Default)]
struct Group {
    parts: Vec<usize>,
    columns: Vec<Arc<[Column]>>,
    shared: Vec<Column>,
    /// Whether its one branch cannot share (see [`Group::agrees_with`]).
    alone: bool,
}

impl Group {
    /// The branches of `columns` (each part's) in as few groups as they can share columns in,
    /// each part in the first group it agrees with: two parts that name a column alike with
    /// different types (a message's `sequence_number` is an `integer`, a timeline event's a
    /// `bigint`) are read by different statements.
    fn of(columns: Vec<Arc<[Column]>>) -> Vec<Group> {
        let mut groups: Vec<Group> = Vec::new();
        for (part, columns) in columns.into_iter().enumerate() {
            match groups.iter_mut().find(|g| g.agrees_with(&columns)) {
                Some(group) => group.add(part, columns),
                None => {
                    let mut group = Group::default();
                    group.alone = !group.agrees_with(&columns);
                    group.add(part, columns);
                    groups.push(group);
                }
            }
        }
        groups
    }

    /// Whether a branch returning `columns` can join: no name of its twice, none of another
    /// type here, every new one's type one that can be written as a cast. A group of one
    /// branch that cannot is its statement alone.
    fn agrees_with(&self, columns: &[Column]) -> bool {
        !self.alone
            && columns.iter().enumerate().all(|(i, column)| {
                !columns[..i].iter().any(|c| c.name == column.name)
                    && match self.shared.iter().find(|c| c.name == column.name) {
                        Some(seen) => seen.type_info == column.type_info,
                        None => castable(column.type_info.name()),
                    }
            })
    }

    fn add(&mut self, part: usize, columns: Arc<[Column]>) {
        for column in columns.iter() {
            if !self.shared.iter().any(|c| c.name == column.name) {
                self.shared.push(column.clone());
            }
        }
        self.parts.push(part);
        self.columns.push(columns);
    }

    /// Branch `at` of the group's statement (part `part`): `sql`'s rows under every shared
    /// column, the others' null. Every null is typed: PostgreSQL resolves a union's column
    /// types a pair of branches at a time, so two untyped nulls would make a text column.
    fn branch(&self, at: usize, part: usize, sql: &str) -> String {
        let own = &self.columns[at];
        let list: Vec<String> = (self.shared.iter())
            .map(|Column { name, type_info }| {
                let quoted = name.replace('"', "\"\"");
                if own.iter().any(|c| c.name == *name) {
                    format!("s.\"{quoted}\" AS \"{quoted}\"")
                } else {
                    format!("NULL::{} AS \"{quoted}\"", type_info.name())
                }
            })
            .collect();
        format!("SELECT {part} AS part, {} FROM ({sql}) s", list.join(", "))
    }
}

/// Whether a type's name can follow `::` as it is (built-in types' names, `TEXT[]`, and the
/// schema's own lower-case enum names).
fn castable(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '[' | ']'))
}

impl Store {
    /// Every page of `keys` (of sessions, stages or executions, by `scope`), each group of
    /// relationships that share their columns in one statement (see the module's
    /// documentation), the groups' statements side by side.
    pub async fn child_pages_of(
        &self,
        scope: Scope,
        keys: &[ChildPage],
    ) -> Result<HashMap<ChildPage, PageRead>> {
        let parts = Part::of(keys);
        let groups = if parts.len() > 1 {
            let mut reader = self.reader().await?;
            let mut columns = Vec::with_capacity(parts.len());
            for part in &parts {
                let (sql, _) = part.statement(scope, KeyArrays::default())?;
                columns.push(self.descriptions.of(&mut reader, &sql).await?);
            }
            Group::of(columns)
        } else {
            vec![Group {
                parts: vec![0],
                ..Group::default()
            }]
        };
        let reads = groups
            .iter()
            .map(|group| self.read_group(scope, &parts, group));
        let mut read = HashMap::with_capacity(keys.len());
        for pages in futures::future::try_join_all(reads).await? {
            read.extend(pages);
        }
        Ok(read)
    }

    /// The pages of a group's parts, by one statement.
    async fn read_group(
        &self,
        scope: Scope,
        parts: &[Part],
        group: &Group,
    ) -> Result<HashMap<ChildPage, PageRead>> {
        let mut read = HashMap::new();
        if let [part] = group.parts[..] {
            let (sql, k) = parts[part].statement(scope, KeyArrays::default())?;
            let rows = sqlx::query_with(&sql, k.into_arguments())
                .fetch_all(self.reader().await?.traced())
                .await?;
            parts[part].read(&rows.iter().collect::<Vec<_>>(), &mut read)?;
            return Ok(read);
        }
        let mut k = KeyArrays::default();
        let mut branches = Vec::with_capacity(group.parts.len());
        for (at, &part) in group.parts.iter().enumerate() {
            let (sql, bound) = parts[part].statement(scope, k)?;
            branches.push(group.branch(at, part, &sql));
            k = bound;
        }
        // Each branch keeps its statement's order, and a union of all rows appends its
        // branches' rows one branch after another.
        let sql = branches.join(" UNION ALL ");
        let rows = sqlx::query_with(&sql, k.into_arguments())
            .fetch_all(self.reader().await?.traced())
            .await?;
        let mut by_part: HashMap<usize, Vec<&PgRow>> = HashMap::new();
        for row in &rows {
            let part: i32 = row.try_get("part")?;
            by_part.entry(part as usize).or_default().push(row);
        }
        for &part in &group.parts {
            let rows = by_part.remove(&part).unwrap_or_default();
            parts[part].read(&rows, &mut read)?;
        }
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    use sqlx::postgres::PgTypeInfo;

    use super::*;

    fn columns(of: &[(&str, &'static str)]) -> Arc<[Column]> {
        (of.iter())
            .map(|&(name, type_name)| Column {
                name: name.to_owned(),
                type_info: PgTypeInfo::with_name(type_name),
            })
            .collect()
    }

    #[test]
    fn branches_share_a_column_by_name_and_fill_the_others_with_typed_nulls() {
        let a = columns(&[("id", "UUID"), ("content", "TEXT")]);
        let b = columns(&[("id", "UUID"), ("total", "INT8")]);
        let [group] = &Group::of(vec![a, b])[..] else {
            panic!("one group");
        };
        let names: Vec<&str> = group.shared.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["id", "content", "total"]);
        assert_eq!(
            group.branch(1, 4, "Q"),
            "SELECT 4 AS part, s.\"id\" AS \"id\", NULL::TEXT AS \"content\", \
             s.\"total\" AS \"total\" FROM (Q) s"
        );
    }

    #[test]
    fn branches_naming_a_column_alike_with_other_types_or_twice_are_read_apart() {
        let int4 = columns(&[("n", "INT4")]);
        let int8 = columns(&[("n", "INT8"), ("m", "TEXT")]);
        let text = columns(&[("m", "TEXT")]);
        let groups = Group::of(vec![int4.clone(), int8, text]);
        let parts: Vec<&[usize]> = groups.iter().map(|g| &g.parts[..]).collect();
        assert_eq!(parts, [&[0, 2][..], &[1]]);
        let twice = columns(&[("n", "INT4"), ("n", "INT4")]);
        let odd = columns(&[("o", "\"Odd\"")]);
        let other = columns(&[("p", "TEXT")]);
        let groups = Group::of(vec![twice, odd, int4, other]);
        let parts: Vec<&[usize]> = groups.iter().map(|g| &g.parts[..]).collect();
        assert_eq!(parts, [&[0][..], &[1], &[2, 3]]);
    }
}
