//! The per-process hub: reads the change log once per change and broadcasts it.
//!
//! It wakes on a NOTIFY from any process (external PostgreSQL), on a commit in this process,
//! and once a second regardless, then reads every change after the last one it read. Log ids
//! are taken before commit, so a change can become visible after a later one: ids skipped over
//! are kept as gaps and read again until they appear (or are old enough to be rollbacks).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::FromRow;
use sqlx::postgres::PgListener;
use tokio::sync::{Notify, broadcast};
use uuid::Uuid;

use crate::error::Result;
use crate::store::{Store, TimelineEventRow};

/// How long a skipped log id is waited for.
const GAP_PATIENCE: Duration = Duration::from_secs(10);
/// The widest run of skipped log ids still waited for.
const MAX_GAP: i64 = 1_000;
/// How long changes stay in the log.
const RETENTION: &str = "10 minutes";

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
}

#[derive(Debug, Clone)]
pub struct Change {
    pub row: ChangeRow,
    /// For an append: the appended text.
    pub delta: Option<String>,
    /// For a created or finished event: the event as read.
    pub event: Option<Arc<TimelineEventRow>>,
}

impl Change {
    /// A change that stands for a session's current state (a subscription's first message).
    pub fn of_session(session: Uuid) -> Change {
        Change {
            row: ChangeRow {
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
            },
            delta: None,
            event: None,
        }
    }
}

pub struct Hub {
    store: Store,
    /// How many changes a subscriber may fall behind before it is told to resume.
    buffer: usize,
    sessions: Mutex<HashMap<Uuid, broadcast::Sender<Arc<Change>>>>,
    /// Session status changes of every session (the dashboard feed).
    feed: broadcast::Sender<Arc<Change>>,
    wake: Notify,
    stop: tokio::sync::watch::Sender<bool>,
}

impl Hub {
    /// Starts the hub's pump and, when the pool can spare a connection for it (an external
    /// database; the embedded one serves a single connection and a single process), a LISTEN
    /// connection for changes made by other processes.
    pub async fn start(store: Store, buffer: usize) -> Result<Arc<Hub>> {
        let buffer = buffer.max(1);
        let listen = store.pool().options().get_max_connections() > 1;
        let (stop, _) = tokio::sync::watch::channel(false);
        let hub = Arc::new(Hub {
            store,
            buffer,
            sessions: Mutex::new(HashMap::new()),
            feed: broadcast::channel(buffer).0,
            wake: Notify::new(),
            stop,
        });
        let last: i64 = sqlx::query_scalar("SELECT coalesce(max(id), 0) FROM live_changes")
            .fetch_one(hub.store.pool())
            .await?;
        tokio::spawn(pump(hub.clone(), last, hub.stop.subscribe()));
        if listen {
            tokio::spawn(listen_for_changes(hub.clone(), hub.stop.subscribe()));
        }
        Ok(hub)
    }

    /// Stops the hub's tasks (they hold database connections until then).
    pub fn shutdown(&self) {
        let _ = self.stop.send(true);
    }

    /// Something was committed here: deliver it without waiting for the next tick.
    pub fn poke(&self) {
        self.wake.notify_one();
    }

    /// Changes of one session from now on.
    pub fn subscribe(&self, session: Uuid) -> broadcast::Receiver<Arc<Change>> {
        let mut sessions = self.sessions.lock().expect("hub lock");
        sessions
            .entry(session)
            .or_insert_with(|| broadcast::channel(self.buffer).0)
            .subscribe()
    }

    /// Session changes of every session from now on.
    pub fn subscribe_feed(&self) -> broadcast::Receiver<Arc<Change>> {
        self.feed.subscribe()
    }

    fn publish(&self, change: Change) {
        let change = Arc::new(change);
        if change.row.kind == "session" && self.feed.receiver_count() > 0 {
            let _ = self.feed.send(change.clone());
        }
        let mut sessions = self.sessions.lock().expect("hub lock");
        if let Some(sender) = sessions.get(&change.row.session_id) {
            if sender.receiver_count() == 0 {
                sessions.remove(&change.row.session_id);
            } else {
                let _ = sender.send(change);
            }
        }
    }

