//! The per-process hub: follows the change log once per process and fans each change out to
//! the subscribers of its session.
//!
//! It wakes on a commit in this process, on another process's announcement of its commits
//! (external PostgreSQL: [`super::listen`]), and once a second regardless, which is how it
//! finds what a writer that does not announce committed. While nobody here subscribes, commits
//! and announcements do not wake it: the once-a-second read keeps its place in the log, and the
//! database is not asked again after every commit for changes nobody here will be sent. Each
//! subscriber has a queue of its own ([`super::queue`]); publishing never waits for one.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, watch};
use uuid::Uuid;

use super::Change;
use super::follower::{Follower, Step};
use super::listen::listen_for_changes;
use super::options::HubOptions;
use super::queue::{Interrupted, Queue, Receiver};
use crate::error::Result;
use crate::observe::metrics::CHANGE_LOG_BACKLOG;
use crate::store::change_log::LoggedChange;
use crate::store::session_events::{ChangeKind, SessionEventRow};
use crate::store::{InSession as _, Key, Store, TimelineEventRow};

#[derive(Default)]
struct Subscribers {
    sessions: HashMap<Uuid, Vec<Arc<Queue>>>,
    /// Session status changes of every session (the dashboard feed).
    feed: Vec<Arc<Queue>>,
}

impl Subscribers {
    fn forget_closed(&mut self) {
        self.feed.retain(|q| q.is_open());
        self.sessions.retain(|_, queues| {
            queues.retain(|q| q.is_open());
            !queues.is_empty()
        });
    }

    fn all(&mut self) -> impl Iterator<Item = Arc<Queue>> + '_ {
        self.feed
            .drain(..)
            .chain(self.sessions.drain().flat_map(|(_, queues)| queues))
    }
}

pub struct Hub {
    pub(super) store: Store,
    options: HubOptions,
    /// This process as a reader of the log (its heartbeat row), and as the sender of its
    /// announcements.
    pub(super) reader: Uuid,
    /// When the log was last read, and how far behind its end this process was then.
    health: Mutex<FollowerHealth>,
    subscribers: Mutex<Subscribers>,
    /// Someone here subscribes (written under the subscribers' lock): only then do commits
    /// and announcements wake the pump.
    watched: AtomicBool,
    wake: Notify,
    /// This process committed changes the other processes have not been told of yet.
    pub(super) announcements: Notify,
    /// Another process follows the log (as of this one's last heartbeat): only then are this
    /// process's commits announced. One that starts is told from the next heartbeat on, and
    /// finds what was committed before by its periodic read.
    others_follow: AtomicBool,
    stop: watch::Sender<bool>,
    pump: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// How this process keeps up with the log (readiness reports it).
#[derive(Debug, Clone, Copy)]
pub struct FollowerHealth {
    read_at: Instant,
    /// Transactions begun since the oldest whose changes this process has not all read (still
    /// running, or not read yet).
    pub backlog: i64,
    /// Reads of the log since this process started.
    pub reads: u64,
}

impl FollowerHealth {
    pub fn since_last_read(&self) -> Duration {
        self.read_at.elapsed()
    }
}

impl Hub {
    /// Starts the hub's pump and, when the pool can spare a connection for it (an external
    /// database; the embedded one serves a single connection and a single process), a LISTEN
    /// connection for changes made by other processes.
    pub async fn start(store: Store, buffer: usize) -> Result<Arc<Hub>> {
        Self::start_with(store, HubOptions::with_buffer(buffer)).await
    }

    pub async fn start_with(store: Store, mut options: HubOptions) -> Result<Arc<Hub>> {
        options.buffer = options.buffer.max(1);
        let listen = store.pool().options().get_max_connections() > 1;
        let follower = Follower::start(&store).await?;
        let reader = Uuid::now_v7();
        // Hold the log from here on, before anything is read.
        let others_follow = store
            .change_log_heartbeat(
                reader,
                &reader_name(),
                follower.position(),
                options.reader_timeout,
            )
            .await?;
        let (stop, _) = watch::channel(false);
        let hub = Arc::new(Hub {
            store,
            options,
            reader,
            health: Mutex::new(FollowerHealth {
                read_at: Instant::now(),
                backlog: 0,
                reads: 0,
            }),
            subscribers: Mutex::new(Subscribers::default()),
            watched: AtomicBool::new(false),
            wake: Notify::new(),
            announcements: Notify::new(),
            others_follow: AtomicBool::new(others_follow),
            stop,
            pump: Mutex::new(None),
        });
        let pumping = tokio::spawn(pump(hub.clone(), follower, hub.stop.subscribe()));
        *hub.pump.lock().expect("hub lock") = Some(pumping);
        if listen {
            tokio::spawn(listen_for_changes(hub.clone(), hub.stop.subscribe()));
        }
        Ok(hub)
    }

