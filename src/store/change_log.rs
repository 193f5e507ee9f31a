//! The change log (`live_changes`: a row per change, written with each session event by its
//! writer's transaction; `migrations/0008_session_events.sql`, `0127_change_log_per_session.sql`)
//! as its followers read it: which session's which position is new, found by the transaction
//! that logged it; and the announcement that wakes the followers.
//!
//! There is no order across sessions to follow: a follower reads what the transactions that
//! ended since its last read logged, as a snapshot tells them apart (ended before it: below its
//! `xmax` and not among those it saw running). Each change is read once. A session's changes
//! are logged under its lock in position order, so a read that finds one finds those before it,
//! unless the read was cut short between them (then a subscriber fills the gap from the data).

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

/// Where a change is in the log: the transaction that logged it, then its session and position
/// (the log's key, in its order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct LogKey {
    pub transaction: i64,
    pub session: Uuid,
    pub position: i64,
}

impl LogKey {
    /// Before every change `transaction` logged.
    pub fn before(transaction: i64) -> LogKey {
        LogKey {
            transaction,
            session: Uuid::nil(),
            position: i64::MIN,
        }
    }
}

/// A change as the log holds it: where, and the session event.
#[derive(Debug, Clone)]
pub struct LoggedChange {
    pub key: LogKey,
    pub event: SessionEventRow,
}

/// Which transactions a snapshot saw ended: every one below `xmax` except those `running`.
#[derive(Debug, Clone, Default)]
pub struct LogSnapshot {
    pub xmax: i64,
    pub running: Vec<i64>,
}

/// What one read of the log saw: the changes, and what they were read under.
pub struct LogRead {
    pub snapshot: LogSnapshot,
    /// Where the read stopped when it was cut short (it found as many changes as it was allowed:
    /// the last of them, whether or not its event is still there to read).
    pub cut_at: Option<LogKey>,
    /// Changes logged by transactions below this one may have been pruned.
    pub pruned_below: i64,
    /// Prunes so far that deleted, by their age, changes some live reader had not read.
    pub unread_prunes: i64,
    /// The log's epoch; `None` when it was reset (emptied by a crash) and not marked again yet.
    pub epoch: Option<Uuid>,
    pub rows: Vec<LoggedChange>,
}

/// The transactions a snapshot `s` saw running, but those known to be another database's (its
/// backend, or its prepared transaction, names that database): they log nothing here, and
/// awaited they would hold this database's log back. One that ended between the snapshot and the
/// look-up is not listed, so it stays: only what is known to be elsewhere is left out.
fn running_in(s: &str) -> String {
    format!(
        "ARRAY(SELECT x::text::bigint FROM pg_snapshot_xip({s}) x \
               WHERE NOT EXISTS (SELECT FROM pg_stat_activity a \
                                 WHERE a.backend_xid = xid(x) \
                                   AND a.datname <> current_database()) \
                 AND NOT EXISTS (SELECT FROM pg_prepared_xacts p \
                                 WHERE p.transaction = xid(x) \
                                   AND p.database <> current_database()))"
    )
}

