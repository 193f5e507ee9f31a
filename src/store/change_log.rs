//! The change log (`live_changes`, written by triggers with each session event; see
//! `migrations/0008_session_events.sql` and `0007_change_log_readers.sql`) as its follower reads
//! it: which session's which position is new; and the announcement that wakes the followers.

use std::collections::HashSet;
use std::time::Duration;

use sqlx::postgres::PgRow;
use sqlx::{FromRow, PgExecutor, Row as _};
use uuid::Uuid;

use super::Store;
use super::event_runs::{
    NO_RUN_COLUMNS, NO_RUN_PLACE_COLUMNS, RUN_COLUMNS, RUN_EVENT_PLACES, RUN_PLACE_COLUMNS,
    change_in_run, run_holding,
};
use super::session_events::{SessionEventRow, change_at};
use crate::error::Result;

/// A change as the log announced it: its log id, and the session event.
#[derive(Debug, Clone)]
pub struct LoggedChange {
    pub log_id: i64,
    pub event: SessionEventRow,
}

/// Where the log stood when a follower started: its newest id, the ids present just below it
/// (a window: those missing may belong to transactions still in flight), and the snapshot's
/// xmax those were seen under.
pub struct LogStart {
    pub newest: i64,
    pub present: HashSet<i64>,
    pub snap_xmax: i64,
}

/// What one read of the log saw: the changes, and what they were read under.
pub struct LogRead {
    pub snap_xmin: i64,
    pub snap_xmax: i64,
    /// The last id the log's sequence handed out.
    pub seq_last: i64,
    /// Every change up to this id may have been pruned.
    pub pruned_through: i64,
    /// The log's epoch; `None` when it was reset (emptied by a crash) and not marked again yet.
    pub epoch: Option<Uuid>,
    pub rows: Vec<LoggedChange>,
}

/// The snapshot's bounds, the sequence's position, and the log's pruning and epoch, read with the
/// rows so that they describe exactly what the rows were read under (one row even when no change
/// is there).
const SNAPSHOT: &str = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS snap_xmin, \
    pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS snap_xmax, \
    (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM live_changes_id_seq) AS seq_last, \
    (SELECT pruned_through FROM change_log_state) AS pruned_through, \
    (SELECT epoch FROM change_log_epoch) AS epoch";

/// The follower's read: `$3` changes after `$1`, and those of the gaps `$2` (ids below `$1`
/// not seen yet) that are there now, with the snapshot they were read under. Two branches, each
/// a range of the log's key: as `id > $1 OR id = ANY($2)`, the plan every connection keeps (made
/// without the values) walked the whole log in id order and filtered it, a read that grew with
/// the log (4 ms a read at 2,000 appends a second, PostgreSQL's costliest statement then).
/// Each change's event is looked up by its key (the limit keeps it a look-up): as a join, a plan
/// kept from while the event log was small scanned all of it on every read. A change that a run
/// of `session_event_runs` holds comes with its run, decoded here ([`change_in_run`]).
fn read_change_log_statement() -> String {
    format!(
        "SELECT s.*, c.* FROM ({SNAPSHOT}) s \
         LEFT JOIN LATERAL ( \
             WITH l AS MATERIALIZED ( \
                 (SELECT id, session_id, position FROM live_changes \
                  WHERE id > $1 ORDER BY id LIMIT $3) \
                 UNION ALL \
                 SELECT id, session_id, position FROM live_changes \
                 WHERE id = ANY($2) AND id <= $1) \
             SELECT l.id, e.*, {NO_RUN_COLUMNS}, {NO_RUN_PLACE_COLUMNS} FROM l {change} \
             UNION ALL \
             SELECT l.id, l.session_id, l.position, 'event_appended'::change_kind, NULL::uuid, \
                    NULL::uuid, NULL::uuid, NULL::bigint, NULL::integer, NULL::integer, \
                    NULL::text, NULL::text, r.created_at, {RUN_COLUMNS}, {RUN_PLACE_COLUMNS} \
             FROM l CROSS JOIN LATERAL ({run}) r {RUN_EVENT_PLACES} \
             ORDER BY id LIMIT $3) c ON true",
        change = change_at("l.session_id", "l.position"),
        run = run_holding("l.session_id", "l.position"),
    )
}

