//! A session's event stream from a position on: replayed from the durable order, then live.
//! Positions are gapless and in commit order, so the stream only keeps the last position it
//! sent: a live change at or below it was replayed already, one past the next was missed (the
//! gap is read from the database), and after a resume the replay starts right there.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use uuid::Uuid;

use super::envelope::{Envelope, EventCategory, Known};
use super::queue::{COALESCE, Interrupted};
use super::{Change, Hub};
use crate::error::{Error, Result};
use crate::store::session_events::{ChangeKind, SessionEventRow};
use crate::store::{ExecutionRow, Store, TimelineEventRow};

/// Which of a session's events a subscriber wants (every one when all are empty).
#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    pub categories: HashSet<EventCategory>,
    /// Events whose source is one of these agents.
    pub executions: HashSet<Uuid>,
    /// Events of these stages (and of their agents).
    pub stages: HashSet<Uuid>,
}

impl EventFilter {
    fn admits(&self, envelope: &Envelope) -> bool {
        (self.categories.is_empty() || self.categories.contains(&envelope.category))
            && (self.executions.is_empty()
                || envelope
                    .source
                    .as_ref()
                    .is_some_and(|s| self.executions.contains(&s.id)))
            && (self.stages.is_empty()
                || envelope
                    .row
                    .stage_id
                    .is_some_and(|s| self.stages.contains(&s)))
    }
}

/// Events read per replay query.
const REPLAY_PAGE: i64 = 500;

/// Reads what the envelopes of these rows need, a few statements for all of them.
pub async fn envelopes(store: &Store, rows: Vec<SessionEventRow>) -> Result<Vec<Envelope>> {
    let ids_of = |wanted: fn(ChangeKind) -> bool| -> Vec<Uuid> {
        let set: HashSet<Uuid> = rows
            .iter()
            .filter(|r| wanted(r.kind))
            .map(|r| r.entity_id)
            .collect();
        set.into_iter().collect()
    };
    let event_ids = ids_of(ChangeKind::is_event_bound);
    let events: HashMap<Uuid, Arc<TimelineEventRow>> = if event_ids.is_empty() {
        HashMap::new()
    } else {
        let found: Vec<TimelineEventRow> = store.by_ids(&event_ids).await?;
        found.into_iter().map(|e| (e.id, Arc::new(e))).collect()
    };
    let appends: Vec<&SessionEventRow> = rows
        .iter()
        .filter(|r| r.kind == ChangeKind::EventAppended)
        .collect();
    let texts = store.appended_texts(&appends).await?;
    let execution_ids: HashSet<Uuid> = rows.iter().filter_map(|r| r.execution_id).collect();
    let executions = executions_with_parents(store, execution_ids).await?;
    Ok(rows
        .into_iter()
        .filter_map(|row| {
            let execution = row.execution_id.and_then(|id| executions.get(&id).cloned());
            let parent = execution
                .as_ref()
                .and_then(|e| e.parent_execution_id)
                .and_then(|id| executions.get(&id).cloned());
            let (text, event_type) = match texts.get(&(row.session_id, row.position)) {
                Some(appended) => (appended.text.clone(), Some(appended.event_type)),
                None => (None, None),
            };
            let known = Known {
                event: row
                    .kind
                    .is_event_bound()
                    .then(|| events.get(&row.entity_id).cloned())
                    .flatten(),
                event_type,
                execution,
                parent,
                text,
            };
            Envelope::of(Arc::new(row), known)
        })
        .collect())
}

/// These executions and their parents, by id.
async fn executions_with_parents(
    store: &Store,
    ids: HashSet<Uuid>,
) -> Result<HashMap<Uuid, Arc<ExecutionRow>>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let ids: Vec<Uuid> = ids.into_iter().collect();
    let mut found: HashMap<Uuid, Arc<ExecutionRow>> = store
        .by_ids::<ExecutionRow>(&ids)
        .await?
        .into_iter()
        .map(|e| (e.id, Arc::new(e)))
        .collect();
    let parents: Vec<Uuid> = found
        .values()
        .filter_map(|e| e.parent_execution_id)
        .filter(|id| !found.contains_key(id))
        .collect();
    if !parents.is_empty() {
        for parent in store.by_ids::<ExecutionRow>(&parents).await? {
            found.insert(parent.id, Arc::new(parent));
        }
    }
    Ok(found)
}

