//! The subscription root: live, resumable views of sessions.

use std::sync::Arc;

use async_graphql::{Context, ID, Object, Subscription};
use futures::{Stream, StreamExt as _};

use super::guards::RoleGuard;
use super::ids::{self, NodeType, decode_as};
use super::types::{
    AgentExecution, Chat, ChatUserMessage, LlmInteraction, McpInteraction, Message, Session, Stage,
    TimelineEvent,
};
use crate::cursor::{TimelinePosition, View};
use crate::error::Error;
use crate::live::timeline::{self, TimelineUpdateKind, Update};
use crate::live::{Change, Hub, Interrupted, Slot, SubscriptionSlots};
use crate::model::{Role, SessionStatus, from_db_name};
use crate::store::session_events::ChangeKind;
use crate::store::sessions::Membership;
use crate::store::{Record, Store};
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
    /// resumes the view it came from or a narrower one. Deltas arriving within 50 ms are merged
    /// per event.
    #[graphql(guard = "RoleGuard(Role::Reader)")]
    async fn timeline(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The session.")] session_id: ID,
        #[graphql(desc = "Resume after this cursor.")] after: Option<String>,
        #[graphql(desc = "Only this stage's events.")] stage_id: Option<ID>,
        #[graphql(desc = "Only this execution's events.")] execution_id: Option<ID>,
    ) -> async_graphql::Result<impl Stream<Item = async_graphql::Result<TimelineUpdate>> + use<>>
    {
        let session = decode_as(NodeType::Session, &session_id)?;
        let stage = stage_id
            .map(|id| decode_as(NodeType::Stage, &id))
            .transpose()?;
        let execution = execution_id
            .map(|id| decode_as(NodeType::AgentExecution, &id))
            .transpose()?;
        let store = ctx.data_unchecked::<Store>().clone();
        let view = view_of(&store, session, stage, execution).await?;
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

    /// Changes in one session as they happen: the session's, its stages' and executions'
    /// status and timing, new messages and interactions, chat activity. It starts with the
    /// session as it is now; each change names its record (select the matching field to read it
    /// as it is when delivered).
    #[graphql(guard = "RoleGuard(Role::Reader)")]
    async fn session(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The session.")] id: ID,
    ) -> async_graphql::Result<impl Stream<Item = async_graphql::Result<SessionChange>> + use<>>
    {
        let session = decode_as(NodeType::Session, &id)?;
        let slot = take_slot(ctx, "session")?;
        let hub = ctx.data_unchecked::<Arc<Hub>>();
        let mut live = hub.subscribe(session);
        // Start with the session as it is now: no window between reading it and following it.
        let now = Arc::new(Change::of_session(session));
        Ok(async_stream::stream! {
            let _open = slot;
            yield Ok(SessionChange { kind: SessionChangeKind::Session, change: now });
            loop {
                match live.recv().await {
                    Ok(change) => {
                        if let Some(kind) = SessionChangeKind::of(change.row.kind) {
                            yield Ok(SessionChange { kind, change: change.clone() });
                            change.delivered();
                        }
                    }
                    Err(Interrupted::Closed) => break,
                    Err(why) => {
                        yield Err(interrupted(why));
                        break;
                    }
                }
            }
        })
    }

    /// Status changes of every session (and new sessions), for dashboards; optionally only
    /// those entering one of `status`.
    #[graphql(guard = "RoleGuard(Role::Reader)")]
    async fn sessions(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Only changes into these statuses.")] status: Option<Vec<SessionStatus>>,
    ) -> async_graphql::Result<impl Stream<Item = async_graphql::Result<SessionStatusChange>> + use<>>
    {
        let slot = take_slot(ctx, "sessions")?;
        let mut live = ctx.data_unchecked::<Arc<Hub>>().subscribe_feed();
        let wanted = status.unwrap_or_default();
        Ok(async_stream::stream! {
            let _open = slot;
            loop {
                // The feed carries creations and status changes only.
                match live.recv().await {
                    Ok(change) => {
                        let parsed: Option<SessionStatus> =
                            change.row.status.as_deref().and_then(from_db_name);
                        if wanted.is_empty() || parsed.is_some_and(|s| wanted.contains(&s)) {
                            yield Ok(SessionStatusChange(change.clone()));
                            change.delivered();
                        }
                    }
                    Err(Interrupted::Closed) => break,
                    Err(why) => {
                        yield Err(interrupted(why));
                        break;
                    }
                }
            }
        })
    }
}

