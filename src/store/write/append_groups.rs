//! Group commit for single appends.
//!
//! Agent runtimes stream tokens one `appendTimelineContent` at a time, from many streams at
//! once. Committed one by one, each append costs PostgreSQL a transaction, a WAL flush and a
//! round trip. Here appends that arrive while a group is being stored wait, and go together in
//! the next group: one statement over arrays, one commit (as PostgreSQL's own WAL writer
//! gathers commits, and Kafka producers linger). A caller is answered once its group has
//! committed, so an acknowledged append is durable, as before.
//!
//! A group stores the appends that land where their event's text ends (nearly all of them);
//! any other (a resent chunk, an overlap, a gap, a finished or missing event, one past the
//! size limit) is handed back to be decided alone, in a transaction ([`timeline::append`]), so
//! one bad append never fails the others. A group holds at most one append per event (a second
//! waits for the next group), so each is decided against what its event had stored. The
//! statement (`append_timeline_chunks`, migrations 0112 and 0114) locks the group's streams
//! and then its sessions' event orders, each in key order (the one order, `locks.rs`), so
//! groups in flight together never deadlock; it decides the appends under the streams and
//! takes the event orders only to number and record them (0121), since every other writer of
//! those sessions waits for an event order. It records the appends in their sessions' event
//! logs itself, set-wise, each with its text rather than in a chunk of its own (0119): a
//! session's appends extend its latest run in place, which PostgreSQL logs as little more than
//! the new entries, or start a run (0123); a chunk stored any other way is recorded by a trigger
//! per row. It runs as a transaction of its own, so those locks are held only to its commit.
//!
//! An append names its event only, yet every key of the event's rows begins with its session
//! (docs/scale-out.md). The groups remember each event's session as the statement answers it
//! (an event never changes session) and send it with the event's later appends, which are
//! then found by their key, in their session's partition alone (0126).

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use clap::Args;
use moka::sync::Cache;
use sqlx::PgPool;
use tokio::sync::{Semaphore, mpsc, oneshot};
use uuid::Uuid;

use super::limits;
use super::timeline::{self, Append, Appended};
use crate::error::Result;
use crate::observe::metrics::{APPEND_GROUP_SIZE, APPEND_GROUPS_FAILED};
use crate::store::traced::traced;

/// How single appends are grouped.
#[derive(Debug, Clone, Copy, Args)]
pub struct AppendGroupOptions {
    /// Groups of appends being stored at once, each on a connection of its own (on an external
    /// PostgreSQL, a pool of that many beside `--db-max-connections`). More let a group form
    /// while another commits; one makes every group as large as it can be.
    #[arg(long, env = "CASEFILE_APPEND_GROUPS_IN_FLIGHT", default_value_t = 2,
          value_parser = clap::value_parser!(u32).range(1..=64))]
    pub append_groups_in_flight: u32,

    /// Microseconds a group waits after its first append for others to join it (0: it takes
    /// what has queued and goes). A wait adds to every append's latency.
    #[arg(long, env = "CASEFILE_APPEND_GROUP_WINDOW_US", default_value_t = 0,
          value_parser = clap::value_parser!(u64).range(0..=100_000))]
    pub append_group_window_us: u64,
}

impl Default for AppendGroupOptions {
    fn default() -> Self {
        crate::options::defaults()
    }
}

/// An append waiting for its group.
struct Waiting {
    append: Append,
    /// Whether the group stored it whole.
    stored: oneshot::Sender<bool>,
}

/// The appends of a process, grouped. Its driver starts with the first append.
pub struct AppendGroups {
    groups: Groups,
    options: AppendGroupOptions,
    queue: OnceLock<mpsc::Sender<Waiting>>,
}

/// The session of each event appended to lately, as the groups found them.
type EventSessions = Cache<Uuid, Uuid>;

/// Events whose session is remembered, at most (about 100 bytes each): far more than stream
/// at once; one forgotten is looked up by its id again.
const EVENT_SESSIONS: u64 = 100_000;

/// How long an event no one appends to is remembered.
const EVENT_SESSION_IDLE: Duration = Duration::from_secs(3600);

/// Appends waiting for a group, at most: past it a caller waits to join the queue.
const QUEUED: usize = 4 * limits::BATCH;

impl AppendGroups {
    pub fn new(pool: PgPool, options: AppendGroupOptions) -> Arc<AppendGroups> {
        Arc::new(AppendGroups {
            groups: Groups {
                pool,
                sessions: Cache::builder()
                    .max_capacity(EVENT_SESSIONS)
                    .time_to_idle(EVENT_SESSION_IDLE)
                    .build(),
            },
            options,
            queue: OnceLock::new(),
        })
    }