/// The envelope of a live change, from what the hub read for it and what it reads once per
/// process for all subscribers.
async fn envelope_of(store: &Store, change: &Change) -> Result<Option<Envelope>> {
    let (execution, parent) = change.executions(store).await?;
    let known = Known {
        event: change.event.clone(),
        event_type: change.event_type,
        execution,
        parent,
        text: change.delta.clone(),
    };
    Ok(Envelope::of(Arc::new(change.row.clone()), known))
}

/// Merges consecutive appends to one event (text of one event stays in order, and nothing is
/// reordered: an append to another event in between ends the run).
fn coalesce(envelopes: Vec<Envelope>) -> Vec<Envelope> {
    let mut merged: Vec<Envelope> = Vec::with_capacity(envelopes.len());
    for envelope in envelopes {
        if let Some(last) = merged.last_mut()
            && last.absorb(&envelope)
        {
            continue;
        }
        merged.push(envelope);
    }
    merged
}

/// The stream: what came after position `after`, then live, until the subscriber goes or falls
/// too far behind (then it is told to resume from its last cursor). When this process may have
/// missed changes, it reads them from the database, and goes on. With `topology`, it starts with
/// a snapshot of the agent tree as of `after`.
pub fn stream(
    store: Store,
    hub: Arc<Hub>,
    session: Uuid,
    after: i64,
    filter: EventFilter,
    topology: bool,
) -> impl futures::Stream<Item = Result<Envelope>> + Send {
    async_stream::try_stream! {
        let mut at = after;
        if topology {
            let agents = store.agent_tree_at(session, at).await?;
            yield Envelope::topology(session, at, agents.into_iter().map(Arc::new).collect());
        }
        loop {
            // Subscribe before replaying: whatever commits during the replay is also received
            // live, and is dropped there by its position.
            let mut live = hub.subscribe(session);
            loop {
                let rows = store.session_events_after(session, at, REPLAY_PAGE).await?;
                let Some(last) = rows.last() else { break };
                at = last.position;
                let page = envelopes(&store, rows).await?;
                for envelope in coalesce(page.into_iter().filter(|e| filter.admits(e)).collect()) {
                    yield envelope;
                }
            }
            let now = tokio::time::Instant::now();
            let mut last_sent = now.checked_sub(COALESCE).unwrap_or(now);
            let ended = loop {
                let received = live.recv_window(last_sent).await;
                let mut ended = None;
                let mut out = Vec::new();
                for item in received {
                    let change = match item {
                        Ok(change) => change,
                        Err(why) => {
                            ended = Some(why);
                            break;
                        }
                    };
                    let position = change.row.position;
                    if position <= at {
                        continue;
                    }
                    if position > at + 1 {
                        // Missed on the way (this process read the log after a reset): the
                        // database has it.
                        let rows = store.session_events_after(session, at, position - 1 - at).await?;
                        for envelope in envelopes(&store, rows).await? {
                            at = envelope.position;
                            if filter.admits(&envelope) {
                                out.push(envelope);
                            }
                        }
                        if at + 1 != position {
                            Err(Error::Internal(format!(
                                "session {session}: position {} was not found before {position}",
                                at + 1
                            )))?;
                        }
                    }
                    at = position;
                    let envelope = envelope_of(&store, &change).await?;
                    out.extend(envelope.filter(|e| filter.admits(e)));
                    change.delivered();
                }
                let out = coalesce(out);
                if out.iter().any(|e| e.row.kind == ChangeKind::EventAppended) {
                    last_sent = tokio::time::Instant::now();
                }
                for envelope in out {
                    yield envelope;
                }
                if let Some(why) = ended {
                    break why;
                }
            };
            match ended {
                Interrupted::Missed => continue,
                Interrupted::TooSlow => {
                    Err(Error::SubscriberTooSlow(format!(
                        "subscriber fell behind; subscribe again with after: \"{}\"",
                        crate::cursor::EventsPosition { session, position: at }.encode()
                    )))?;
                }
                Interrupted::Closed => return,
            }
        }
    }
}
