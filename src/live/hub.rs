//! The per-process hub: reads the change log once per change and fans it out.
//!
//! It wakes on a NOTIFY from any process (external PostgreSQL), on a commit in this process,
//! and once a second regardless, then reads every change after the last one it read. Log ids
//! are taken before commit, so a change can become visible after a later one: ids skipped over
//! are kept as gaps and read again until they appear, or until every transaction that was
//! running when they were missed has ended (then they were rolled back).
//!
//! Each subscriber has a queue of its own, bounded by a count and by bytes: a change can carry
//! a whole event, so a stalled subscriber must not pin an unbounded amount of memory. Publishing
//! never waits for a subscriber; one that falls too far behind is cut off and told so.

use std::any::Any;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use sqlx::postgres::{PgListener, PgRow};
use sqlx::{FromRow, Row as _};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{Notify, OnceCell};
use uuid::Uuid;

use crate::error::Result;
use crate::observe::metrics::{
    CHANGE_LOG_BACKLOG, LIVE_DELIVERY_LAG, LIVE_SLOW_SUBSCRIBERS_CLOSED,
};
use crate::store::{Record, SessionRow, Store, TimelineEventRow};

/// Approximate bytes of changes one subscriber may have pending.
pub const SUBSCRIBER_BYTE_BUDGET: usize = 64 * 1024 * 1024;

/// How the hub bounds subscribers and its log.
#[derive(Debug, Clone)]
pub struct HubOptions {
    /// How many changes a subscriber may have pending before it is told to resume.
    pub buffer: usize,
    /// How many bytes (approximately) a subscriber may have pending.
    pub byte_budget: usize,
    /// How long changes stay in the log.
    pub retention: Duration,
    /// How often the log is pruned.
    pub prune_every: Duration,
}

impl HubOptions {
    pub fn with_buffer(buffer: usize) -> HubOptions {
        HubOptions {
            buffer,
            byte_budget: SUBSCRIBER_BYTE_BUDGET,
            retention: Duration::from_secs(600),
            prune_every: Duration::from_secs(60),
        }
    }
}

/// One logged change, with what this process read for it.
#[derive(Debug, Clone, FromRow)]
pub struct ChangeRow {
    pub id: i64,
    pub session_id: Uuid,
    pub kind: String,
    pub entity_id: Uuid,
    pub stage_id: Option<Uuid>,
    pub execution_id: Option<Uuid>,
    pub sequence_number: Option<i64>,
    pub start_offset: Option<i32>,
    pub end_offset: Option<i32>,
    pub status: Option<String>,
    /// For an update of a session, stage or execution: its status before (`None` on creation).
    pub previous_status: Option<String>,
    /// When it was logged (by the writing transaction, just before its commit).
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone)]
pub struct Change {
    pub row: ChangeRow,
    /// For an append: the appended text.
    pub delta: Option<String>,
    /// For a created or finished event: the event as read.
    pub event: Option<Arc<TimelineEventRow>>,
    /// The session, and the record the change names, read by the first subscriber that asks
    /// and shared with the others (lazily: many subscribers select neither).
    session: OnceCell<Option<Arc<SessionRow>>>,
    record: OnceCell<Option<Arc<dyn Any + Send + Sync>>>,
}

impl Change {
    fn new(row: ChangeRow, delta: Option<String>, event: Option<Arc<TimelineEventRow>>) -> Self {
        Change {
            row,
            delta,
            event,
            session: OnceCell::new(),
            record: OnceCell::new(),
        }
    }

    /// The change's session as it is now, read once per process.
    pub async fn session(&self, store: &Store) -> Result<Option<Arc<SessionRow>>> {
        self.session
            .get_or_try_init(|| async {
                let rows: Vec<SessionRow> = store.by_ids(&[self.row.session_id]).await?;
                Ok(rows.into_iter().next().map(Arc::new))
            })
            .await
            .cloned()
    }

    /// The record the change names (an `R` for this kind of change), read once per process.
    pub async fn record<R: Record>(&self, store: &Store) -> Result<Option<Arc<R>>> {
        let record = self
            .record
            .get_or_try_init(|| async {
                let rows: Vec<R> = store.by_ids(&[self.row.entity_id]).await?;
                Ok::<_, crate::error::Error>(
                    rows.into_iter()
                        .next()
                        .map(|r| Arc::new(r) as Arc<dyn Any + Send + Sync>),
                )
            })
            .await?;
        Ok(record.clone().and_then(|r| r.downcast::<R>().ok()))
    }