    /// Stores `append` with the next group when it lands where its event's text ends: `Some`
    /// once committed; `None` when it must be decided alone ([`timeline::append`]).
    pub async fn append(&self, append: &Append) -> Result<Option<Appended>> {
        let delta_len = timeline::check_append(append)?;
        let (stored, answer) = oneshot::channel();
        let waiting = Waiting {
            append: append.clone(),
            stored,
        };
        // The driver only ends when every sender is gone, and this one is held here.
        if self.queue().send(waiting).await.is_err() {
            return Ok(None);
        }
        // A group that failed answers nothing stored: the caller decides it alone, and finds
        // it stored if the group committed after all.
        Ok(match answer.await {
            Ok(true) => Some(Appended::whole(append, delta_len)),
            _ => None,
        })
    }

    fn queue(&self) -> &mpsc::Sender<Waiting> {
        self.queue.get_or_init(|| {
            let (sender, receiver) = mpsc::channel(QUEUED);
            tokio::spawn(drive(self.groups.clone(), self.options, receiver));
            sender
        })
    }
}

/// Where the groups are stored, and what they learn of their events.
#[derive(Clone)]
struct Groups {
    pool: PgPool,
    sessions: EventSessions,
}

/// Forms groups from the queue and stores each on a task of its own, at most
/// `append_groups_in_flight` at once; ends when every sender is gone.
async fn drive(groups: Groups, options: AppendGroupOptions, mut queue: mpsc::Receiver<Waiting>) {
    let in_flight = Arc::new(Semaphore::new(options.append_groups_in_flight as usize));
    let window = Duration::from_micros(options.append_group_window_us);
    // Appends to an event already in the group being formed, in the order they came.
    let mut deferred: VecDeque<Waiting> = VecDeque::new();
    loop {
        let Ok(permit) = in_flight.clone().acquire_owned().await else {
            return;
        };
        if deferred.is_empty() {
            match queue.recv().await {
                Some(first) => deferred.push_back(first),
                None => return,
            }
            if !window.is_zero() {
                tokio::time::sleep(window).await;
            }
        }
        let mut group = Vec::new();
        let mut events = HashSet::new();
        let mut later = VecDeque::new();
        let mut take = |waiting: Waiting, group: &mut Vec<Waiting>| {
            if group.len() < limits::BATCH && events.insert(waiting.append.event_id) {
                group.push(waiting);
            } else {
                later.push_back(waiting);
            }
        };
        for waiting in deferred.drain(..) {
            take(waiting, &mut group);
        }
        while group.len() < limits::BATCH
            && let Ok(waiting) = queue.try_recv()
        {
            take(waiting, &mut group);
        }
        deferred = later;
        let groups = groups.clone();
        tokio::spawn(async move {
            store(&groups, group).await;
            drop(permit);
        });
    }
}

/// Stores a group in one statement and answers each of its appends.
async fn store(groups: &Groups, group: Vec<Waiting>) {
    metrics::histogram!(APPEND_GROUP_SIZE).record(group.len() as f64);
    let appends: Vec<&Append> = group.iter().map(|w| &w.append).collect();
    match append_group(groups, &appends).await {
        Ok(stored) => {
            for (waiting, stored) in group.into_iter().zip(stored) {
                // Its caller may be gone (the client hung up): the append stays committed.
                let _ = waiting.stored.send(stored);
            }
        }
        Err(err) => {
            metrics::counter!(APPEND_GROUPS_FAILED).increment(1);
            tracing::warn!(error = %err, appends = appends.len(), "an append group failed; each append is decided alone");
            // Dropping the senders answers nothing stored.
        }
    }
}

/// Whether each append was stored, in the order given.
async fn append_group(groups: &Groups, appends: &[&Append]) -> Result<Vec<bool>> {
    let events: Vec<Uuid> = appends.iter().map(|a| a.event_id).collect();
    let sessions: Vec<Option<Uuid>> = events.iter().map(|e| groups.sessions.get(e)).collect();
    let offsets: Vec<i64> = appends.iter().map(|a| a.offset).collect();
    let deltas: Vec<&str> = appends.iter().map(|a| a.delta.as_str()).collect();
    let mut connection = crate::store::connection(&groups.pool).await?;
    let answers: Vec<(bool, Option<Uuid>)> = sqlx::query_as(
        "SELECT stored, event_session \
         FROM append_timeline_chunks($1::uuid[], $2::uuid[], $3::bigint[], $4::text[], $5)",
    )
    .bind(&events)
    .bind(&sessions)
    .bind(offsets)
    .bind(deltas)
    .bind(limits::TEXT as i64)
    .fetch_all(traced(&mut connection))
    .await?;
    if answers.len() != appends.len() {
        return Err(crate::error::Error::Internal(format!(
            "an append group of {} was answered {} times",
            appends.len(),
            answers.len()
        )));
    }
    Ok(events
        .iter()
        .zip(sessions)
        .zip(answers)
        .map(|((event, sent), (stored, found))| {
            match found {
                Some(session) if sent != found => groups.sessions.insert(*event, session),
                // Not in the session remembered: its session was deleted (and its id taken
                // again elsewhere, or the event is gone); the append alone finds out which.
                None if sent.is_some() => groups.sessions.invalidate(event),
                _ => {}
            }
            stored
        })
        .collect())
}