/// The follower's read: `$7` changes after the key `($1, $2, $3)`, and those after each key of
/// `($4, $5, $6)` within its transaction (transactions below `$1` that were running at the last
/// read: their changes are there once they end), in the log's order (`l`), with the snapshot
/// they were read under, and how many `l` holds and its last key (one row even when no change
/// is there). Each branch is a range of the log's key (a transaction's, the limit keeping it a
/// range whatever the plan), so a read costs what it finds, however long the log. Each change's
/// event is looked up by its key (the limit keeps it a look-up): as a join, a plan kept from
/// while the event log was small scanned all of it on every read. A change whose session is gone
/// (purged, its event log with it) has no event, and is not handed on. A change that a run of
/// `session_event_runs` holds comes with its run, decoded here ([`change_in_run`]).
fn read_change_log_statement() -> String {
    format!(
        "WITH l AS MATERIALIZED ( \
             SELECT * FROM ( \
                 (SELECT logged_in, session_id, position FROM live_changes \
                  WHERE (logged_in, session_id, position) \
                        > ($1::bigint::text::xid8, $2::uuid, $3::bigint) \
                  ORDER BY logged_in, session_id, position LIMIT $7) \
                 UNION ALL \
                 SELECT f.* FROM unnest($4::bigint[], $5::uuid[], $6::bigint[]) \
                                 AS a (xid, session_id, position) \
                 CROSS JOIN LATERAL ( \
                     SELECT c.logged_in, c.session_id, c.position FROM live_changes c \
                     WHERE c.logged_in = a.xid::text::xid8 \
                       AND (c.session_id, c.position) > (a.session_id, a.position) \
                     ORDER BY c.session_id, c.position LIMIT $7) f) u \
             ORDER BY logged_in, session_id, position LIMIT $7) \
         SELECT s.*, c.* FROM ( \
             SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS snap_xmax, \
                    {running} AS snap_running, \
                    (SELECT count(*) FROM l) AS read_count, \
                    last.logged_in::text::bigint AS last_transaction, \
                    last.session_id AS last_session, last.position AS last_position, \
                    state.pruned_below, state.unread_prunes, \
                    (SELECT epoch FROM change_log_epoch) AS epoch \
             FROM change_log_state state \
             LEFT JOIN LATERAL (SELECT * FROM l \
                                ORDER BY logged_in DESC, session_id DESC, position DESC \
                                LIMIT 1) last ON true) s \
         LEFT JOIN LATERAL ( \
             SELECT l.logged_in::text::bigint AS logged_in, e.*, {NO_RUN_COLUMNS}, \
                    {NO_RUN_PLACE_COLUMNS} FROM l {change} \
             UNION ALL \
             SELECT l.logged_in::text::bigint, l.session_id, l.position, \
                    'event_appended'::change_kind, NULL::uuid, NULL::uuid, NULL::uuid, \
                    NULL::bigint, NULL::integer, NULL::integer, NULL::text, NULL::text, \
                    r.created_at, {RUN_COLUMNS}, {RUN_PLACE_COLUMNS} \
             FROM l CROSS JOIN LATERAL ({run}) r {RUN_EVENT_PLACES} \
             ORDER BY logged_in, session_id, position) c ON true",
        running = running_in("pg_current_snapshot()"),
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
    /// Which transactions have ended, now.
    pub async fn change_log_snapshot(&self) -> Result<LogSnapshot> {
        let (xmax, running) = sqlx::query_as(&format!(
            "SELECT pg_snapshot_xmax(s)::text::bigint, {} FROM pg_current_snapshot() s",
            running_in("s")
        ))
        .fetch_one(self.reader().await?.traced())
        .await?;
        Ok(LogSnapshot { xmax, running })
    }

    /// Up to `limit` changes after `after`, and after each of `awaited` within its transaction,
    /// in the log's order.
    pub async fn read_change_log(
        &self,
        after: LogKey,
        awaited: &[LogKey],
        limit: i64,
    ) -> Result<LogRead> {
        let found: Vec<PgRow> = sqlx::query(&read_change_log_statement())
            .bind(after.transaction)
            .bind(after.session)
            .bind(after.position)
            .bind(awaited.iter().map(|k| k.transaction).collect::<Vec<_>>())
            .bind(awaited.iter().map(|k| k.session).collect::<Vec<_>>())
            .bind(awaited.iter().map(|k| k.position).collect::<Vec<_>>())
            .bind(limit)
            .fetch_all(self.reader().await?.traced())
            .await?;
        let first = found.first().ok_or(sqlx::Error::RowNotFound)?;
        let read_count: i64 = first.try_get("read_count")?;
        let cut_at = match first.try_get::<Option<i64>, _>("last_transaction")? {
            Some(transaction) if read_count >= limit => Some(LogKey {
                transaction,
                session: first.try_get("last_session")?,
                position: first.try_get("last_position")?,
            }),
            _ => None,
        };
        let mut read = LogRead {
            snapshot: LogSnapshot {
                xmax: first.try_get("snap_xmax")?,
                running: first.try_get("snap_running")?,
            },
            cut_at,
            pruned_below: first.try_get("pruned_below")?,
            unread_prunes: first.try_get("unread_prunes")?,
            epoch: first.try_get("epoch")?,
            rows: Vec::with_capacity(found.len()),
        };
        for row in &found {
            if let Some(transaction) = row.try_get::<Option<i64>, _>("logged_in")? {
                let event = match change_in_run(row)? {
                    Some(event) => event,
                    None => SessionEventRow::from_row(row)?,
                };
                let key = LogKey {
                    transaction,
                    session: event.session_id,
                    position: event.position,
                };
                read.rows.push(LoggedChange { key, event });
            }
        }
        Ok(read)
    }

    /// How a connection runs the follower's read (after `after`, awaiting `awaited`), on the
    /// plan it keeps for it ([`Store::explain_generic`]).
    pub async fn explain_read_change_log(
        &self,
        after: LogKey,
        awaited: &[LogKey],
    ) -> Result<String> {
        let array = |items: Vec<String>| format!("{{{}}}", items.join(","));
        let [plan] = self
            .explain_generic([(
                read_change_log_statement().as_str(),
                vec![
                    after.transaction.to_string(),
                    after.session.to_string(),
                    after.position.to_string(),
                    array(awaited.iter().map(|k| k.transaction.to_string()).collect()),
                    array(awaited.iter().map(|k| k.session.to_string()).collect()),
                    array(awaited.iter().map(|k| k.position.to_string()).collect()),
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

    /// Records how far this process (`reader`) has read the log, now (every change logged by a
    /// transaction below `read_below`); returns whether another reader was heard from within
    /// `alive_within` (someone to announce this process's commits to). Its `position`, by
    /// which binaries from before migration 0127 prune, is 0: they leave the pruning by
    /// readers to this version's, which keeps what any reader has not read.
    pub async fn change_log_heartbeat(
        &self,
        reader: Uuid,
        name: &str,
        read_below: i64,
        alive_within: Duration,
    ) -> Result<bool> {
        let others = sqlx::query_scalar(
            "WITH beat AS ( \
                 INSERT INTO change_log_readers (reader_id, name, position, read_below) \
                 VALUES ($1, $2, 0, $3) \
                 ON CONFLICT (reader_id) DO UPDATE \
                 SET read_below = excluded.read_below, position = 0, \
                     heartbeat_at = clock_timestamp()) \
             SELECT EXISTS (SELECT FROM change_log_readers \
                            WHERE reader_id <> $1 \
                              AND heartbeat_at > clock_timestamp() - make_interval(secs => $4))",
        )
        .bind(reader)
        .bind(name)
        .bind(read_below)
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
    /// `reader_timeout`; returns how far the log is now pruned (the transaction below which
    /// changes may be gone).
    pub async fn prune_change_log(
        &self,
        reader_timeout: Duration,
        max_age: Duration,
    ) -> Result<i64> {
        // Changes older than `max_age` are looked for among the oldest `AGED_PER_PRUNE` only, so
        // a prune's work is bounded however long the log has grown; the next prune goes on. Of
        // the transactions below the oldest of those, only the changes that are old themselves go
        // by age: a transaction that ran long and logged its changes as it committed keeps them
        // until they are read. A reader of a binary from before 0127 (no `read_below`) has read
        // the ids up to its position: while one is heard from, what the others have read goes
        // only up to that. A prune that deletes by age a change some live reader has not read
        // counts in `unread_prunes`, which those readers watch.
        let pruned: i64 = sqlx::query_scalar(
            "WITH readers AS ( \
                 SELECT position, read_below FROM change_log_readers \
                 WHERE heartbeat_at > clock_timestamp() - make_interval(secs => $1)), \
             horizon AS ( \
                 SELECT (SELECT min(read_below) FROM readers) AS read_below, \
                        (SELECT min(position) FROM readers WHERE read_below IS NULL) AS read_id, \
                        (SELECT o.logged_in::text::bigint + 1 FROM ( \
                             SELECT logged_in, created_at FROM live_changes \
                             ORDER BY logged_in LIMIT $3) o \
                         WHERE o.created_at < clock_timestamp() - make_interval(secs => $2) \
                         ORDER BY o.logged_in DESC LIMIT 1) AS aged_below), \
             bound AS (SELECT h.*, greatest(h.read_below, h.aged_below) AS upto FROM horizon h), \
             forgotten AS ( \
                 DELETE FROM change_log_readers \
                 WHERE heartbeat_at < clock_timestamp() - make_interval(secs => $1 * 10)), \
             pruned AS ( \
                 DELETE FROM live_changes c USING bound b \
                 WHERE c.logged_in < b.upto::text::xid8 \
                   AND ((c.logged_in < b.read_below::text::xid8 \
                         AND (b.read_id IS NULL OR c.id <= b.read_id)) \
                        OR (c.logged_in < b.aged_below::text::xid8 \
                            AND c.created_at < clock_timestamp() - make_interval(secs => $2))) \
                 RETURNING c.id, c.logged_in), \
             moved AS ( \
                 UPDATE change_log_state \
                 SET pruned_below = greatest(pruned_below, b.upto), \
                     pruned_through = greatest(pruned_through, (SELECT max(id) FROM pruned)), \
                     unread_prunes = unread_prunes + (EXISTS ( \
                         SELECT FROM pruned p \
                         WHERE p.logged_in >= b.read_below::text::xid8))::int \
                 FROM bound b RETURNING pruned_below) \
             SELECT pruned_below FROM moved",
        )
        .bind(reader_timeout.as_secs_f64())
        .bind(max_age.as_secs_f64())
        .bind(AGED_PER_PRUNE)
        .fetch_one(self.reader().await?.traced())
        .await?;
        Ok(pruned)
    }
}