    /// Whether anyone here wants this change.
    fn wants(&self, change: &ChangeRow) -> bool {
        (change.kind == "session" && self.feed.receiver_count() > 0)
            || self.is_watched(&change.session_id)
    }

    fn is_watched(&self, session: &Uuid) -> bool {
        self.sessions
            .lock()
            .expect("hub lock")
            .contains_key(session)
    }

    fn is_watched_at_all(&self) -> bool {
        let mut sessions = self.sessions.lock().expect("hub lock");
        sessions.retain(|_, sender| sender.receiver_count() > 0);
        !sessions.is_empty() || self.feed.receiver_count() > 0
    }
}

async fn pump(hub: Arc<Hub>, mut last: i64, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut gaps: BTreeMap<i64, Instant> = BTreeMap::new();
    let mut cleaned = Instant::now();
    loop {
        if *stop.borrow() {
            return;
        }
        let strong = &hub;
        // Nobody watching here: nothing to read. The next subscriber starts from the last id
        // read, so nothing committed in between is missed (older changes are simply dropped
        // by its position).
        let more = if !strong.is_watched_at_all() {
            false
        } else {
            match read_once(strong, &mut last, &mut gaps).await {
                Ok(more) => more,
                Err(err) => {
                    tracing::warn!("reading live changes failed: {err}");
                    false
                }
            }
        };
        if cleaned.elapsed() > Duration::from_secs(60) {
            cleaned = Instant::now();
            let cleanup = format!(
                "DELETE FROM live_changes WHERE created_at < now() - interval '{RETENTION}'"
            );
            if let Err(err) = sqlx::query(&cleanup).execute(strong.store.pool()).await {
                tracing::warn!("pruning live changes failed: {err}");
            }
        }
        if more {
            continue;
        }
        tokio::select! {
            () = strong.wake.notified() => {}
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Reads and publishes what is new; true when there may be more right away.
async fn read_once(hub: &Hub, last: &mut i64, gaps: &mut BTreeMap<i64, Instant>) -> Result<bool> {
    const BATCH: i64 = 1000;
    gaps.retain(|_, seen| seen.elapsed() < GAP_PATIENCE);
    let gap_ids: Vec<i64> = gaps.keys().copied().collect();
    let rows: Vec<ChangeRow> = sqlx::query_as(
        "SELECT id, session_id, kind, entity_id, stage_id, execution_id, sequence_number, \
                start_offset, end_offset, status \
         FROM live_changes WHERE id > $1 OR id = ANY($2) ORDER BY id LIMIT $3",
    )
    .bind(*last)
    .bind(&gap_ids)
    .bind(BATCH)
    .fetch_all(hub.store.pool())
    .await?;
    let full = rows.len() as i64 == BATCH;
    for row in &rows {
        gaps.remove(&row.id);
        if row.id > *last {
            // A long jump is pruned history (after an idle spell), not transactions in flight.
            if row.id - *last <= MAX_GAP {
                for missing in (*last + 1)..row.id {
                    gaps.insert(missing, Instant::now());
                }
            }
            *last = row.id;
        }
    }
    // Only sessions someone watches here are worth reading for.
    let rows: Vec<ChangeRow> = rows.into_iter().filter(|r| hub.wants(r)).collect();
    if rows.is_empty() {
        return Ok(full);
    }
    let events = read_events(&hub.store, &rows).await?;
    let deltas = read_deltas(&hub.store, &rows).await?;
    for row in rows {
        let event = events
            .get(&row.entity_id)
            .cloned()
            .filter(|_| row.kind.starts_with("event_") && row.kind != "event_appended");
        let delta = deltas.get(&row.id).cloned();
        hub.publish(Change { row, delta, event });
    }
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

/// The text of each append, read once: from its chunk, or from the folded event when the
/// event finished in the meantime.
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
        "SELECT k.id, substr(e.content, k.start_offset + 1, k.end_offset - k.start_offset) \
         FROM unnest($1::bigint[], $2::uuid[], $3::int[], $4::int[]) AS k(id, event_id, start_offset, end_offset) \
         JOIN timeline_events_live e ON e.id = k.event_id",
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