/// A place among the process's open subscriptions, held while the stream lives.
fn take_slot(ctx: &Context<'_>, field: &'static str) -> crate::error::Result<Slot> {
    ctx.data_unchecked::<Arc<SubscriptionSlots>>().take(field)
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
            ChangeKind::Chat => Self::Chat,
            ChangeKind::ChatUserMessage => Self::ChatUserMessage,
            ChangeKind::EventCreated | ChangeKind::EventAppended | ChangeKind::EventFinished => {
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
        Ok(self.record(ctx, SessionChangeKind::Stage).await?.map(Stage))
    }
    /// For `EXECUTION`: the agent execution, as it is now.
    async fn execution(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<AgentExecution>> {
        Ok(self
            .record(ctx, SessionChangeKind::Execution)
            .await?
            .map(AgentExecution))
    }
    /// For `MESSAGE`: the message.
    async fn message(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<Message>> {
        Ok(self
            .record(ctx, SessionChangeKind::Message)
            .await?
            .map(Message))
    }
    /// For `LLM_INTERACTION`: the interaction.
    async fn llm_interaction(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<Option<LlmInteraction>> {
        Ok(self
            .record(ctx, SessionChangeKind::LlmInteraction)
            .await?
            .map(LlmInteraction))
    }
    /// For `MCP_INTERACTION`: the interaction.
    async fn mcp_interaction(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<Option<McpInteraction>> {
        Ok(self
            .record(ctx, SessionChangeKind::McpInteraction)
            .await?
            .map(McpInteraction))
    }
    /// For `CHAT`: the chat.
    async fn chat(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<Chat>> {
        Ok(self.record(ctx, SessionChangeKind::Chat).await?.map(Chat))
    }
    /// For `CHAT_USER_MESSAGE`: the question.
    async fn chat_user_message(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<Option<ChatUserMessage>> {
        Ok(self
            .record(ctx, SessionChangeKind::ChatUserMessage)
            .await?
            .map(ChatUserMessage))
    }
}

impl SessionChange {
    /// The changed record when it is of `kind`: read once per process for all subscribers.
    async fn record<R: Record>(
        &self,
        ctx: &Context<'_>,
        kind: SessionChangeKind,
    ) -> async_graphql::Result<Option<Arc<R>>> {
        if self.kind != kind {
            return Ok(None);
        }
        Ok(self.change.record::<R>(store(ctx)).await?)
    }
}

fn store<'a>(ctx: &Context<'a>) -> &'a Store {
    ctx.data_unchecked::<Store>()
}

/// A session whose status changed (or that was created).
pub struct SessionStatusChange(Arc<Change>);

/// A session whose status changed (or that was created).
#[Object]
impl SessionStatusChange {
    /// The session, as it is now.
    async fn session(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<Session>> {
        let row = self.0.session(store(ctx)).await?;
        Ok(row.map(Session))
    }
    /// Its new status.
    async fn status(&self) -> Option<SessionStatus> {
        self.0.row.status.as_deref().and_then(from_db_name)
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
    })
}

/// Ends a live stream whose subscriber fell behind, or that may have missed changes.
fn interrupted(why: Interrupted) -> async_graphql::Error {
    let message = match why {
        Interrupted::TooSlow => "subscriber fell behind the live stream",
        _ => "the live stream may have missed changes",
    };
    Error::SubscriberTooSlow(format!(
        "{message}; subscribe again (and re-read current state)"
    ))
    .into()
}