    /// A change that stands for a session's current state (a subscription's first message).
    pub fn of_session(session: Uuid) -> Change {
        Change::new(
            ChangeRow {
                id: 0,
                session_id: session,
                kind: "session".to_owned(),
                entity_id: session,
                stage_id: None,
                execution_id: None,
                sequence_number: None,
                start_offset: None,
                end_offset: None,
                status: None,
                previous_status: None,
                created_at: Utc::now(),
            },
            None,
            None,
        )
    }

    /// Records, once a subscriber was sent this change, how long after its commit that was.
    pub fn delivered(&self) {
        if self.row.id == 0 {
            return; // Not a logged change: a subscription's first state.
        }
        let lag = (Utc::now() - self.row.created_at)
            .to_std()
            .unwrap_or_default();
        metrics::histogram!(LIVE_DELIVERY_LAG).record(lag.as_secs_f64());
    }

    /// Roughly the memory a queued change holds.
    fn approximate_bytes(&self) -> usize {
        let text = |s: &Option<String>| s.as_ref().map_or(0, String::len);
        let row = &self.row;
        std::mem::size_of::<Change>()
            + row.kind.len()
            + text(&row.status)
            + text(&row.previous_status)
            + text(&self.delta)
            + self.event.as_ref().map_or(0, |e| {
                std::mem::size_of::<TimelineEventRow>() + e.content.len() + e.metadata.get().len()
            })
    }
}

/// One subscriber's pending changes.
#[derive(Default)]
struct Queue {
    state: Mutex<QueueState>,
    ready: Notify,
}

#[derive(Default)]
struct QueueState {
    changes: VecDeque<(Arc<Change>, usize)>,
    bytes: usize,
    /// It fell too far behind: this many changes were dropped (reported once, then it ends).
    lagged: Option<u64>,
    /// The hub is gone, or the receiver is.
    closed: bool,
}

impl Queue {
    /// Queues a change without waiting; false when the subscriber is gone or was just cut off.
    fn push(&self, change: &Arc<Change>, bytes: usize, options: &HubOptions) -> bool {
        let mut state = self.state.lock().expect("queue lock");
        if state.closed || state.lagged.is_some() {
            return false;
        }
        // An empty queue takes any one change, so that a large change alone still goes through.
        let over = state.changes.len() >= options.buffer
            || (!state.changes.is_empty() && state.bytes + bytes > options.byte_budget);
        if over {
            metrics::counter!(LIVE_SLOW_SUBSCRIBERS_CLOSED).increment(1);
            state.lagged = Some(state.changes.len() as u64 + 1);
            state.changes = VecDeque::new();
            state.bytes = 0;
        } else {
            state.changes.push_back((change.clone(), bytes));
            state.bytes += bytes;
        }
        drop(state);
        self.ready.notify_one();
        !over
    }

    fn close(&self) {
        let mut state = self.state.lock().expect("queue lock");
        state.closed = true;
        state.changes = VecDeque::new();
        state.bytes = 0;
        drop(state);
        self.ready.notify_one();
    }

    fn is_open(&self) -> bool {
        let state = self.state.lock().expect("queue lock");
        !state.closed && state.lagged.is_none()
    }
}

/// A subscriber's end: changes in order, `Lagged` once when it fell too far behind (its pending
/// changes are dropped; it should resume from its cursor), `Closed` when the hub is gone.
pub struct Receiver {
    queue: Arc<Queue>,
}

impl Receiver {
    /// The next change. Cancel-safe: a change is taken only by a call that returns it.
    pub async fn recv(&mut self) -> std::result::Result<Arc<Change>, RecvError> {
        loop {
            {
                let mut state = self.queue.state.lock().expect("queue lock");
                if let Some((change, bytes)) = state.changes.pop_front() {
                    state.bytes -= bytes;
                    return Ok(change);
                }
                if let Some(dropped) = state.lagged.take() {
                    state.closed = true;
                    return Err(RecvError::Lagged(dropped));
                }
                if state.closed {
                    return Err(RecvError::Closed);
                }
            }
            // `notify_one` leaves a permit when nobody waits, so a push between the check above
            // and this wait is not missed.
            self.queue.ready.notified().await;
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        // Frees its pending changes now, and the hub forgets it on its next publish.
        self.queue.close();
    }
}

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
}

