//! The subscription root: live, resumable views of sessions.

use std::sync::Arc;

use async_graphql::{Context, ID, Object, Subscription};
use futures::{Stream, StreamExt as _};

use super::guards::{RoleGuard, SessionReaderGuard, may_read};
use super::ids::{self, NodeType, decode_as};
use super::types::{
    AgentExecution, Chat, ChatUserMessage, EventFilterInput, LlmInteraction, McpInteraction,
    Message, Session, SessionEvent, Stage, TimelineEvent,
};
use crate::auth::Caller;
use crate::cursor::{EventTypes, EventsPosition, FeedPosition, TimelinePosition, View};
use crate::error::Error;
use crate::live::events;
use crate::live::timeline::{self, TimelineUpdateKind, Update};
use crate::live::{Change, Hub, Named, Slot, SubscriptionSlots, feed, session_changes};
use crate::model::{Role, SessionChangeAction, SessionStatus, TimelineEventType};
use crate::store::session_events::ChangeKind;
use crate::store::sessions::Membership;
use crate::store::{SessionStatusChangeRow, Store};
use uuid::Uuid;

/// A change to a session's timeline.
pub struct TimelineUpdate(Update);

/// A change to a session's timeline, with the cursor to resume after it.
#[Object]
impl TimelineUpdate {
    /// What happened.
    async fn kind(&self) -> TimelineUpdateKind {
        self.0.kind
    }
    /// The event's global ID.
    async fn event_id(&self) -> ID {
        ids::encode(NodeType::TimelineEvent, self.0.event_id)
    }
    /// The event's position in the session's timeline.
    async fn sequence_number(&self) -> i64 {
        self.0.sequence_number
    }
    /// For `APPENDED`: where `delta` starts, in characters.
    async fn offset(&self) -> Option<i64> {
        self.0.offset
    }
    /// For `APPENDED`: the appended text (consecutive deltas of an event concatenate to exactly
    /// its content).
    async fn delta(&self) -> Option<&str> {
        self.0.delta.as_deref()
    }
    /// For `CREATED`: the event as created, its content empty (the content follows as
    /// `APPENDED` deltas). For `FINISHED`: the event as it ended; its `content` is the final
    /// content, the deltas joined (unless the writer finished it with replacement content, which
    /// then takes their place).
    async fn event(&self) -> Option<TimelineEvent> {
        let row = self.0.event.as_ref()?;
        let mut row = row.as_ref().clone();
        if self.0.kind == TimelineUpdateKind::Created {
            row.content.clear();
        }
        Some(TimelineEvent(row.into()))
    }
    /// Pass as `after` to resume right after this update (on any server process).
    async fn cursor(&self) -> &str {
        &self.0.cursor
    }
}

/// Live views of sessions.
pub struct Subscription;

/// Live views of sessions.
#[Subscription]
impl Subscription {
    /// Every change to a session's timeline, in order: events created, content appended (each
    /// delta with its offset, in characters), events finished. With `after` (a cursor from an
    /// earlier update or from a timeline connection), first what came after it, then live, with
    /// no gap and no duplicate; a connection cursor also resumes the events that were still
    /// streaming in its page from where the page left them. Narrow it to one stage or one
    /// execution with `stageId` / `executionId` (they must belong to the session); a cursor
    /// resumes the view it came from or a narrower one. `eventTypes` narrows it to events of
    /// those types (a context builder following one agent's tool calls); events of other types
    /// are passed over. Deltas arriving within 50 ms are merged per event.
    #[graphql(guard = "SessionReaderGuard")]
    async fn timeline(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The session.")] session_id: ID,
        #[graphql(desc = "Resume after this cursor.")] after: Option<String>,
        #[graphql(desc = "Only this stage's events.")] stage_id: Option<ID>,
        #[graphql(desc = "Only this execution's events.")] execution_id: Option<ID>,
        #[graphql(desc = "Only events of these types.")] event_types: Option<
            Vec<TimelineEventType>,
        >,
    ) -> async_graphql::Result<impl Stream<Item = async_graphql::Result<TimelineUpdate>> + use<>>
    {
        let session = decode_as(NodeType::Session, &session_id)?;
        may_read(ctx, session)?;
        let stage = stage_id
            .map(|id| decode_as(NodeType::Stage, &id))
            .transpose()?;
        let execution = execution_id
            .map(|id| decode_as(NodeType::AgentExecution, &id))
            .transpose()?;
        let store = ctx.data_unchecked::<Store>().clone();
        let mut view = view_of(&store, session, stage, execution).await?;
        view.types = event_types.as_deref().map(EventTypes::of);
        let position = match after {
            None => TimelinePosition::new(session, view),
            Some(cursor) => TimelinePosition::decode(&cursor, session)?.resumed_for(view)?,
        };
        let slot = take_slot(ctx, "timeline")?;
        let hub = ctx.data_unchecked::<Arc<Hub>>().clone();
        Ok(timeline::stream(store, hub, position).map(move |item| {
            let _open = &slot;
            item.map(TimelineUpdate).map_err(async_graphql::Error::from)
        }))
    }

