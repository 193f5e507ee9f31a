//! A session's event stream: its changes in the session's order (see [`super::session_changes`]),
//! as envelopes, filtered, appends to one event merged; resumed by [`super::resume`].

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use uuid::Uuid;

use super::envelope::{Envelope, EventCategory, Known};
use super::resume::{Resumable, resume};
use super::{Change, Hub, session_changes};
use crate::cursor::EventsPosition;
use crate::error::Result;
use crate::store::session_events::{ChangeKind, SessionEventRow};
use crate::store::{ExecutionRow, InSession as _, Key, SessionRow, Store, TimelineEventRow};

/// Which of a session's events a subscriber wants (every one when all are empty).
#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    pub categories: HashSet<EventCategory>,
    /// Events whose source is one of these ([`super::envelope::Source::id`]: agents, the orchestrator).
    pub sources: HashSet<Uuid>,
    /// Events of these stages (and of their agents).
    pub stages: HashSet<Uuid>,
}

impl EventFilter {
    /// Whether it narrows nothing.
    pub fn is_empty(&self) -> bool {
        self.categories.is_empty() && self.sources.is_empty() && self.stages.is_empty()
    }

    pub(super) fn admits(&self, envelope: &Envelope) -> bool {
        (self.categories.is_empty() || self.categories.contains(&envelope.category))
            && (self.sources.is_empty() || self.sources.contains(&envelope.source.id()))
            && (self.stages.is_empty()
                || envelope
                    .row
                    .stage_id
                    .is_some_and(|s| self.stages.contains(&s)))
    }
}

/// Reads what the envelopes of these rows need, a few statements for all of them.
pub async fn envelopes(store: &Store, rows: Vec<SessionEventRow>) -> Result<Vec<Envelope>> {
    let event_keys: HashSet<Key> = rows
        .iter()
        .filter(|r| r.kind.is_event_bound())
        .map(SessionEventRow::key)
        .collect();
    let events: HashMap<Key, Arc<TimelineEventRow>> = if event_keys.is_empty() {
        HashMap::new()
    } else {
        let keys: Vec<Key> = event_keys.into_iter().collect();
        let found: Vec<TimelineEventRow> = store.by_keys(&keys).await?;
        found.into_iter().map(|e| (e.key(), Arc::new(e))).collect()
    };
    let appends: Vec<&SessionEventRow> = rows
        .iter()
        .filter(|r| r.kind == ChangeKind::EventAppended)
        .collect();
    let texts = store.appended_texts(&appends).await?;
    let execution_keys: HashSet<Key> = rows
        .iter()
        .filter_map(|r| Some(Key::new(r.session_id, r.execution_id?)))
        .collect();
    let executions = executions_with_parents(store, execution_keys).await?;
    let ended: Vec<Uuid> = rows
        .iter()
        .filter(|r| Envelope::ends_session(r))
        .map(|r| r.session_id)
        .collect();
    let sessions: HashMap<Uuid, Arc<SessionRow>> = if ended.is_empty() {
        HashMap::new()
    } else {
        let found: Vec<SessionRow> = store.by_ids(&ended).await?;
        found.into_iter().map(|s| (s.id, Arc::new(s))).collect()
    };
    Ok(rows
        .into_iter()
        .filter_map(|row| {
            let in_session = |id| Key::new(row.session_id, id);
            let execution = row
                .execution_id
                .and_then(|id| executions.get(&in_session(id)).cloned());
            let parent = execution
                .as_ref()
                .and_then(|e| e.parent_execution_id)
                .and_then(|id| executions.get(&in_session(id)).cloned());
            let (text, event_type) = match texts.get(&(row.session_id, row.position)) {
                Some(appended) => (appended.text.clone(), Some(appended.event_type)),
                None => (None, None),
            };
            let known = Known {
                event: row
                    .kind
                    .is_event_bound()
                    .then(|| events.get(&row.key()).cloned())
                    .flatten(),
                event_type,
                execution,
                parent,
                text,
                session: Envelope::ends_session(&row)
                    .then(|| sessions.get(&row.session_id).cloned())
                    .flatten(),
            };
            Envelope::of(Arc::new(row), known)
        })
        .collect())
}