/// The channel the processes sharing a database announce their commits on.
pub const CHANGES_CHANNEL: &str = "casefile_live";

/// Tells the processes listening that changes were committed: a transaction of its own, sent
/// after the commits it announces (one that notifies holds the database's notification lock
/// through its commit). `from` names the announcer, which can then skip its own.
pub async fn announce_changes<'c>(executor: impl PgExecutor<'c>, from: &str) -> Result<()> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(CHANGES_CHANNEL)
        .bind(from)
        .execute(executor)
        .await?;
    Ok(())
}

/// The most changes one prune checks for age (a minute of 200 appends a second is 12,000).
const AGED_PER_PRUNE: i64 = 50_000;

impl Store {
    /// The log's newest id and which of the `window` ids below it are present.
    pub async fn change_log_start(&self, window: i64) -> Result<LogStart> {
        let rows: Vec<(i64, i64, Option<i64>)> = sqlx::query_as(&format!(
            "SELECT s.snap_xmax, s.max_id, c.id \
             FROM (SELECT *, (SELECT coalesce(max(id), 0) FROM live_changes) AS max_id \
                   FROM ({SNAPSHOT}) snap) s \
             LEFT JOIN LATERAL (SELECT id FROM live_changes WHERE id > s.max_id - $1) c ON true"
        ))
        .bind(window)
        .fetch_all(self.reader().await?.traced())
        .await?;
        let (snap_xmax, newest) = rows.first().map_or((0, 0), |&(xmax, last, _)| (xmax, last));
        Ok(LogStart {
            newest,
            present: rows.iter().filter_map(|&(_, _, id)| id).collect(),
            snap_xmax,
        })
    }

    /// Up to `limit` changes after `last`, and those of `gaps` that are there now, in id order.
    pub async fn read_change_log(&self, last: i64, gaps: &[i64], limit: i64) -> Result<LogRead> {
        let found: Vec<PgRow> = sqlx::query(&read_change_log_statement())
            .bind(last)
            .bind(gaps)
            .bind(limit)
            .fetch_all(self.reader().await?.traced())
            .await?;
        let first = found.first().ok_or(sqlx::Error::RowNotFound)?;
        let mut read = LogRead {
            snap_xmin: first.try_get("snap_xmin")?,
            snap_xmax: first.try_get("snap_xmax")?,
            seq_last: first.try_get("seq_last")?,
            pruned_through: first.try_get("pruned_through")?,
            epoch: first.try_get("epoch")?,
            rows: Vec::with_capacity(found.len()),
        };
        for row in &found {
            if let Some(log_id) = row.try_get::<Option<i64>, _>("id")? {
                let event = match change_in_run(row)? {
                    Some(event) => event,
                    None => SessionEventRow::from_row(row)?,
                };
                read.rows.push(LoggedChange { log_id, event });
            }
        }
        Ok(read)
    }

    /// How a connection runs the follower's read (after `last`, with `gaps`), on the plan it
    /// keeps for it ([`Store::explain_generic`]).
    pub async fn explain_read_change_log(&self, last: i64, gaps: &[i64]) -> Result<String> {
        let gaps: Vec<String> = gaps.iter().map(i64::to_string).collect();
        let [plan] = self
            .explain_generic([(
                read_change_log_statement().as_str(),
                vec![
                    last.to_string(),
                    format!("{{{}}}", gaps.join(",")),
                    "1000".to_owned(),
                ],
            )])
            .await?;
        Ok(plan)
    }