    /// Everything that happens in a session, in its one order (`sequence` 1, 2, 3, … without
    /// gaps, the same on every server): lifecycle of the session, its stages and agents,
    /// dispatches, streamed text, tool calls, timeline events, messages, interactions, chat and
    /// system notices (see `SessionEvent` for the categories and actions). From the start, or
    /// with `after` (an event's cursor) from right after it: first what the database holds, then
    /// live, with no gap and no duplicate; text appended to one event within 50 ms may arrive
    /// merged (`firstSequence`…`sequence`). With `topology`, it starts with a snapshot of the
    /// agent tree as of where it starts.
    #[graphql(guard = "SessionReaderGuard")]
    async fn events(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The session.")] session_id: ID,
        #[graphql(desc = "Resume after this cursor.")] after: Option<String>,
        #[graphql(desc = "Only these events (all of them when absent).")] filter: Option<
            EventFilterInput,
        >,
        #[graphql(
            desc = "Start with a `SYSTEM` `TOPOLOGY` snapshot of the agent tree.",
            default
        )]
        topology: bool,
    ) -> async_graphql::Result<impl Stream<Item = async_graphql::Result<SessionEvent>> + use<>>
    {
        let session = decode_as(NodeType::Session, &session_id)?;
        may_read(ctx, session)?;
        let after = match after {
            None => 0,
            Some(cursor) => EventsPosition::decode(&cursor, session)?.position,
        };
        let filter = filter.map(EventFilterInput::into_filter).transpose()?;
        let store = ctx.data_unchecked::<Store>().clone();
        if !store.membership(session, None, None).await?.session_exists {
            return Err(Error::not_found(format!("session {session} does not exist")).into());
        }
        let slot = take_slot(ctx, "events")?;
        let hub = ctx.data_unchecked::<Arc<Hub>>().clone();
        let stream = events::stream(
            store,
            hub,
            session,
            after,
            filter.unwrap_or_default(),
            topology,
        );
        Ok(stream.map(move |item| {
            let _open = &slot;
            item.map(SessionEvent).map_err(async_graphql::Error::from)
        }))
    }

    /// Changes in one session: the session's, its stages' and executions' status and timing,
    /// new messages and interactions, chat activity. Without `after` it starts with the session
    /// as it is now; with `after` (a change's cursor) it replays what came after that change from
    /// the database, then goes on live, with no gap and no duplicate. Each change names its
    /// record (select the matching field to read it as it is when delivered).
    #[graphql(guard = "SessionReaderGuard")]
    async fn session(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The session.")] id: ID,
        #[graphql(desc = "Resume after this cursor.")] after: Option<String>,
    ) -> async_graphql::Result<impl Stream<Item = async_graphql::Result<SessionChange>> + use<>>
    {
        let session = decode_as(NodeType::Session, &id)?;
        may_read(ctx, session)?;
        let store = ctx.data_unchecked::<Store>().clone();
        let (after, first) = match after {
            Some(cursor) => (EventsPosition::decode(&cursor, session)?.position, None),
            None => {
                // The session as it is now: everything up to its latest change is in it.
                let now = store.last_session_event(session).await?;
                let first = SessionChange {
                    kind: SessionChangeKind::Session,
                    change: Arc::new(Change::of_session(session, now)),
                };
                (now, Some(first))
            }
        };
        let slot = take_slot(ctx, "session")?;
        let hub = ctx.data_unchecked::<Arc<Hub>>().clone();
        let changes = session_changes::stream(store, hub, session, after);
        let changes = changes.filter_map(|item| async move {
            match item {
                Ok(change) => {
                    let kind = SessionChangeKind::of(change.row.kind)?;
                    Some(Ok(SessionChange { kind, change }))
                }
                Err(err) => Some(Err(async_graphql::Error::from(err))),
            }
        });
        Ok(futures::stream::iter(first.map(Ok))
            .chain(changes)
            .map(move |item| {
                let _open = &slot;
                item
            }))
    }

    /// Every session's status changes (creations, status changes, deletes and restores), for
    /// dashboards, in one order the same on every server; optionally only those into one of
    /// `status`. Without `after` it starts now; with `after` (an entry's cursor) it replays what
    /// came after that entry from the database, then goes on live, with no gap and no
    /// duplicate.
    #[graphql(guard = "RoleGuard(Role::Reader)")]
    async fn sessions(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Only changes into these statuses.")] status: Option<Vec<SessionStatus>>,
        #[graphql(desc = "Resume after this cursor.")] after: Option<String>,
    ) -> async_graphql::Result<impl Stream<Item = async_graphql::Result<SessionStatusChange>> + use<>>
    {
        let store = ctx.data_unchecked::<Store>().clone();
        let after = match after {
            Some(cursor) => FeedPosition::decode(&cursor)?.position,
            None => store.last_feed_position().await?,
        };
        let slot = take_slot(ctx, "sessions")?;
        let hub = ctx.data_unchecked::<Arc<Hub>>().clone();
        let wanted = status.unwrap_or_default();
        let entries = feed::stream(store, hub, after).filter_map(move |item| {
            let keep = match &item {
                Ok(row) => wanted.is_empty() || wanted.contains(&row.to_status),
                Err(_) => true,
            };
            async move {
                keep.then(|| {
                    item.map(SessionStatusChange)
                        .map_err(async_graphql::Error::from)
                })
            }
        });
        Ok(entries.map(move |item| {
            let _open = &slot;
            item
        }))
    }
}

