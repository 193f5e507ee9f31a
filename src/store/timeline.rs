//! Pages of the timeline (by sequence_number) under many parents in one statement.

use std::collections::HashMap;
use std::sync::Arc;

use sqlx::FromRow;
use uuid::Uuid;

use super::page::{Joined, KeyArrays, Page, PerKey, Slice, either_end};
use super::{Record as _, Scope, Store, TimelineEventRow};
use crate::error::Result;
use crate::model::{TimelineEventStatus, TimelineEventType, db_name};

/// One page request: a slice, by sequence number, of the events of `parent` (of `session`) that
/// pass `filter`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TimelinePageKey {
    pub session: Uuid,
    pub parent: Uuid,
    pub slice: Slice<i64>,
    pub filter: TimelineFilter,
}

/// Which events a timeline page holds: those of these types and these statuses (each: any
/// when absent).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct TimelineFilter {
    pub event_types: Option<Vec<TimelineEventType>>,
    pub statuses: Option<Vec<TimelineEventStatus>>,
}

/// The names the database stores for `values`, each once (`[A, A]` is one value).
fn names<T: Copy + serde::Serialize>(values: &[T]) -> Vec<String> {
    let names: std::collections::BTreeSet<String> = values.iter().map(|&v| db_name(v)).collect();
    names.into_iter().collect()
}

impl TimelineFilter {
    /// The condition on `t` (a timeline row), its parameters bound in `k`. Absent parts add
    /// nothing, so the plan is the unfiltered one's; a type filter reads the (parent,
    /// event_type, sequence_number) indexes.
    fn condition(&self, k: &mut KeyArrays) -> sqlx::Result<String> {
        let mut sql = String::new();
        for (column, values) in [
            ("event_type", self.event_types.as_deref().map(names)),
            ("status", self.statuses.as_deref().map(names)),
        ] {
            // One value is an equality: the plan kept for the statement then reads the type
            // index in sequence order. (For an array it cannot know how many values come, nor
            // how rare they are, and may walk the parent's whole timeline to filter it.)
            match values {
                Some(mut one) if one.len() == 1 => {
                    let value = k.bind(one.remove(0), "text")?;
                    sql.push_str(&format!(" AND t.{column} = {value}"));
                }
                Some(many) => {
                    let values = k.bind(many, "text[]")?;
                    sql.push_str(&format!(" AND t.{column} = ANY({values})"));
                }
                None => {}
            }
        }
        Ok(sql)
    }
}

impl Store {
    /// Every requested page, in one statement per filter (see [`pages_statement`]).
    pub async fn timeline_pages(
        &self,
        scope: Scope,
        keys: &[TimelinePageKey],
    ) -> Result<HashMap<TimelinePageKey, Page<Arc<TimelineEventRow>>>> {
        // One statement per filter: the fields of one query ask with one filter, so that is
        // one statement per relationship, unless aliases ask for several.
        let mut by_filter: HashMap<&TimelineFilter, Vec<TimelinePageKey>> = HashMap::new();
        for key in keys {
            by_filter.entry(&key.filter).or_default().push(key.clone());
        }
        let mut pages = HashMap::with_capacity(keys.len());
        for (filter, keys) in by_filter {
            pages.extend(self.filtered_timeline_pages(scope, filter, &keys).await?);
        }
        Ok(pages)
    }

    async fn filtered_timeline_pages(
        &self,
        scope: Scope,
        filter: &TimelineFilter,
        keys: &[TimelinePageKey],
    ) -> Result<HashMap<TimelinePageKey, Page<Arc<TimelineEventRow>>>> {
        #[derive(FromRow)]
        struct Row {
            ord: i64,
            earlier: bool,
            later: bool,
            #[sqlx(flatten)]
            event: Joined<TimelineEventRow>,
        }
        let (sql, k) = pages_statement(scope, filter, keys)?;
        let rows: Vec<Row> = sqlx::query_as_with(&sql, k.into_arguments())
            .fetch_all(self.reader().await?.traced())
            .await?;
        let mut read: Vec<(Vec<Arc<TimelineEventRow>>, bool, bool)> =
            keys.iter().map(|_| (Vec::new(), false, false)).collect();
        for row in rows {
            let (events, earlier, later) = &mut read[(row.ord - 1) as usize];
            (*earlier, *later) = (row.earlier, row.later);
            events.extend(row.event.0.map(Arc::new));
        }
        Ok(keys
            .iter()
            .zip(read)
            .map(|(key, (events, earlier, later))| {
                (key.clone(), Page::new(events, &key.slice, earlier, later))
            })
            .collect())
    }

