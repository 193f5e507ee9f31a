//! The one lock order, and a batch's locks taken in it before the batch runs.
//!
//! Every writer locks sessions first (several: by id), then event streams (several: by key),
//! then the sessions' event orders (several: by key; see `migrations/0008_session_events.sql`:
//! the trigger that records a change takes its session's, and holds it until commit).
//! Stage, execution and event rows are locked only under their session's lock, so they need no
//! order of their own. A single mutation locks one session and then the streams it ends; a
//! single append locks one stream and nothing else. A batch's operations would lock in the
//! order they come in (an append's stream, then a later operation's session), so a batch takes
//! all its locks up front with a [`LockPlan`] and its operations find them held.

use std::collections::BTreeSet;

use sqlx::PgConnection;
use uuid::Uuid;

use crate::error::Result;
use crate::store::traced::traced;

/// An event's stream lock key: the low 64 bits of a UUIDv7 are random, a fine key (a rare
/// collision only makes two streams take turns). SQL's `stream_lock_key` computes the same.
pub fn stream_key(event_id: Uuid) -> i64 {
    event_id.as_u128() as i64
}

/// The key a session's changes are numbered under: the low 64 bits of its id, as SQL's
/// `session_events_lock_key` computes it.
pub fn session_events_key(session_id: Uuid) -> i64 {
    session_id.as_u128() as i64
}

/// Serializes the appends to one event and its finishing, until the transaction ends. An
/// advisory lock rather than a row lock: locking the row would write to it (and to the WAL) on
/// every append, the cost this design avoids.
pub(crate) async fn lock_stream(conn: &mut PgConnection, event_id: Uuid) -> Result<()> {
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(stream_key(event_id))
        .execute(traced(conn))
        .await?;
    Ok(())
}

/// Takes these advisory locks (event streams' or sessions' event orders), in key order, in one
/// statement: `unnest` yields the keys in the (sorted) order given, each locked as it comes.
async fn lock_in_key_order(conn: &mut PgConnection, keys: BTreeSet<i64>) -> Result<()> {
    if keys.is_empty() {
        return Ok(());
    }
    sqlx::query("SELECT pg_advisory_xact_lock(k) FROM unnest($1::bigint[]) AS k")
        .bind(keys.into_iter().collect::<Vec<_>>())
        .execute(traced(conn))
        .await?;
    Ok(())
}

/// The still-streaming events of these executions. The set holds while their sessions are
/// locked: only a writer holding the session creates or finishes an event.
async fn streaming_events(conn: &mut PgConnection, execution_ids: &[Uuid]) -> Result<Vec<Uuid>> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM timeline_events WHERE execution_id = ANY($1) AND status = 'streaming'",
    )
    .bind(execution_ids)
    .fetch_all(traced(conn))
    .await?)
}

/// Locks the streams of the still-streaming events of these executions (whose sessions the
/// caller holds), in key order, before finishing the executions closes those events; returns
/// the events.
pub(crate) async fn lock_streams_of(
    conn: &mut PgConnection,
    execution_ids: &[Uuid],
) -> Result<Vec<Uuid>> {
    let events = streaming_events(conn, execution_ids).await?;
    lock_in_key_order(conn, events.iter().copied().map(stream_key).collect()).await?;
    Ok(events)
}

/// A record an operation writes under: its session is locked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Target {
    Session(Uuid),
    Stage(Uuid),
    Execution(Uuid),
    Event(Uuid),
}

/// Every lock a batch needs, gathered from its operations before it runs. A record the batch
/// itself creates is not found here, which is right: it is created under a record the batch
/// names, whose session is locked.
#[derive(Debug, Default)]
pub struct LockPlan {
    targets: BTreeSet<Target>,
    streams: BTreeSet<Uuid>,
    finishing: BTreeSet<Uuid>,
}

impl LockPlan {
    /// An operation writes under `target`.
    pub fn session_of(&mut self, target: Target) {
        self.targets.insert(target);
    }

    /// An operation appends to or finishes this event.
    pub fn stream(&mut self, event_id: Uuid) {
        self.streams.insert(event_id);
    }

    /// An operation finishes this execution, closing its streaming events.
    pub fn finishing(&mut self, execution_id: Uuid) {
        self.targets.insert(Target::Execution(execution_id));
        self.finishing.insert(execution_id);
    }

    /// Whether the operations, run as they are, already lock in order: they need one session
    /// and no stream, or one stream and no session.
    fn in_order_as_run(&self) -> bool {
        let no_streams = self.streams.is_empty() && self.finishing.is_empty();
        (no_streams && self.targets.len() <= 1)
            || (self.targets.is_empty() && self.streams.len() <= 1)
    }

    /// Takes the locks, in the one order, at the start of the batch's transaction.
    pub async fn acquire(&self, conn: &mut PgConnection) -> Result<()> {
        if self.in_order_as_run() {
            return Ok(());
        }
        // The sessions whose event orders the batch will write to, locked last, in key order.
        let mut orders: BTreeSet<Uuid> = BTreeSet::new();
        if !self.targets.is_empty() {
            let mut ids: [Vec<Uuid>; 4] = Default::default();
            for target in &self.targets {
                match *target {
                    Target::Session(id) => ids[0].push(id),
                    Target::Stage(id) => ids[1].push(id),
                    Target::Execution(id) => ids[2].push(id),
                    Target::Event(id) => ids[3].push(id),
                }
            }
            // Rows are locked in ORDER BY order. Records that do not exist lock nothing: their
            // operation reports them.
            let [sessions, stages, executions, events] = ids;
            let locked: Vec<Uuid> = sqlx::query_scalar(
                "SELECT id FROM sessions WHERE id IN ( \
                     SELECT unnest($1::uuid[]) \
                     UNION ALL SELECT session_id FROM stages WHERE id = ANY($2) \
                     UNION ALL SELECT session_id FROM agent_executions WHERE id = ANY($3) \
                     UNION ALL SELECT session_id FROM timeline_events WHERE id = ANY($4)) \
                 ORDER BY id FOR NO KEY UPDATE",
            )
            .bind(sessions)
            .bind(stages)
            .bind(executions)
            .bind(events)
            .fetch_all(traced(&mut *conn))
            .await?;
            orders.extend(locked);
        }
        let mut events: Vec<Uuid> = self.streams.iter().copied().collect();
        if !self.finishing.is_empty() {
            let finishing: Vec<Uuid> = self.finishing.iter().copied().collect();
            events.extend(streaming_events(conn, &finishing).await?);
        }
        if !events.is_empty() {
            let streamed: Vec<Uuid> = sqlx::query_scalar(
                "SELECT DISTINCT session_id FROM timeline_events WHERE id = ANY($1)",
            )
            .bind(&events)
            .fetch_all(traced(&mut *conn))
            .await?;
            orders.extend(streamed);
        }
        lock_in_key_order(conn, events.into_iter().map(stream_key).collect()).await?;
        // The trigger that records the batch's changes then finds these held.
        lock_in_key_order(conn, orders.into_iter().map(session_events_key).collect()).await
    }
}
