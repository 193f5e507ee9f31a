//! A change as the hub hands it to subscribers: the logged row, what was read for it once per
//! process, and what subscribers read of it lazily, once, for all of them.

use std::sync::Arc;

use chrono::Utc;
use tokio::sync::OnceCell;
use uuid::Uuid;

use crate::error::Result;
use crate::model::TimelineEventType;
use crate::observe::metrics::LIVE_DELIVERY_LAG;
use crate::store::session_events::{ChangeKind, SessionEventRow};
use crate::store::{
    ChatRow, ChatUserMessageRow, ExecutionRow, InSession, Key, LlmInteractionRow,
    McpInteractionRow, MessageRow, SessionRow, StageRow, Store, TimelineEventRow,
};

/// The execution a change is of, and its parent.
type Executions = (Option<Arc<ExecutionRow>>, Option<Arc<ExecutionRow>>);

/// The record a change names, of the type its [`ChangeKind`] says.
#[derive(Debug, Clone)]
pub enum Named {
    Session(Arc<SessionRow>),
    Stage(Arc<StageRow>),
    Execution(Arc<ExecutionRow>),
    TimelineEvent(Arc<TimelineEventRow>),
    Message(Arc<MessageRow>),
    LlmInteraction(Arc<LlmInteractionRow>),
    McpInteraction(Arc<McpInteractionRow>),
    Chat(Arc<ChatRow>),
    ChatUserMessage(Arc<ChatUserMessageRow>),
}

#[derive(Debug, Clone)]
pub struct Change {
    pub row: SessionEventRow,
    /// For an append: the appended text.
    pub delta: Option<String>,
    /// For an append: the type of the event appended to.
    pub event_type: Option<TimelineEventType>,
    /// For a created or finished event: the event as read.
    pub event: Option<Arc<TimelineEventRow>>,
    /// The session, the record the change names, and its execution with its parent, read by the
    /// first subscriber that asks and shared with the others (lazily: many subscribers select
    /// none of them).
    session: OnceCell<Option<Arc<SessionRow>>>,
    named: OnceCell<Option<Named>>,
    executions: OnceCell<Executions>,
    /// Read from the log as it was committed (not replayed, nor a first state).
    live: bool,
}

impl Change {
    pub(super) fn new(
        row: SessionEventRow,
        delta: Option<String>,
        event_type: Option<TimelineEventType>,
        event: Option<Arc<TimelineEventRow>>,
    ) -> Self {
        Change {
            row,
            delta,
            event_type,
            event,
            session: OnceCell::new(),
            named: OnceCell::new(),
            executions: OnceCell::new(),
            live: true,
        }
    }

    /// A change read from the session's durable order (a replay): what it names is read when
    /// asked for.
    pub fn of_row(row: SessionEventRow) -> Change {
        Change::new(row, None, None, None).not_live()
    }

    /// The execution the change is of, and its parent, read once per process.
    pub async fn executions(&self, store: &Store) -> Result<Executions> {
        self.executions
            .get_or_try_init(|| async {
                let Some(id) = self.row.execution_id else {
                    return Ok((None, None));
                };
                let in_session = |id| Key::new(self.row.session_id, id);
                let execution: Option<Arc<ExecutionRow>> = one(store, in_session(id)).await?;
                let parent = match execution.as_ref().and_then(|e| e.parent_execution_id) {
                    Some(parent) => one(store, in_session(parent)).await?,
                    None => None,
                };
                Ok::<_, crate::error::Error>((execution, parent))
            })
            .await
            .cloned()
    }

    /// The change's session as it is now, read once per process.
    pub async fn session(&self, store: &Store) -> Result<Option<Arc<SessionRow>>> {
        self.session
            .get_or_try_init(|| async {
                let rows: Vec<SessionRow> = store.by_ids(&[self.row.session_id]).await?;
                Ok::<_, crate::error::Error>(rows.into_iter().next().map(Arc::new))
            })
            .await
            .cloned()
    }

    /// The record the change names (`None` when it is gone), read once per process.
    pub async fn named(&self, store: &Store) -> Result<Option<Named>> {
        self.named
            .get_or_try_init(|| async {
                let id = self.row.key();
                Ok::<_, crate::error::Error>(match self.row.kind {
                    ChangeKind::Session
                    | ChangeKind::SessionDeleted
                    | ChangeKind::SessionRestored => self.session(store).await?.map(Named::Session),
                    ChangeKind::Stage => one(store, id).await?.map(Named::Stage),
                    ChangeKind::Execution => one(store, id).await?.map(Named::Execution),
                    ChangeKind::EventCreated
                    | ChangeKind::EventAppended
                    | ChangeKind::EventFinished => match &self.event {
                        Some(event) => Some(event.clone()),
                        None => one(store, id).await?,
                    }
                    .map(Named::TimelineEvent),
                    ChangeKind::Message => one(store, id).await?.map(Named::Message),
                    ChangeKind::LlmInteraction => one(store, id).await?.map(Named::LlmInteraction),
                    ChangeKind::McpInteraction => one(store, id).await?.map(Named::McpInteraction),
                    ChangeKind::Chat | ChangeKind::ChatDeleted | ChangeKind::ChatRestored => {
                        one(store, id).await?.map(Named::Chat)
                    }
                    ChangeKind::ChatUserMessage => {
                        one(store, id).await?.map(Named::ChatUserMessage)
                    }
                    // Named by no `sessionChanges` kind (see `SessionChangeKind::of`).
                    ChangeKind::Notification => None,
                })
            })
            .await
            .cloned()
    }

    /// A change that stands for a session's current state as of `position` (a subscription's
    /// first message).
    pub fn of_session(session: Uuid, position: i64) -> Change {
        Change::new(
            SessionEventRow::of_session(session, position, Utc::now()),
            None,
            None,
            None,
        )
        .not_live()
    }

    fn not_live(self) -> Change {
        Change {
            live: false,
            ..self
        }
    }

    /// Records, once a subscriber was sent this change, how long after its commit that was
    /// (changes read from the hub's log only: a replayed one is old news).
    pub fn delivered(&self) {
        if !self.live {
            return;
        }
        let lag = (Utc::now() - self.row.created_at)
            .to_std()
            .unwrap_or_default();
        metrics::histogram!(LIVE_DELIVERY_LAG).record(lag.as_secs_f64());
    }

    /// Roughly the memory a queued change holds.
    pub(super) fn approximate_bytes(&self) -> usize {
        std::mem::size_of::<Change>()
            + self.delta.as_ref().map_or(0, String::len)
            + self.event.as_ref().map_or(0, |e| {
                std::mem::size_of::<TimelineEventRow>() + e.content.len() + e.metadata.get().len()
            })
    }
}

/// The record with this key, if it is there.
async fn one<R: InSession>(store: &Store, key: Key) -> Result<Option<Arc<R>>> {
    let rows: Vec<R> = store.by_keys(&[key]).await?;
    Ok(rows.into_iter().next().map(Arc::new))
}