/// A place among the process's open subscriptions (and its caller's share of them), held while
/// the stream lives. The edge puts the [`Caller`] into every streamed operation's data.
fn take_slot(ctx: &Context<'_>, field: &'static str) -> crate::error::Result<Slot> {
    let caller = ctx.data_opt::<Caller>().ok_or_else(|| {
        Error::Unauthenticated("a subscription needs a caller to count against".to_owned())
    })?;
    Ok(ctx
        .data_unchecked::<Arc<SubscriptionSlots>>()
        .take(field, caller)?)
}

/// What kind of record a session change is about.
#[derive(async_graphql::Enum, Clone, Copy, PartialEq, Eq)]
pub enum SessionChangeKind {
    /// The session itself (status, timing, analysis).
    Session,
    /// A stage was created or changed status.
    Stage,
    /// An agent execution was created or changed status.
    Execution,
    /// A message was added to a conversation.
    Message,
    /// An LLM interaction was recorded.
    LlmInteraction,
    /// An MCP interaction was recorded.
    McpInteraction,
    /// A chat was opened.
    Chat,
    /// A question was posted in a chat.
    ChatUserMessage,
}

impl SessionChangeKind {
    fn of(kind: ChangeKind) -> Option<Self> {
        Some(match kind {
            ChangeKind::Session | ChangeKind::SessionDeleted | ChangeKind::SessionRestored => {
                Self::Session
            }
            ChangeKind::Stage => Self::Stage,
            ChangeKind::Execution => Self::Execution,
            ChangeKind::Message => Self::Message,
            ChangeKind::LlmInteraction => Self::LlmInteraction,
            ChangeKind::McpInteraction => Self::McpInteraction,
            ChangeKind::Chat | ChangeKind::ChatDeleted | ChangeKind::ChatRestored => Self::Chat,
            ChangeKind::ChatUserMessage => Self::ChatUserMessage,
            // Timeline events and notifications are in `events` only.
            ChangeKind::EventCreated
            | ChangeKind::EventAppended
            | ChangeKind::EventFinished
            | ChangeKind::Notification => {
                return None;
            }
        })
    }
}

/// A change in a session: which record, and that record as it is now.
pub struct SessionChange {
    kind: SessionChangeKind,
    change: Arc<Change>,
}

