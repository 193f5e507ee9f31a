//! The one lock order, and a batch's locks taken in it before the batch runs.
//!
//! Every writer locks sessions first (several: by id), then event streams (several: by key),
//! then the sessions' event orders (several: by key; see `migrations/0008_session_events.sql`:
//! the trigger that records a change takes its session's, and holds it until commit).
//! Stage, execution and event rows are locked only under their session's lock, so they need no
//! order of their own. A single mutation locks one session and then the streams it ends; a
//! single append locks one stream and nothing else; a group of appends (`append_groups.rs`)
//! locks its streams and then its sessions' event orders, each set by key, in its statement.
//! A batch's operations would lock in the order they come in (an append's stream, then a later
//! operation's session), so a batch takes all its locks up front with a [`LockPlan`] and its
//! operations find them held.

use std::collections::{BTreeSet, HashMap};

use sqlx::PgConnection;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::store::Key;
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

/// The still-streaming events of these executions (by key), with their sessions. The set
/// holds while their sessions are locked: only a writer holding the session creates or
/// finishes an event.
async fn streaming_events(conn: &mut PgConnection, executions: &[Key]) -> Result<Vec<Key>> {
    let (ids, sessions): (Vec<Uuid>, Vec<Uuid>) =
        executions.iter().map(|k| (k.id, k.session)).unzip();
    let events: Vec<(Uuid, Uuid)> = sqlx::query_as(
        "SELECT e.session_id, e.id FROM unnest($1::uuid[], $2::uuid[]) AS k (id, session_id) \
         JOIN timeline_events e ON e.execution_id = k.id AND e.session_id = k.session_id \
         WHERE e.status = 'streaming'",
    )
    .bind(ids)
    .bind(sessions)
    .fetch_all(traced(conn))
    .await?;
    Ok(events.into_iter().map(|(s, id)| Key::new(s, id)).collect())
}

/// Locks the streams of the still-streaming events of these executions of a session (which
/// the caller holds), in key order, before finishing the executions closes those events;
/// returns the events.
pub(crate) async fn lock_streams_of(
    conn: &mut PgConnection,
    session_id: Uuid,
    execution_ids: &[Uuid],
) -> Result<Vec<Uuid>> {
    let executions: Vec<Key> = execution_ids
        .iter()
        .map(|&id| Key::new(session_id, id))
        .collect();
    let events = streaming_events(conn, &executions).await?;
    lock_in_key_order(conn, events.iter().map(|e| stream_key(e.id)).collect()).await?;
    Ok(events.into_iter().map(|e| e.id).collect())
}

/// A record an operation writes under: its session is locked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Target {
    Session(Uuid),
    Stage(Uuid),
    Execution(Uuid),
    Event(Uuid),
}

/// The session of each record a write names. The API names a stage, an execution or an event
/// by its id alone, so its session is looked up by id (on a distributed database, a read of
/// every shard) once per write — by the batch's [`LockPlan`], or by the first operation that
/// needs it — and named in every later statement of the write.
#[derive(Debug, Default)]
pub struct Owners(HashMap<Target, Uuid>);

impl Owners {
    /// The session `target` belongs to; refused when it does not exist.
    pub(crate) async fn session_of(
        &mut self,
        conn: &mut PgConnection,
        target: Target,
    ) -> Result<Uuid> {
        if let Some(&session) = self.0.get(&target) {
            return Ok(session);
        }
        let (table, name, id) = match target {
            Target::Session(id) => return Ok(id),
            Target::Stage(id) => ("stages", "stage", id),
            Target::Execution(id) => ("agent_executions", "agent execution", id),
            Target::Event(id) => ("timeline_events", "timeline event", id),
        };
        let session: Uuid =
            sqlx::query_scalar(&format!("SELECT session_id FROM {table} WHERE id = $1"))
                .bind(id)
                .fetch_optional(traced(conn))
                .await?
                .ok_or_else(|| Error::not_found(format!("{name} {id} does not exist")))?;
        self.0.insert(target, session);
        Ok(session)
    }

    /// `target` belongs to `session` (a record the write created, or read with its session).
    pub fn learn(&mut self, target: Target, session: Uuid) {
        self.0.insert(target, session);
    }
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

    /// Takes the locks, in the one order, at the start of the batch's transaction; returns the
    /// sessions of the records it found, for the operations to name.
    pub async fn acquire(&self, conn: &mut PgConnection) -> Result<Owners> {
        let mut owners = Owners::default();
        if self.in_order_as_run() {
            return Ok(owners);
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
            // The batch's one look-up by id: each record's session, its row locked with it.
            // Rows are locked in ORDER BY order. Records that do not exist lock nothing: their
            // operation reports them.
            let [sessions, stages, executions, events] = ids;
            let found: Vec<(i32, Uuid, Uuid)> = sqlx::query_as(
                "SELECT r.kind, r.id, s.id FROM sessions s JOIN ( \
                     SELECT 0 AS kind, id, id AS session_id FROM unnest($1::uuid[]) AS id \
                     UNION ALL SELECT 1, id, session_id FROM stages WHERE id = ANY($2) \
                     UNION ALL SELECT 2, id, session_id FROM agent_executions WHERE id = ANY($3) \
                     UNION ALL SELECT 3, id, session_id FROM timeline_events WHERE id = ANY($4)) r \
                   ON r.session_id = s.id \
                 ORDER BY s.id FOR NO KEY UPDATE OF s",
            )
            .bind(sessions)
            .bind(stages)
            .bind(executions)
            .bind(events)
            .fetch_all(traced(&mut *conn))
            .await?;
            for (kind, id, session) in found {
                let target = match kind {
                    0 => Target::Session(id),
                    1 => Target::Stage(id),
                    2 => Target::Execution(id),
                    _ => Target::Event(id),
                };
                owners.learn(target, session);
                orders.insert(session);
            }
        }
        let mut streams: Vec<Uuid> = self.streams.iter().copied().collect();
        let unknown: Vec<Uuid> = streams
            .iter()
            .copied()
            .filter(|&id| !owners.0.contains_key(&Target::Event(id)))
            .collect();
        if !unknown.is_empty() {
            // The sessions of the events only appended to (not found above). Events that do
            // not exist lock their stream all the same; their append reports them.
            let streamed: Vec<(Uuid, Uuid)> =
                sqlx::query_as("SELECT id, session_id FROM timeline_events WHERE id = ANY($1)")
                    .bind(&unknown)
                    .fetch_all(traced(&mut *conn))
                    .await?;
            for (id, session) in streamed {
                owners.learn(Target::Event(id), session);
                orders.insert(session);
            }
        }
        if !self.finishing.is_empty() {
            // Their sessions were found above, with the executions'.
            let finishing: Vec<Key> = self
                .finishing
                .iter()
                .filter_map(|&id| Some(Key::new(*owners.0.get(&Target::Execution(id))?, id)))
                .collect();
            streams.extend(
                streaming_events(conn, &finishing)
                    .await?
                    .iter()
                    .map(|e| e.id),
            );
        }
        lock_in_key_order(conn, streams.into_iter().map(stream_key).collect()).await?;
        // The trigger that records the batch's changes then finds these held.
        lock_in_key_order(conn, orders.into_iter().map(session_events_key).collect()).await?;
        Ok(owners)
    }
}