pub struct Hub {
    store: Store,
    options: HubOptions,
    /// When the pump last read the log, and how far behind the log's end it was then.
    follower: Mutex<FollowerState>,
    subscribers: Mutex<Subscribers>,
    wake: Notify,
    stop: tokio::sync::watch::Sender<bool>,
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
        let (stop, _) = tokio::sync::watch::channel(false);
        let follow = Follow::start(&store).await?;
        let hub = Arc::new(Hub {
            store,
            options,
            subscribers: Mutex::new(Subscribers::default()),
            follower: Mutex::new(FollowerState {
                read_at: Instant::now(),
                backlog: 0,
            }),
            wake: Notify::new(),
            stop,
        });
        tokio::spawn(pump(hub.clone(), follow, hub.stop.subscribe()));
        if listen {
            tokio::spawn(listen_for_changes(hub.clone(), hub.stop.subscribe()));
        }
        Ok(hub)
    }

    /// Stops the hub's tasks (they hold database connections until then).
    pub fn shutdown(&self) {
        let _ = self.stop.send(true);
    }

    /// How the pump keeps up with the log (readiness reports it).
    pub fn follower(&self) -> FollowerHealth {
        let state = self.follower.lock().expect("hub lock");
        FollowerHealth {
            since_last_read: state.read_at.elapsed(),
            backlog: state.backlog,
        }
    }

    fn followed(&self, backlog: i64) {
        *self.follower.lock().expect("hub lock") = FollowerState {
            read_at: Instant::now(),
            backlog,
        };
        metrics::gauge!(CHANGE_LOG_BACKLOG).set(backlog as f64);
    }

    /// Something was committed here: deliver it without waiting for the next tick.
    pub fn poke(&self) {
        self.wake.notify_one();
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
        Receiver { queue }
    }

    /// Session creations and status changes of every session from now on.
    pub fn subscribe_feed(&self) -> Receiver {
        let queue = Arc::new(Queue::default());
        self.subscribers
            .lock()
            .expect("hub lock")
            .feed
            .push(queue.clone());
        Receiver { queue }
    }

    fn publish(&self, change: Change) {
        let bytes = change.approximate_bytes();
        let change = Arc::new(change);
        let options = &self.options;
        let mut subscribers = self.subscribers.lock().expect("hub lock");
        let row = &change.row;
        // The feed is about status: a session updated for anything else is not news there.
        if row.kind == "session" && row.status != row.previous_status {
            subscribers.feed.retain(|q| q.push(&change, bytes, options));
        }
        if let Some(queues) = subscribers.sessions.get_mut(&row.session_id) {
            queues.retain(|q| q.push(&change, bytes, options));
            if queues.is_empty() {
                subscribers.sessions.remove(&row.session_id);
            }
        }
    }

    /// The changes someone here wants (forgetting subscribers that went, and so sessions
    /// nobody watches any more), under one lock for the whole batch.
    fn wanted(&self, rows: Vec<ChangeRow>) -> Vec<ChangeRow> {
        let mut subscribers = self.subscribers.lock().expect("hub lock");
        subscribers.forget_closed();
        rows.into_iter()
            .filter(|change| {
                (change.kind == "session" && !subscribers.feed.is_empty())
                    || subscribers.sessions.contains_key(&change.session_id)
            })
            .collect()
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        let subscribers = self.subscribers.get_mut().expect("hub lock");
        for queue in subscribers
            .feed
            .drain(..)
            .chain(subscribers.sessions.drain().flat_map(|(_, queues)| queues))
        {
            queue.close();
        }
    }
}

struct FollowerState {
    read_at: Instant,
    backlog: i64,
}

/// How the pump keeps up with the log.
#[derive(Debug, Clone, Copy)]
pub struct FollowerHealth {
    pub since_last_read: Duration,
    /// Log ids past the last one read (of changes not read yet, and of transactions still
    /// running or rolled back).
    pub backlog: i64,
}

/// Where the pump is in the log.
struct Follow {
    /// The highest id read.
    last: i64,
    /// Ids below `last` not seen yet (their transaction may still commit) → the xmax of the
    /// snapshot of the read that first missed them.
    gaps: BTreeMap<i64, i64>,
    /// (when, last) samples: the log is pruned by id up to what was current `retention` ago.
    marks: VecDeque<(Instant, i64)>,
}

/// Ids just below the newest one checked at start-up for transactions still in flight.
const STARTUP_WINDOW: i64 = 5_000;
/// Changes read per statement.
const BATCH: i64 = 1000;
/// The snapshot's bounds and the sequence's position, read with the rows so that they describe
/// exactly what the rows were read under (one row even when no change is there).
const SNAPSHOT: &str = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS snap_xmin, \
            pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS snap_xmax, \
            (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM live_changes_id_seq) AS seq_last";