/// These executions and their parents, by key.
async fn executions_with_parents(
    store: &Store,
    keys: HashSet<Key>,
) -> Result<HashMap<Key, Arc<ExecutionRow>>> {
    if keys.is_empty() {
        return Ok(HashMap::new());
    }
    let keys: Vec<Key> = keys.into_iter().collect();
    let mut found: HashMap<Key, Arc<ExecutionRow>> = store
        .by_keys::<ExecutionRow>(&keys)
        .await?
        .into_iter()
        .map(|e| (e.key(), Arc::new(e)))
        .collect();
    let parents: HashSet<Key> = found
        .values()
        .filter_map(|e| Some(Key::new(e.session_id, e.parent_execution_id?)))
        .filter(|key| !found.contains_key(key))
        .collect();
    if !parents.is_empty() {
        let parents: Vec<Key> = parents.into_iter().collect();
        for parent in store.by_keys::<ExecutionRow>(&parents).await? {
            found.insert(parent.key(), Arc::new(parent));
        }
    }
    Ok(found)
}

/// The envelope of a live change, from what the hub read for it and what it reads once per
/// process for all subscribers.
async fn envelope_of(store: &Store, change: &Change) -> Result<Option<Envelope>> {
    let (execution, parent) = change.executions(store).await?;
    let session = if Envelope::ends_session(&change.row) {
        change.session(store).await?
    } else {
        None
    };
    let known = Known {
        event: change.event.clone(),
        event_type: change.event_type,
        execution,
        parent,
        text: change.delta.clone(),
        session,
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

/// A session's events as envelopes, filtered, appends to one event merged.
struct Events {
    store: Store,
    filter: EventFilter,
    topology: bool,
}

impl Resumable for Events {
    type Position = EventsPosition;
    type Item = Envelope;
    type Out = Envelope;

    async fn first(&mut self, at: &EventsPosition) -> Result<Option<Envelope>> {
        if !self.topology {
            return Ok(None);
        }
        let agents = self.store.agent_tree_at(at.session, at.position).await?;
        let agents = agents.into_iter().map(Arc::new).collect();
        Ok(Some(Envelope::topology(at.session, at.position, agents)))
    }

    async fn page(
        &mut self,
        at: &mut EventsPosition,
        until: Option<&i64>,
    ) -> Result<Option<Vec<Envelope>>> {
        let Some(rows) = session_changes::page(&self.store, at, until).await? else {
            return Ok(None);
        };
        let envelopes = envelopes(&self.store, rows).await?;
        Ok(Some(
            envelopes
                .into_iter()
                .filter(|e| self.filter.admits(e))
                .collect(),
        ))
    }

    async fn live(
        &mut self,
        at: &mut EventsPosition,
        &position: &i64,
        change: &Arc<Change>,
    ) -> Result<Vec<Envelope>> {
        at.position = position;
        let envelope = envelope_of(&self.store, change).await?;
        Ok(envelope
            .into_iter()
            .filter(|e| self.filter.admits(e))
            .collect())
    }

    fn emit(&mut self, _: &mut EventsPosition, envelopes: Vec<Envelope>) -> Vec<Envelope> {
        coalesce(envelopes)
    }

    fn opens_window(&self, envelope: &Envelope) -> bool {
        envelope.row.kind == ChangeKind::EventAppended
    }
}

/// The stream: what came after position `after`, then live, until the subscriber goes or falls
/// too far behind (then it is told to resume from its last cursor). With `topology`, it starts
/// with a snapshot of the agent tree as of `after`.
pub fn stream(
    store: Store,
    hub: Arc<Hub>,
    session: Uuid,
    after: i64,
    filter: EventFilter,
    topology: bool,
) -> impl futures::Stream<Item = Result<Envelope>> + Send {
    let source = Events {
        store,
        filter,
        topology,
    };
    let at = EventsPosition {
        session,
        position: after,
    };
    resume(source, move || hub.subscribe(session), at)
}