    /// How PostgreSQL reads these pages (keys with one filter) on the plan a connection keeps
    /// for their statement, for checking that the indexes serve it.
    pub async fn explain_timeline_pages(
        &self,
        scope: Scope,
        filter: &TimelineFilter,
        keys: &[TimelinePageKey],
    ) -> Result<String> {
        let (sql, k) = pages_statement(scope, filter, keys)?;
        self.explain_page_statement(&sql, k).await
    }
}

/// Past every sequence number: the `before` of a page without one.
const END: i64 = i64::MAX;

/// The statement that reads every page of `keys` (which share `filter`), and its keys:
/// each key is joined laterally to its own ordered, limited slice (read from either end), so
/// different parents may ask for different slices; it is an outer join, so a key whose page is
/// empty still brings back whether events exist at or before its `after` and at or after its
/// `before`.
fn pages_statement(
    scope: Scope,
    filter: &TimelineFilter,
    keys: &[TimelinePageKey],
) -> Result<(String, KeyArrays)> {
    let any = |wanted: fn(&TimelinePageKey) -> bool| keys.iter().any(wanted);
    let (has_after, has_before) = (
        any(|k| k.slice.after.is_some()),
        any(|k| k.slice.before.is_some()),
    );
    let (forward, backward) = (any(|k| !k.slice.from_end), any(|k| k.slice.from_end));
    let mut k = KeyArrays::pages(keys.iter().map(|k| (k.parent, k.session, k.slice.read())))?;
    // Sequence numbers start at 1, so 0 and `END` bound the whole timeline.
    let afters = keys.iter().map(|k| k.slice.after.unwrap_or(0)).collect();
    k.column("after_seq", "bigint", afters)?;
    let befores = keys.iter().map(|k| k.slice.before.unwrap_or(END)).collect();
    k.column("before_seq", "bigint", befores)?;
    let from_end = keys.iter().map(|k| k.slice.from_end);
    k.flag("from_end", forward && backward, from_end)?;
    let matches = filter.condition(&mut k)?;
    let column = scope.column();
    // The keys' session: a parameter of the statement when they share one (as a session
    // page's do), so that every table, a streaming event's text included, is pruned to its
    // partition as the statement starts; else each key's, pruned as it is read.
    let session = match super::the_one_session(keys.iter().map(|key| key.session)) {
        Some(one) => k.bind(one, "uuid")?,
        None => "k.session".to_owned(),
    };
    // The parent's session is named too (a session's own timeline needs no more).
    let of_parent = match scope {
        Scope::Session => format!("t.{column} = k.parent{matches}"),
        _ => format!("t.{column} = k.parent AND t.session_id = {session}{matches}"),
    };
    let window = format!(
        "{of_parent} AND t.sequence_number > k.after_seq AND t.sequence_number < k.before_seq"
    );
    // Whether events lie on either side of a key's page: the nearest one, read along the
    // (parent, sequence_number) index (an EXISTS may be planned as a scan of the table), and
    // only when a key of the batch has that cursor (without one, the bound is past every
    // sequence number); then the keys are materialized so that this is read once per key, not
    // once per row. Each page is read from the end it is taken from (so LIMIT takes the events
    // next to it); a batch reading both ways has both branches, which `from_end` switches.
    let earlier = PerKey {
        name: "earlier",
        read: has_after.then(|| {
            format!(
                "CASE WHEN k.after_seq > 0 THEN (SELECT TRUE FROM timeline_events t \
                 WHERE {of_parent} AND t.sequence_number <= k.after_seq \
                 ORDER BY t.sequence_number DESC LIMIT 1) IS NOT NULL ELSE FALSE END"
            )
        }),
        otherwise: "FALSE",
    };
    let later = PerKey {
        name: "later",
        read: has_before.then(|| {
            format!(
                "CASE WHEN k.before_seq < {END} THEN (SELECT TRUE FROM timeline_events t \
                 WHERE {of_parent} AND t.sequence_number >= k.before_seq \
                 ORDER BY t.sequence_number LIMIT 1) IS NOT NULL ELSE FALSE END"
            )
        }),
        otherwise: "FALSE",
    };
    let events = either_end(forward, backward, |gate, descending| {
        let order = if descending { " DESC" } else { "" };
        format!(
            "SELECT * FROM {} t WHERE {gate}{window} \
             ORDER BY t.sequence_number{order} LIMIT k.lim",
            TimelineEventRow::source(Some(&session))
        )
    });
    let sql = k.statement(&[earlier, later], &events, "c.sequence_number");
    Ok((sql, k))
}