impl Follow {
    /// Starts at the newest change; ids missing just below it may belong to transactions still
    /// in flight, so they are gaps (seen under the start-up snapshot) like any other.
    async fn start(store: &Store) -> Result<Follow> {
        let rows: Vec<(i64, i64, Option<i64>)> = sqlx::query_as(&format!(
            "SELECT s.snap_xmax, s.max_id, c.id \
             FROM (SELECT *, (SELECT coalesce(max(id), 0) FROM live_changes) AS max_id \
                   FROM ({SNAPSHOT}) snap) s \
             LEFT JOIN LATERAL (SELECT id FROM live_changes WHERE id > s.max_id - $1) c ON true"
        ))
        .bind(STARTUP_WINDOW)
        .fetch_all(store.pool())
        .await?;
        let (xmax, last) = rows.first().map_or((0, 0), |&(xmax, last, _)| (xmax, last));
        let present: HashSet<i64> = rows.iter().filter_map(|&(_, _, id)| id).collect();
        let gaps = ((last - STARTUP_WINDOW).max(0) + 1..last)
            .filter(|id| !present.contains(id))
            .map(|id| (id, xmax))
            .collect();
        Ok(Follow {
            last,
            gaps,
            marks: VecDeque::new(),
        })
    }
}

/// What one read of the log saw.
struct Read {
    snap_xmin: i64,
    snap_xmax: i64,
    seq_last: i64,
    rows: Vec<ChangeRow>,
}

async fn read_log(store: &Store, last: i64, gaps: &[i64]) -> Result<Read> {
    let found: Vec<PgRow> = sqlx::query(&format!(
        "SELECT s.*, c.* FROM ({SNAPSHOT}) s \
         LEFT JOIN LATERAL ( \
             SELECT id, session_id, kind, entity_id, stage_id, execution_id, sequence_number, \
                    start_offset, end_offset, status, previous_status, created_at \
             FROM live_changes WHERE id > $1 OR id = ANY($2) ORDER BY id LIMIT $3) c ON true"
    ))
    .bind(last)
    .bind(gaps)
    .bind(BATCH)
    .fetch_all(store.pool())
    .await?;
    let first = found.first().ok_or(sqlx::Error::RowNotFound)?;
    let mut read = Read {
        snap_xmin: first.try_get("snap_xmin")?,
        snap_xmax: first.try_get("snap_xmax")?,
        seq_last: first.try_get("seq_last")?,
        rows: Vec::with_capacity(found.len()),
    };
    for row in &found {
        if row.try_get::<Option<i64>, _>("id")?.is_some() {
            read.rows.push(ChangeRow::from_row(row)?);
        }
    }
    Ok(read)
}