/// A change in a session: which record changed (select the matching field for its state).
#[Object]
impl SessionChange {
    /// What kind of record changed.
    async fn kind(&self) -> SessionChangeKind {
        self.kind
    }
    /// Pass as `after` to resume right after this change (on any server process).
    async fn cursor(&self) -> String {
        EventsPosition {
            session: self.change.row.session_id,
            position: self.change.row.position,
        }
        .encode()
    }
    /// The global ID of the record that changed.
    async fn id(&self) -> ID {
        let node = match self.kind {
            SessionChangeKind::Session => NodeType::Session,
            SessionChangeKind::Stage => NodeType::Stage,
            SessionChangeKind::Execution => NodeType::AgentExecution,
            SessionChangeKind::Message => NodeType::Message,
            SessionChangeKind::LlmInteraction => NodeType::LlmInteraction,
            SessionChangeKind::McpInteraction => NodeType::McpInteraction,
            SessionChangeKind::Chat => NodeType::Chat,
            SessionChangeKind::ChatUserMessage => NodeType::ChatUserMessage,
        };
        ids::encode(node, self.change.row.entity_id)
    }
    /// The session, as it is now.
    async fn session(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<Session>> {
        let row = self.change.session(store(ctx)).await?;
        Ok(row.map(Session))
    }
    /// For `STAGE`: the stage, as it is now.
    async fn stage(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<Stage>> {
        Ok(match self.named(ctx, SessionChangeKind::Stage).await? {
            Some(Named::Stage(row)) => Some(Stage(row)),
            _ => None,
        })
    }
    /// For `EXECUTION`: the agent execution, as it is now.
    async fn execution(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<AgentExecution>> {
        Ok(match self.named(ctx, SessionChangeKind::Execution).await? {
            Some(Named::Execution(row)) => Some(AgentExecution(row)),
            _ => None,
        })
    }
    /// For `MESSAGE`: the message.
    async fn message(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<Message>> {
        Ok(match self.named(ctx, SessionChangeKind::Message).await? {
            Some(Named::Message(row)) => Some(Message(row)),
            _ => None,
        })
    }
    /// For `LLM_INTERACTION`: the interaction.
    async fn llm_interaction(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<Option<LlmInteraction>> {
        Ok(
            match self.named(ctx, SessionChangeKind::LlmInteraction).await? {
                Some(Named::LlmInteraction(row)) => Some(LlmInteraction(row)),
                _ => None,
            },
        )
    }
    /// For `MCP_INTERACTION`: the interaction.
    async fn mcp_interaction(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<Option<McpInteraction>> {
        Ok(
            match self.named(ctx, SessionChangeKind::McpInteraction).await? {
                Some(Named::McpInteraction(row)) => Some(McpInteraction(row)),
                _ => None,
            },
        )
    }
    /// For `CHAT`: the chat.
    async fn chat(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<Chat>> {
        Ok(match self.named(ctx, SessionChangeKind::Chat).await? {
            Some(Named::Chat(row)) => Some(Chat(row)),
            _ => None,
        })
    }
    /// For `CHAT_USER_MESSAGE`: the question.
    async fn chat_user_message(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<Option<ChatUserMessage>> {
        Ok(
            match self.named(ctx, SessionChangeKind::ChatUserMessage).await? {
                Some(Named::ChatUserMessage(row)) => Some(ChatUserMessage(row)),
                _ => None,
            },
        )
    }
}

impl SessionChange {
    /// The changed record when the change is of `kind` (not read otherwise), read once per
    /// process for all subscribers.
    async fn named(
        &self,
        ctx: &Context<'_>,
        kind: SessionChangeKind,
    ) -> async_graphql::Result<Option<Named>> {
        if self.kind != kind {
            return Ok(None);
        }
        Ok(self.change.named(store(ctx)).await?)
    }
}

fn store<'a>(ctx: &Context<'a>) -> &'a Store {
    ctx.data_unchecked::<Store>()
}

/// A session created, whose status changed, deleted or restored: an entry of the feed.
pub struct SessionStatusChange(Arc<SessionStatusChangeRow>);

/// A session created, whose status changed, deleted or restored: an entry of the feed.
#[Object]
impl SessionStatusChange {
    /// The session, as it is now.
    async fn session(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<Session>> {
        let row = super::types::loaders(ctx)
            .sessions
            .load_one(self.0.session_id)
            .await?;
        Ok(row.map(Session))
    }
    /// What happened.
    async fn action(&self) -> SessionChangeAction {
        self.0.action
    }
    /// Its status after the change.
    async fn status(&self) -> SessionStatus {
        self.0.to_status
    }
    /// Its status before (null when it was created).
    async fn previous_status(&self) -> Option<SessionStatus> {
        self.0.from_status
    }
    /// When it happened.
    async fn changed_at(&self) -> chrono::DateTime<chrono::Utc> {
        self.0.changed_at
    }
    /// Its place in the feed (1, 2, 3, … in commit order, the same on every server).
    async fn feed_position(&self) -> i64 {
        self.0.feed_position
    }
    /// Pass as `after` to resume right after this entry (on any server process).
    async fn cursor(&self) -> String {
        FeedPosition {
            position: self.0.feed_position,
        }
        .encode()
    }
}

/// The view a timeline subscription follows; its stage and execution must be of `session`
/// (an execution's view also names its stage, so cursors of the stage's view resume it).
async fn view_of(
    store: &Store,
    session: Uuid,
    stage: Option<Uuid>,
    execution: Option<Uuid>,
) -> async_graphql::Result<View> {
    let Membership {
        session_exists: exists,
        stage_in_session: stage_ok,
        execution_stage,
    } = store.membership(session, stage, execution).await?;
    if !exists {
        return Err(Error::not_found(format!("session {session} does not exist")).into());
    }
    if !stage_ok {
        return Err(Error::bad_input("`stageId` is not a stage of this session").into());
    }
    if execution.is_some() && execution_stage.is_none() {
        return Err(
            Error::bad_input("`executionId` is not an agent execution of this session").into(),
        );
    }
    if let (Some(stage), Some(of)) = (stage, execution_stage)
        && stage != of
    {
        return Err(
            Error::bad_input("`executionId` is not an agent execution of `stageId`").into(),
        );
    }
    Ok(View {
        stage: stage.or(execution_stage),
        execution,
        types: None,
    })
}