/// Columns of the session's live timeline (`$1`) for a replay, with content and metadata left
/// out (not even computed) for events outside the view (`$2`, `$3`, `$4`: its stage, execution
/// and event types, if any).
const REPLAY_COLUMNS: &str = "id, session_id, stage_id, execution_id, sequence_number, \
    event_type, status, \
    CASE WHEN ($2::uuid IS NULL OR stage_id = $2) AND ($3::uuid IS NULL OR execution_id = $3) \
              AND ($4::text[] IS NULL OR event_type = ANY($4)) \
         THEN content ELSE '' END AS content, \
    CASE WHEN ($2::uuid IS NULL OR stage_id = $2) AND ($3::uuid IS NULL OR execution_id = $3) \
              AND ($4::text[] IS NULL OR event_type = ANY($4)) \
         THEN metadata ELSE '{}'::jsonb END AS metadata, \
    llm_interaction_id, mcp_interaction_id, created_at, updated_at";

/// A session's timeline as a replay reads it: the events of a view (a stage's, an execution's,
/// or all; of some types or all), the others present with their content left out so that a
/// reader passes over them.
#[derive(Debug, Clone)]
pub struct TimelineReplay {
    pub session: Uuid,
    pub stage: Option<Uuid>,
    pub execution: Option<Uuid>,
    pub types: Option<Vec<TimelineEventType>>,
}

impl Store {
    /// Up to `limit` events with `after < sequence number < before`, in order.
    pub async fn replay_timeline(
        &self,
        replay: TimelineReplay,
        after: i64,
        before: i64,
        limit: i64,
    ) -> Result<Vec<Arc<TimelineEventRow>>> {
        let sql = format!(
            "SELECT {REPLAY_COLUMNS} FROM {} t \
             WHERE sequence_number > $5 AND sequence_number < $6 \
             ORDER BY sequence_number LIMIT $7",
            TimelineEventRow::source(Some("$1"))
        );
        let rows: Vec<TimelineEventRow> = sqlx::query_as(&sql)
            .bind(replay.session)
            .bind(replay.stage)
            .bind(replay.execution)
            .bind(&replay.types)
            .bind(after)
            .bind(before)
            .bind(limit)
            .fetch_all(self.reader().await?.traced())
            .await?;
        Ok(rows.into_iter().map(Arc::new).collect())
    }

    /// The events with these sequence numbers, as stored now, in order.
    pub async fn replay_timeline_events(
        &self,
        replay: TimelineReplay,
        sequence_numbers: &[i64],
    ) -> Result<Vec<Arc<TimelineEventRow>>> {
        if sequence_numbers.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT {REPLAY_COLUMNS} FROM {} t \
             WHERE sequence_number = ANY($5) ORDER BY sequence_number",
            TimelineEventRow::source(Some("$1"))
        );
        let rows: Vec<TimelineEventRow> = sqlx::query_as(&sql)
            .bind(replay.session)
            .bind(replay.stage)
            .bind(replay.execution)
            .bind(&replay.types)
            .bind(sequence_numbers)
            .fetch_all(self.reader().await?.traced())
            .await?;
        Ok(rows.into_iter().map(Arc::new).collect())
    }
}
