//! Pages of the timeline (by sequence_number) under many parents in one statement.

use std::collections::HashMap;
use std::sync::Arc;

use sqlx::FromRow;
use uuid::Uuid;

use super::page::{Joined, Page, Slice};
use super::{Scope, Store, TimelineEventRow};
use crate::error::Result;

/// One page request: a slice, by sequence number, of the events of `parent`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TimelinePageKey {
    pub parent: Uuid,
    pub slice: Slice<i64>,
}

impl Store {
    /// Every requested page in one statement: each key is joined laterally to its own ordered,
    /// limited slice (read from either end), so different parents may ask for different
    /// slices; it is an outer join, so a key whose page is empty still brings back whether
    /// events exist at or before its `after` and at or after its `before`.
    pub async fn timeline_pages(
        &self,
        scope: Scope,
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
        let parents: Vec<Uuid> = keys.iter().map(|k| k.parent).collect();
        // Sequence numbers start at 1, so 0 and i64::MAX bound the whole timeline.
        let afters: Vec<i64> = keys.iter().map(|k| k.slice.after.unwrap_or(0)).collect();
        let befores: Vec<i64> = keys
            .iter()
            .map(|k| k.slice.before.unwrap_or(i64::MAX))
            .collect();
        let limits: Vec<i64> = keys.iter().map(|k| k.slice.read()).collect();
        let from_end: Vec<bool> = keys.iter().map(|k| k.slice.from_end).collect();
        let column = scope.column();
        let window = format!(
            "t.{column} = k.parent \
             AND t.sequence_number > k.after_seq AND t.sequence_number < k.before_seq"
        );
        // Whether events lie on either side of a key's page: the nearest one, read along the
        // (parent, sequence_number) index (an EXISTS may be planned as a scan of the table).
        // The keys are materialized so this is read once per key, not once per row. Each page
        // is read from the end it is taken from (so LIMIT takes the events next to it), by the
        // one of the two branches its `from_end` switches on.
        let sql = format!(
            "WITH k AS MATERIALIZED ( \
                 SELECT k.*, \
                        (SELECT TRUE FROM timeline_events t \
                         WHERE t.{column} = k.parent AND t.sequence_number <= k.after_seq \
                         ORDER BY t.sequence_number DESC LIMIT 1) IS NOT NULL AS earlier, \
                        (SELECT TRUE FROM timeline_events t \
                         WHERE t.{column} = k.parent AND t.sequence_number >= k.before_seq \
                         ORDER BY t.sequence_number LIMIT 1) IS NOT NULL AS later \
                 FROM unnest($1::uuid[], $2::bigint[], $3::bigint[], $4::bigint[], $5::boolean[]) \
                      WITH ORDINALITY AS k(parent, after_seq, before_seq, lim, from_end, ord)) \
             SELECT k.ord, k.earlier, k.later, e.* \
             FROM k LEFT JOIN LATERAL ( \
                 (SELECT * FROM timeline_events_live t WHERE NOT k.from_end AND {window} \
                  ORDER BY t.sequence_number LIMIT k.lim) \
                 UNION ALL \
                 (SELECT * FROM timeline_events_live t WHERE k.from_end AND {window} \
                  ORDER BY t.sequence_number DESC LIMIT k.lim)) e ON TRUE \
             ORDER BY k.ord, e.sequence_number"
        );
        let rows: Vec<Row> = sqlx::query_as(&sql)
            .bind(&parents)
            .bind(&afters)
            .bind(&befores)
            .bind(&limits)
            .bind(&from_end)
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
}

/// Columns of `timeline_events_live` for a replay, with content and metadata left out (not even
/// computed) for events outside the view (`$2`, `$3`: its stage and execution, if any).
const REPLAY_COLUMNS: &str = "id, session_id, stage_id, execution_id, sequence_number, \
    event_type, status, \
    CASE WHEN ($2::uuid IS NULL OR stage_id = $2) AND ($3::uuid IS NULL OR execution_id = $3) \
         THEN content ELSE '' END AS content, \
    CASE WHEN ($2::uuid IS NULL OR stage_id = $2) AND ($3::uuid IS NULL OR execution_id = $3) \
         THEN metadata ELSE '{}'::jsonb END AS metadata, \
    llm_interaction_id, mcp_interaction_id, created_at, updated_at";

/// A session's timeline as a replay reads it: the events of a view (a stage's, an execution's,
/// or all), the others present with their content left out so that a reader passes over them.
#[derive(Debug, Clone, Copy)]
pub struct TimelineReplay {
    pub session: Uuid,
    pub stage: Option<Uuid>,
    pub execution: Option<Uuid>,
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
            "SELECT {REPLAY_COLUMNS} FROM timeline_events_live \
             WHERE session_id = $1 AND sequence_number > $4 AND sequence_number < $5 \
             ORDER BY sequence_number LIMIT $6"
        );
        let rows: Vec<TimelineEventRow> = sqlx::query_as(&sql)
            .bind(replay.session)
            .bind(replay.stage)
            .bind(replay.execution)
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
            "SELECT {REPLAY_COLUMNS} FROM timeline_events_live \
             WHERE session_id = $1 AND sequence_number = ANY($4) ORDER BY sequence_number"
        );
        let rows: Vec<TimelineEventRow> = sqlx::query_as(&sql)
            .bind(replay.session)
            .bind(replay.stage)
            .bind(replay.execution)
            .bind(sequence_numbers)
            .fetch_all(self.reader().await?.traced())
            .await?;
        Ok(rows.into_iter().map(Arc::new).collect())
    }
}