    /// Stops the hub's tasks (they hold database connections until then), and this process's
    /// place among the log's readers: it no longer holds the log back.
    pub async fn stop(&self) {
        let _ = self.stop.send(true);
        let pumping = self.pump.lock().expect("hub lock").take();
        if let Some(mut pumping) = pumping
            && tokio::time::timeout(Duration::from_secs(5), &mut pumping)
                .await
                .is_err()
        {
            pumping.abort();
        }
    }

    /// How the pump keeps up with the log.
    pub fn follower(&self) -> FollowerHealth {
        *self.health.lock().expect("hub lock")
    }

    fn followed(&self, backlog: i64) {
        {
            let mut health = self.health.lock().expect("hub lock");
            health.read_at = Instant::now();
            health.backlog = backlog;
            health.reads += 1;
        }
        metrics::gauge!(CHANGE_LOG_BACKLOG).set(backlog as f64);
    }

    /// Changes may be in the log: read it without waiting for the next tick, if anyone here
    /// is waiting for them.
    pub(super) fn poke(&self) {
        if self.watched.load(Ordering::Relaxed) {
            self.wake.notify_one();
        }
    }

    /// Changes were committed here: deliver them without waiting for the next tick, and tell
    /// the other processes (commits that come while one announcement is sent share the next).
    pub fn committed(&self) {
        self.poke();
        if self.others_follow.load(Ordering::Relaxed) {
            self.announcements.notify_one();
        }
    }

    /// Changes of one session from now on.
    pub fn subscribe(&self, session: Uuid) -> Receiver {
        let queue = Arc::new(Queue::default());
        let mut subscribers = self.subscribers.lock().expect("hub lock");
        subscribers
            .sessions
            .entry(session)
            .or_default()
            .push(queue.clone());
        self.watch();
        Receiver::new(queue)
    }

    /// Session creations and status changes of every session from now on.
    pub fn subscribe_feed(&self) -> Receiver {
        let queue = Arc::new(Queue::default());
        let mut subscribers = self.subscribers.lock().expect("hub lock");
        subscribers.feed.push(queue.clone());
        self.watch();
        Receiver::new(queue)
    }

    /// A subscriber came (the caller holds the subscribers' lock): commits wake the pump from
    /// now on, and it reads what was committed since its last read.
    fn watch(&self) {
        self.watched.store(true, Ordering::Relaxed);
        self.wake.notify_one();
    }

    fn publish(&self, change: Change) {
        let bytes = change.approximate_bytes();
        let change = Arc::new(change);
        let options = &self.options;
        let mut subscribers = self.subscribers.lock().expect("hub lock");
        let row = &change.row;
        // The feed is about status (and deletes): a session updated for anything else is not
        // news there.
        if row.kind.is_session()
            && (row.kind != ChangeKind::Session || row.changes_session_status())
        {
            subscribers.feed.retain(|q| q.push(&change, bytes, options));
        }
        if let Some(queues) = subscribers.sessions.get_mut(&row.session_id) {
            queues.retain(|q| q.push(&change, bytes, options));
            if queues.is_empty() {
                subscribers.sessions.remove(&row.session_id);
            }
        }
    }

    /// Changes may have been missed: every subscriber resumes from the data.
    fn interrupt_all(&self, why: Interrupted) {
        let mut subscribers = self.subscribers.lock().expect("hub lock");
        for queue in subscribers.all() {
            queue.interrupt(why);
        }
    }