    /// Marks a reset log with a new epoch (unless another process just did), and returns the
    /// log's epoch.
    pub async fn mark_change_log_epoch(&self) -> Result<Uuid> {
        let epoch: Option<Uuid> = sqlx::query_scalar(
            "WITH marked AS (INSERT INTO change_log_epoch (epoch) VALUES (gen_random_uuid()) \
                             ON CONFLICT (singleton) DO NOTHING RETURNING epoch) \
             SELECT epoch FROM marked UNION ALL SELECT epoch FROM change_log_epoch",
        )
        .fetch_optional(self.reader().await?.traced())
        .await?;
        epoch.ok_or_else(|| sqlx::Error::RowNotFound.into())
    }

    /// Records how far this process (`reader`) has read the log, now; returns whether another
    /// reader was heard from within `alive_within` (someone to announce this process's commits
    /// to).
    pub async fn change_log_heartbeat(
        &self,
        reader: Uuid,
        name: &str,
        position: i64,
        alive_within: Duration,
    ) -> Result<bool> {
        let others = sqlx::query_scalar(
            "WITH beat AS ( \
                 INSERT INTO change_log_readers (reader_id, name, position) VALUES ($1, $2, $3) \
                 ON CONFLICT (reader_id) DO UPDATE \
                 SET position = excluded.position, heartbeat_at = clock_timestamp()) \
             SELECT EXISTS (SELECT FROM change_log_readers \
                            WHERE reader_id <> $1 \
                              AND heartbeat_at > clock_timestamp() - make_interval(secs => $4))",
        )
        .bind(reader)
        .bind(name)
        .bind(position)
        .bind(alive_within.as_secs_f64())
        .fetch_one(self.reader().await?.traced())
        .await?;
        Ok(others)
    }

    /// This process stops reading the log (it no longer holds the log back).
    pub async fn change_log_leave(&self, reader: Uuid) -> Result<()> {
        sqlx::query("DELETE FROM change_log_readers WHERE reader_id = $1")
            .bind(reader)
            .execute(self.reader().await?.traced())
            .await?;
        Ok(())
    }

    /// Deletes the changes every reader heard from within `reader_timeout` has read, and those
    /// older than `max_age` whoever has not read them (a reader that lags so far resumes its
    /// subscribers from the data), and forgets readers not heard from in ten times
    /// `reader_timeout`; returns how far the log is now pruned.
    pub async fn prune_change_log(
        &self,
        reader_timeout: Duration,
        max_age: Duration,
    ) -> Result<i64> {
        // Changes older than `max_age` are looked for among the oldest `AGED_PER_PRUNE` only, so
        // a prune's work is bounded however long the log has grown; the next prune goes on.
        let pruned: i64 = sqlx::query_scalar(
            "WITH horizon AS ( \
                 SELECT greatest( \
                     (SELECT min(position) FROM change_log_readers \
                      WHERE heartbeat_at > clock_timestamp() - make_interval(secs => $1)), \
                     (SELECT max(id) FROM ( \
                          SELECT id, created_at FROM live_changes ORDER BY id LIMIT $3) oldest \
                      WHERE created_at < clock_timestamp() - make_interval(secs => $2))) AS upto), \
             forgotten AS ( \
                 DELETE FROM change_log_readers \
                 WHERE heartbeat_at < clock_timestamp() - make_interval(secs => $1 * 10)), \
             pruned AS (DELETE FROM live_changes WHERE id <= (SELECT upto FROM horizon)), \
             moved AS ( \
                 UPDATE change_log_state SET pruned_through = (SELECT upto FROM horizon) \
                 WHERE (SELECT upto FROM horizon) > pruned_through RETURNING pruned_through) \
             SELECT coalesce((SELECT pruned_through FROM moved), \
                             (SELECT pruned_through FROM change_log_state))",
        )
        .bind(reader_timeout.as_secs_f64())
        .bind(max_age.as_secs_f64())
        .bind(AGED_PER_PRUNE)
        .fetch_one(self.reader().await?.traced())
        .await?;
        Ok(pruned)
    }
}