async fn pump(hub: Arc<Hub>, mut follow: Follow, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut pruned = Instant::now();
    loop {
        if *stop.borrow() {
            return;
        }
        // Always follow the log, watched or not: a first subscriber then starts at the present,
        // and ids skipped meanwhile are tracked as gaps like any others.
        let more = match read_once(&hub, &mut follow).await {
            Ok(more) => more,
            Err(err) => {
                tracing::warn!("reading live changes failed: {err}");
                false
            }
        };
        if pruned.elapsed() >= hub.options.prune_every {
            pruned = Instant::now();
            if let Err(err) = prune(&hub, &mut follow).await {
                tracing::warn!("pruning live changes failed: {err}");
            }
        }
        if more {
            continue;
        }
        tokio::select! {
            () = hub.wake.notified() => {}
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Deletes changes by id (the log has no index on time): up to the last id read `retention`
/// ago, and never a gap still waited for.
async fn prune(hub: &Hub, follow: &mut Follow) -> Result<()> {
    let now = Instant::now();
    follow.marks.push_back((now, follow.last));
    let mut upto = None;
    while let Some(&(at, id)) = follow.marks.front() {
        if now.duration_since(at) < hub.options.retention {
            break;
        }
        upto = Some(id);
        follow.marks.pop_front();
    }
    let Some(mut upto) = upto else {
        return Ok(());
    };
    if let Some((&gap, _)) = follow.gaps.first_key_value() {
        upto = upto.min(gap - 1);
    }
    sqlx::query("DELETE FROM live_changes WHERE id <= $1")
        .bind(upto)
        .execute(hub.store.pool())
        .await?;
    Ok(())
}

/// Reads and publishes what is new; true when there may be more right away. The position moves
/// only once the batch is published, so a failed read is simply read again.
async fn read_once(hub: &Hub, follow: &mut Follow) -> Result<bool> {
    let gap_ids: Vec<i64> = follow.gaps.keys().copied().collect();
    let read = read_log(&hub.store, follow.last, &gap_ids).await?;
    if read.seq_last < follow.last {
        // The sequence went back: the log was reset (emptied by a crash, its sequence restarted).
        // Everything in it now is new; the old ids mean nothing any more.
        tracing::warn!(
            "the live change log was reset (its ids restarted below {}); following it from the start",
            follow.last
        );
        follow.last = 0;
        follow.gaps.clear();
        follow.marks.clear();
        return Ok(true);
    }
    let full = read.rows.len() as i64 == BATCH;
    let mut last = follow.last;
    let mut gaps = follow.gaps.clone();
    for row in &read.rows {
        gaps.remove(&row.id);
        if row.id > last {
            for missing in (last + 1)..row.id {
                gaps.insert(missing, read.snap_xmax);
            }
            last = row.id;
        }
    }
    // Every transaction running when a gap was first missed has ended by this snapshot (its
    // xmin is past that read's xmax), and the id is still not there: it was never committed.
    gaps.retain(|_, missed_under| read.snap_xmin < *missed_under);
    // Only sessions someone watches here are worth reading for.
    let rows = hub.wanted(read.rows);
    let events = read_events(&hub.store, &rows).await?;
    let deltas = read_deltas(&hub.store, &rows).await?;
    for row in rows {
        let event = events
            .get(&row.entity_id)
            .cloned()
            .filter(|_| row.kind.starts_with("event_") && row.kind != "event_appended");
        let delta = deltas.get(&row.id).cloned();
        hub.publish(Change::new(row, delta, event));
    }
    follow.last = last;
    follow.gaps = gaps;
    hub.followed((read.seq_last - last).max(0));
    Ok(full)
}

async fn read_events(
    store: &Store,
    rows: &[ChangeRow],
) -> Result<HashMap<Uuid, Arc<TimelineEventRow>>> {
    let ids: Vec<Uuid> = rows
        .iter()
        .filter(|r| r.kind == "event_created" || r.kind == "event_finished")
        .map(|r| r.entity_id)
        .collect();
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let events: Vec<TimelineEventRow> = store.by_ids(&ids).await?;
    Ok(events.into_iter().map(|e| (e.id, Arc::new(e))).collect())
}

/// The text of each append, read once: from its chunk (by key: the cost does not grow with the
/// stream), or from the folded event when the event finished in the meantime.
async fn read_deltas(store: &Store, rows: &[ChangeRow]) -> Result<HashMap<i64, String>> {
    let appends: Vec<&ChangeRow> = rows.iter().filter(|r| r.kind == "event_appended").collect();
    if appends.is_empty() {
        return Ok(HashMap::new());
    }
    let ids: Vec<i64> = appends.iter().map(|r| r.id).collect();
    let events: Vec<Uuid> = appends.iter().map(|r| r.entity_id).collect();
    let starts: Vec<i32> = appends
        .iter()
        .map(|r| r.start_offset.unwrap_or(0))
        .collect();
    let ends: Vec<i32> = appends.iter().map(|r| r.end_offset.unwrap_or(0)).collect();
    let found: Vec<(i64, Option<String>)> = sqlx::query_as(
        "SELECT k.id, coalesce(c.content, \
                CASE WHEN e.status <> 'streaming' \
                     THEN substr(e.content, k.start_offset + 1, k.end_offset - k.start_offset) END) \
         FROM unnest($1::bigint[], $2::uuid[], $3::int[], $4::int[]) AS k(id, event_id, start_offset, end_offset) \
         JOIN timeline_events e ON e.id = k.event_id \
         LEFT JOIN timeline_event_chunks c \
                ON c.event_id = k.event_id AND c.start_offset = k.start_offset",
    )
    .bind(&ids)
    .bind(&events)
    .bind(&starts)
    .bind(&ends)
    .fetch_all(store.pool())
    .await?;
    Ok(found
        .into_iter()
        .filter_map(|(id, text)| text.map(|t| (id, t)))
        .collect())
}

async fn listen_for_changes(hub: Arc<Hub>, mut stop: tokio::sync::watch::Receiver<bool>) {
    loop {
        if *stop.borrow() {
            return;
        }
        let mut listener = match PgListener::connect_with(hub.store.pool()).await {
            Ok(listener) => listener,
            Err(err) => {
                tracing::warn!("cannot LISTEN for live changes: {err}; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if let Err(err) = listener.listen("casefile_live").await {
            tracing::warn!("LISTEN failed: {err}; retrying");
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        loop {
            let received = tokio::select! {
                received = listener.try_recv() => received,
                _ = stop.changed() => return,
            };
            match received {
                Ok(Some(_)) => hub.poke(),
                // The connection dropped: catch up from the last change read, then listen again.
                Ok(None) => {
                    hub.poke();
                    break;
                }
                Err(err) => {
                    tracing::warn!("live change listener failed: {err}");
                    hub.poke();
                    break;
                }
            }
        }
    }
}