    /// The changes someone here wants (forgetting subscribers that went, and so sessions
    /// nobody watches any more), under one lock for the whole batch.
    fn wanted(&self, rows: Vec<LoggedChange>) -> Vec<SessionEventRow> {
        let mut subscribers = self.subscribers.lock().expect("hub lock");
        subscribers.forget_closed();
        self.watched.store(
            !subscribers.feed.is_empty() || !subscribers.sessions.is_empty(),
            Ordering::Relaxed,
        );
        rows.into_iter()
            .map(|logged| logged.event)
            .filter(|change| {
                (change.kind.is_session() && !subscribers.feed.is_empty())
                    || subscribers.sessions.contains_key(&change.session_id)
            })
            .collect()
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        let subscribers = self.subscribers.get_mut().expect("hub lock");
        for queue in subscribers.all() {
            queue.close();
        }
    }
}

/// How this process is named among the log's readers.
fn reader_name() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown host".to_owned());
    format!("{host} pid {}", std::process::id())
}

async fn pump(hub: Arc<Hub>, mut follower: Follower, mut stop: watch::Receiver<bool>) {
    let name = reader_name();
    let mut heartbeat = Instant::now();
    let mut pruned = Instant::now();
    loop {
        if *stop.borrow() {
            break;
        }
        // Always follow the log, watched or not: a first subscriber then starts at the present,
        // and transactions running meanwhile are awaited like any others.
        let more = match follower.step(&hub.store).await {
            Ok(step) => match deliver(&hub, step).await {
                Ok((next, more)) => {
                    follower = next;
                    more
                }
                Err(err) => {
                    tracing::warn!("reading live changes failed: {err}");
                    false
                }
            },
            Err(err) => {
                tracing::warn!("reading live changes failed: {err}");
                false
            }
        };
        if heartbeat.elapsed() >= hub.options.heartbeat_every {
            heartbeat = Instant::now();
            let position = follower.position();
            match hub
                .store
                .change_log_heartbeat(hub.reader, &name, position, hub.options.reader_timeout)
                .await
            {
                Ok(others) => hub.others_follow.store(others, Ordering::Relaxed),
                Err(err) => tracing::warn!(
                    "recording this process's place in the live change log failed: {err}"
                ),
            }
        }
        if pruned.elapsed() >= hub.options.prune_every {
            pruned = Instant::now();
            if let Err(err) = hub
                .store
                .prune_change_log(hub.options.reader_timeout, hub.options.max_age)
                .await
            {
                tracing::warn!("pruning live changes failed: {err}");
            }
        }
        if more {
            continue;
        }
        tokio::select! {
            () = hub.wake.notified() => {}
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = stop.changed() => break,
        }
    }
    if let Err(err) = hub.store.change_log_leave(hub.reader).await {
        tracing::debug!("leaving the live change log's readers failed: {err}");
    }
}

/// Publishes what a step read (what someone here wants of it, with the events and appended text
/// it names, read once); returns where the follower is then, and whether there may be more
/// right away.
async fn deliver(hub: &Hub, step: Step) -> Result<(Follower, bool)> {
    let Step {
        rows,
        more,
        missed,
        backlog,
        next,
    } = step;
    let rows = hub.wanted(rows);
    publish_rows(hub, rows).await?;
    if missed {
        hub.interrupt_all(Interrupted::Missed);
    }
    hub.followed(backlog);
    Ok((next, more))
}

async fn publish_rows(hub: &Hub, rows: Vec<SessionEventRow>) -> Result<()> {
    let event_keys: HashSet<Key> = rows
        .iter()
        .filter(|r| r.kind.is_event_bound())
        .map(SessionEventRow::key)
        .collect();
    let events: HashMap<Key, Arc<TimelineEventRow>> = if event_keys.is_empty() {
        HashMap::new()
    } else {
        let keys: Vec<Key> = event_keys.into_iter().collect();
        let events: Vec<TimelineEventRow> = hub.store.by_keys(&keys).await?;
        events.into_iter().map(|e| (e.key(), Arc::new(e))).collect()
    };
    let appends: Vec<&SessionEventRow> = rows
        .iter()
        .filter(|r| r.kind == ChangeKind::EventAppended)
        .collect();
    let mut appended = hub.store.appended_texts(&appends).await?;
    for row in rows {
        let event = events
            .get(&row.key())
            .cloned()
            .filter(|_| row.kind.is_event_bound());
        let (delta, event_type) = match appended.remove(&(row.session_id, row.position)) {
            Some(text) => (text.text, Some(text.event_type)),
            None => (None, None),
        };
        hub.publish(Change::new(row, delta, event_type, event));
    }
    Ok(())
}
