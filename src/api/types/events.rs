//! A session's event stream in GraphQL: seed 004's envelope (sequence, timestamp, the source
//! agent, category and action, data), its data as typed objects.

use std::collections::HashSet;
use std::sync::Arc;

use async_graphql::connection::PageInfo;
use async_graphql::{ComplexObject, Context, ID, Json, Object, SimpleObject, Union};
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{
    AgentExecution, Chat, ChatUserMessage, LlmInteraction, McpInteraction, Message, Notification,
    Session, Stage, TimelineEvent, loaders,
};
use crate::api::cost;
use crate::api::ids::{self, NodeType, decode_as};
use crate::api::pagination::edges_of;
use crate::api::scalars::Text;
use crate::cursor::EventsPosition;
use crate::live::envelope::{Envelope, EventAction, EventCategory, Payload, Source, hierarchy};
use crate::live::events::EventFilter;
use crate::model::{
    AgentType, ExecutionStatus, NotificationStatus, SessionStatus, StageStatus,
    TimelineEventStatus, TimelineEventType, Transition,
};
use crate::store::page::Page;
use crate::store::{ExecutionRow, Key, Store, TimelineEventRow};
use async_graphql::Result;

/// One event of a session's run, in the session's one order (seed 004's envelope).
pub struct SessionEvent(pub Envelope);

/// One event of a session's run, in the session's one order (seed 004's envelope). Categories
/// and actions: `LIFECYCLE` CREATED / STARTED / CANCELLING / COMPLETED / FAILED / CANCELLED /
/// TIMED_OUT / UPDATED / DELETED / RESTORED (the session's when `source` is the orchestrator,
/// else the source agent's); `STAGE` CREATED / STARTED / COMPLETED / FAILED / CANCELLED /
/// TIMED_OUT; `DISPATCH` TEAM / WORKER (the source dispatched a team supervisor or a worker);
/// `LLM` STREAM / REASONING (text appended), TOOL_CALL / TOOL_RESULT; `TIMELINE` CREATED /
/// FINISHED (other timeline events); `MESSAGE` ADDED; `INTERACTION` LLM / MCP; `CHAT` OPENED /
/// QUESTION; `NOTIFICATION` CREATED / SENT / DELIVERED / FAILED (an attempt, back to
/// `PENDING`, or for good; claims are not events); `SYSTEM` WARNING / ERROR / TOPOLOGY.
#[Object]
impl SessionEvent {
    /// Its position in the session's order (1, 2, 3, … without gaps, the same on every server):
    /// the last position it covers, when consecutive appends were merged into it.
    async fn sequence(&self) -> i64 {
        self.0.position
    }
    /// The first position it covers (`sequence` unless consecutive appends to one timeline
    /// event were merged into it).
    async fn first_sequence(&self) -> i64 {
        self.0.first
    }
    /// When it was recorded (as its transaction committed).
    async fn timestamp(&self) -> DateTime<Utc> {
        self.0.at
    }
    /// The session (seed 004's `run_id`).
    async fn session_id(&self) -> ID {
        ids::encode(NodeType::Session, self.0.row.session_id)
    }
    /// Who it comes from: the agent, or the orchestrator for what concerns the session as a
    /// whole (its lifecycle, stages, chats, notifications, the topology snapshot).
    async fn source(&self) -> EventSource {
        EventSource(self.0.source.clone())
    }
    /// What part of the run it is about.
    async fn category(&self) -> EventCategory {
        self.0.category
    }
    /// What happened.
    async fn action(&self) -> EventAction {
        self.0.action
    }
    /// `category.action` in seed 004's spelling, e.g. `llm.stream`.
    async fn r#type(&self) -> String {
        self.0.event_type()
    }
    /// The stage it happened in, if any.
    async fn stage_id(&self) -> Option<ID> {
        self.0
            .row
            .stage_id
            .map(|id| ids::encode(NodeType::Stage, id))
    }
    /// What it says.
    async fn data(&self) -> EventData {
        EventData::of(&self.0)
    }
    /// Pass as `after` to resume right after this event (on any server process).
    async fn cursor(&self) -> String {
        self.position().encode()
    }
}

/// Which of a session's events to receive or read; every one when a list is absent or empty.
#[derive(async_graphql::InputObject, Default)]
pub struct EventFilterInput {
    /// Only events of these categories.
    pub categories: Option<Vec<EventCategory>>,
    /// Only events whose source is one of these (a source's `agentId`: an agent execution's,
    /// or the session's for its orchestrator).
    pub agent_ids: Option<Vec<ID>>,
    /// Only events of these stages.
    pub stage_ids: Option<Vec<ID>>,
}

impl EventFilterInput {
    pub(crate) fn into_filter(self) -> crate::error::Result<EventFilter> {
        let decode = |ids: Option<Vec<ID>>,
                      decode: &dyn Fn(&str) -> crate::error::Result<uuid::Uuid>|
         -> crate::error::Result<HashSet<uuid::Uuid>> {
            ids.unwrap_or_default()
                .iter()
                .map(|id| decode(id))
                .collect()
        };
        Ok(EventFilter {
            categories: self.categories.unwrap_or_default().into_iter().collect(),
            sources: decode(self.agent_ids, &ids::decode_source)?,
            stages: decode(self.stage_ids, &|id| decode_as(NodeType::Stage, id))?,
        })
    }
}

/// A page of a session's event log: the `events` subscription's events, one per position
/// (appended text is not merged), in the session's order.
#[derive(SimpleObject)]
#[graphql(complex)]
pub struct SessionEventConnection {
    /// The events of this page, each with its cursor.
    edges: Vec<SessionEventEdge>,
    /// Where this page is: whether events lie before and after it, and the cursors to page on
    /// from either end.
    page_info: PageInfo,
    /// The session, when the log is not filtered (its count is then its latest position).
    #[graphql(skip)]
    counted: Option<uuid::Uuid>,
}

#[ComplexObject]
impl SessionEventConnection {
    /// How many events the whole log holds: the latest `sequence`, the order having no gaps.
    /// Null with a filter (counting those would read every event).
    #[graphql(complexity = "cost::aggregate(cost::COUNT, child_complexity)")]
    async fn total_count(&self, ctx: &Context<'_>) -> Result<Option<i64>> {
        let Some(session) = self.counted else {
            return Ok(None);
        };
        Ok(Some(
            ctx.data_unchecked::<Store>()
                .last_session_event(session)
                .await?,
        ))
    }
}

/// One event of a session's log, and its cursor.
#[derive(SimpleObject)]
pub struct SessionEventEdge {
    /// Pass as `after` or `before` to page on after or before this event, or as the `events`
    /// subscription's `after` to follow the session live from right after it.
    cursor: String,
    /// The event.
    node: SessionEvent,
}

impl SessionEventConnection {
    /// The connection of `page` of the log of `session`, `filtered` or not.
    pub fn new(page: Page<Envelope>, session: uuid::Uuid, filtered: bool) -> Self {
        let (edges, page_info) = edges_of(
            page,
            |envelope| {
                let event = SessionEvent(envelope);
                SessionEventEdge {
                    cursor: event.position().encode(),
                    node: event,
                }
            },
            |e| &e.cursor,
        );
        SessionEventConnection {
            edges,
            page_info,
            counted: (!filtered).then_some(session),
        }
    }
}

impl SessionEvent {
    /// Where it stands in the session's order: the cursor's place.
    fn position(&self) -> EventsPosition {
        EventsPosition {
            session: self.0.row.session_id,
            position: self.0.position,
        }
    }
}

/// Who an event comes from (seed 004's `EventSource`): an agent, or the session's orchestrator.
pub struct EventSource(Source);

/// Who an event comes from (seed 004's `EventSource`): an agent execution, or for what concerns
/// the session as a whole, its orchestrator, which stands above every agent as the hierarchy's
/// `GLOBAL_SUPERVISOR` named `orchestrator`, with no team, its `agentId` the session's ID.
#[Object]
impl EventSource {
    /// The agent execution's global ID; the session's for the orchestrator.
    async fn agent_id(&self) -> ID {
        match &self.0 {
            Source::Agent(execution) => ids::encode(NodeType::AgentExecution, execution.id),
            Source::Orchestrator(session) => ids::encode(NodeType::Session, *session),
        }
    }
    /// Where it stands in its tree (`GLOBAL_SUPERVISOR` for the orchestrator).
    async fn agent_type(&self) -> AgentType {
        self.0.agent_type()
    }
    /// Its name (`orchestrator` for the orchestrator).
    async fn agent_name(&self) -> Text<'_> {
        Text(self.0.agent_name())
    }
    /// Null for a global supervisor and the orchestrator.
    async fn team_name(&self) -> Option<Text<'_>> {
        self.0.team_name().map(Text)
    }
    /// Whether it is the session's orchestrator rather than an agent execution.
    async fn orchestrator(&self) -> bool {
        matches!(self.0, Source::Orchestrator(_))
    }
    /// The execution, as it is now (null for the orchestrator).
    async fn execution(&self) -> Option<AgentExecution> {
        self.0.execution().cloned().map(AgentExecution)
    }
}

/// What an event says, by category and action.
#[derive(Union)]
pub enum EventData {
    SessionLifecycle(SessionLifecycle),
    StageLifecycle(StageLifecycle),
    AgentLifecycle(AgentLifecycle),
    Dispatch(Dispatch),
    TextAppended(TextAppended),
    TimelineEventChange(TimelineEventChange),
    ToolCall(ToolCall),
    ToolResult(ToolResult),
    MessageAdded(MessageAdded),
    LlmInteractionRecorded(LlmInteractionRecorded),
    McpInteractionRecorded(McpInteractionRecorded),
    ChatOpened(ChatOpened),
    ChatQuestion(ChatQuestion),
    ChatDeletion(ChatDeletion),
    NotificationChange(NotificationChange),
    SystemNotice(SystemNotice),
    Topology(Topology),
}

impl EventData {
    fn of(envelope: &Envelope) -> EventData {
        let event = |row: &Arc<TimelineEventRow>| TimelineEvent(row.clone());
        // Every record an event names is of the event's session.
        let key = |id: uuid::Uuid| Key::new(envelope.row.session_id, id);
        match &envelope.payload {
            Payload::Session { status, .. } => EventData::SessionLifecycle(SessionLifecycle {
                session: envelope.row.session_id,
                status: *status,
                summary: envelope.payload.summary().map(str::to_owned),
                error: envelope.payload.error().map(str::to_owned),
            }),
            &Payload::Stage { stage, status } => EventData::StageLifecycle(StageLifecycle {
                stage: key(stage),
                status,
            }),
            Payload::Agent { execution, status } => EventData::AgentLifecycle(AgentLifecycle {
                execution: execution.clone(),
                status: *status,
                summary: envelope.payload.summary().map(str::to_owned),
                error: envelope.payload.error().map(str::to_owned),
            }),
            Payload::Dispatch(execution) => EventData::Dispatch(Dispatch(execution.clone())),
            Payload::Appended {
                event,
                offset,
                text,
            } => EventData::TextAppended(TextAppended {
                event: *event,
                offset: offset.unwrap_or(0),
                text: text.clone().unwrap_or_default(),
            }),
            Payload::ToolCall(row) => EventData::ToolCall(ToolCall(event(row))),
            Payload::ToolResult(row) => EventData::ToolResult(ToolResult(event(row))),
            Payload::Notice(row) => EventData::SystemNotice(SystemNotice(event(row))),
            Payload::Timeline(row) => {
                EventData::TimelineEventChange(TimelineEventChange(event(row)))
            }
            &Payload::Message(id) => EventData::MessageAdded(MessageAdded(key(id))),
            &Payload::LlmInteraction(id) => {
                EventData::LlmInteractionRecorded(LlmInteractionRecorded(key(id)))
            }
            &Payload::McpInteraction(id) => {
                EventData::McpInteractionRecorded(McpInteractionRecorded(key(id)))
            }
            &Payload::ChatOpened(id) => EventData::ChatOpened(ChatOpened(key(id))),
            &Payload::ChatQuestion(id) => EventData::ChatQuestion(ChatQuestion(key(id))),
            &Payload::ChatDeletion(id) => EventData::ChatDeletion(ChatDeletion(key(id))),
            &Payload::Notification {
                notification,
                status,
            } => EventData::NotificationChange(NotificationChange {
                notification: key(notification),
                status,
            }),
            Payload::Topology(agents) => EventData::Topology(Topology {
                agents: agents.clone(),
            }),
        }
    }
}

/// The session's lifecycle: created, started, completed, …
pub struct SessionLifecycle {
    session: uuid::Uuid,
    status: Option<Transition<SessionStatus>>,
    summary: Option<String>,
    error: Option<String>,
}

/// The session's lifecycle: created, started, completed, …
#[Object]
impl SessionLifecycle {
    /// Its status after this event.
    async fn status(&self) -> Option<SessionStatus> {
        self.status.map(|s| s.to)
    }
    /// Its status before (null when it was created).
    async fn previous_status(&self) -> Option<SessionStatus> {
        self.status.and_then(|s| s.from)
    }
    /// For `COMPLETED`: its executive summary, else its final analysis (seed 004's `summary`).
    async fn summary(&self) -> Option<&str> {
        self.summary.as_deref()
    }
    /// For `FAILED`, `TIMED_OUT`, `CANCELLED`: why (seed 004's `error`).
    async fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }
    /// The session, as it is now.
    async fn session(&self, ctx: &Context<'_>) -> Result<Option<Session>> {
        Ok(loaders(ctx)
            .sessions
            .load_one(self.session)
            .await?
            .map(Session))
    }
}

/// A stage's lifecycle.
pub struct StageLifecycle {
    stage: Key,
    status: Option<Transition<StageStatus>>,
}

/// A stage's lifecycle.
#[Object]
impl StageLifecycle {
    /// Its status after this event.
    async fn status(&self) -> Option<StageStatus> {
        self.status.map(|s| s.to)
    }
    /// Its status before (null when it was created).
    async fn previous_status(&self) -> Option<StageStatus> {
        self.status.and_then(|s| s.from)
    }
    /// The stage, as it is now.
    async fn stage(&self, ctx: &Context<'_>) -> Result<Option<Stage>> {
        Ok(loaders(ctx).stages.load_one(self.stage).await?.map(Stage))
    }
}

/// An agent's lifecycle (the event's source).
pub struct AgentLifecycle {
    execution: Arc<ExecutionRow>,
    status: Option<Transition<ExecutionStatus>>,
    summary: Option<String>,
    error: Option<String>,
}

/// An agent's lifecycle (the event's source).
#[Object]
impl AgentLifecycle {
    /// Its status after this event.
    async fn status(&self) -> Option<ExecutionStatus> {
        self.status.map(|s| s.to)
    }
    /// Its status before (null when it was created).
    async fn previous_status(&self) -> Option<ExecutionStatus> {
        self.status.and_then(|s| s.from)
    }
    /// For `COMPLETED`: what it returned (seed 004's `summary`).
    async fn summary(&self) -> Option<Text<'_>> {
        self.summary.as_deref().map(Text)
    }
    /// For `FAILED`, `TIMED_OUT`, `CANCELLED`: why (seed 004's `error`).
    async fn error(&self) -> Option<Text<'_>> {
        self.error.as_deref().map(Text)
    }
    /// The execution, as it is now.
    async fn execution(&self) -> Option<AgentExecution> {
        Some(AgentExecution(self.execution.clone()))
    }
}

/// The source dispatched a team supervisor (`TEAM`) or a worker (`WORKER`).
pub struct Dispatch(Arc<ExecutionRow>);

/// The source dispatched a team supervisor (`TEAM`) or a worker (`WORKER`).
#[Object]
impl Dispatch {
    /// The team it works in.
    async fn team_name(&self) -> Option<Text<'_>> {
        self.0.team_name.as_deref().map(Text)
    }
    /// The dispatched agent's name.
    async fn agent_name(&self) -> Option<Text<'_>> {
        Some(Text(&self.0.agent_name))
    }
    /// The task it was given.
    async fn task(&self) -> Option<Text<'_>> {
        self.0.task.as_deref().map(Text)
    }
    /// The dispatched execution, as it is now.
    async fn execution(&self) -> Option<AgentExecution> {
        Some(AgentExecution(self.0.clone()))
    }
}

/// Text appended to a streaming timeline event: response text (`STREAM`) or reasoning
/// (`REASONING`). Consecutive texts of one event concatenate to exactly its content.
pub struct TextAppended {
    event: uuid::Uuid,
    offset: i64,
    text: String,
}

/// Text appended to a streaming timeline event: response text (`STREAM`) or reasoning
/// (`REASONING`). Consecutive texts of one event concatenate to exactly its content.
#[Object]
impl TextAppended {
    /// The timeline event's global ID.
    async fn event_id(&self) -> ID {
        ids::encode(NodeType::TimelineEvent, self.event)
    }
    /// Where `text` starts in the event's content, in characters.
    async fn offset(&self) -> i64 {
        self.offset
    }
    /// The appended text (seed 004's `content` or `thought`).
    async fn text(&self) -> &str {
        &self.text
    }
}

/// A timeline event created (its content as created; more follows as appended text) or
/// finished (its final content).
pub struct TimelineEventChange(TimelineEvent);

/// A timeline event created (its content as created; more follows as appended text) or
/// finished (its final content).
#[Object]
impl TimelineEventChange {
    /// The event as of this change.
    async fn event(&self) -> Option<&TimelineEvent> {
        Some(&self.0)
    }
}

/// What a tool timeline event's metadata says (`tool_name`, `arguments`, `tool_call_id`).
fn metadata(event: &TimelineEvent) -> Value {
    serde_json::from_str(event.0.metadata.get()).unwrap_or(Value::Null)
}

fn text_field(metadata: &Value, key: &str) -> Option<String> {
    metadata.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// The model asked for a tool call.
pub struct ToolCall(TimelineEvent);

/// The model asked for a tool call.
#[Object]
impl ToolCall {
    /// The tool (its metadata's `tool_name`).
    async fn tool(&self) -> Option<String> {
        text_field(&metadata(&self.0), "tool_name")
    }
    /// Its arguments (its metadata's `arguments`).
    async fn args(&self) -> Option<Json<Value>> {
        metadata(&self.0).get("arguments").cloned().map(Json)
    }
    /// The call's id, which its result names (its metadata's `tool_call_id`).
    async fn call_id(&self) -> Option<String> {
        text_field(&metadata(&self.0), "tool_call_id")
    }
    /// The timeline event.
    async fn event(&self) -> Option<&TimelineEvent> {
        Some(&self.0)
    }
}

/// An MCP tool call ended.
pub struct ToolResult(TimelineEvent);

/// An MCP tool call ended.
#[Object]
impl ToolResult {
    /// The tool (its metadata's `tool_name`).
    async fn tool(&self) -> Option<String> {
        text_field(&metadata(&self.0), "tool_name")
    }
    /// What it returned (the event's content).
    async fn result(&self) -> Option<&str> {
        Some(self.0.0.content.as_str())
    }
    /// How it ended.
    async fn status(&self) -> Option<TimelineEventStatus> {
        Some(self.0.0.status)
    }
    /// The id of the call it answers (its metadata's `tool_call_id`).
    async fn call_id(&self) -> Option<String> {
        text_field(&metadata(&self.0), "tool_call_id")
    }
    /// The timeline event.
    async fn event(&self) -> Option<&TimelineEvent> {
        Some(&self.0)
    }
}

/// How serious a system notice is.
#[derive(async_graphql::Enum, Clone, Copy, PartialEq, Eq)]
pub enum SystemLevel {
    /// Something degraded, the run goes on.
    Warning,
    /// Something failed.
    Error,
}

/// A warning or error the orchestrator recorded.
pub struct SystemNotice(TimelineEvent);

/// A warning or error the orchestrator recorded.
#[Object]
impl SystemNotice {
    /// How serious it is.
    async fn level(&self) -> SystemLevel {
        match self.0.0.event_type {
            TimelineEventType::SystemError => SystemLevel::Error,
            _ => SystemLevel::Warning,
        }
    }
    /// Machine-readable, e.g. `MCP_SERVER_UNAVAILABLE`.
    async fn code(&self) -> Option<String> {
        text_field(&metadata(&self.0), "code")
    }
    /// For people.
    async fn message(&self) -> Option<&str> {
        Some(self.0.0.content.as_str())
    }
    /// The timeline event that records it.
    async fn event(&self) -> Option<&TimelineEvent> {
        Some(&self.0)
    }
}

/// A message was added to an agent's LLM conversation.
pub struct MessageAdded(Key);

/// A message was added to an agent's LLM conversation.
#[Object]
impl MessageAdded {
    /// The message.
    async fn message(&self, ctx: &Context<'_>) -> Result<Option<Message>> {
        Ok(loaders(ctx).messages.load_one(self.0).await?.map(Message))
    }
}

/// An LLM call was recorded.
pub struct LlmInteractionRecorded(Key);

/// An LLM call was recorded.
#[Object]
impl LlmInteractionRecorded {
    /// The interaction.
    async fn interaction(&self, ctx: &Context<'_>) -> Result<Option<LlmInteraction>> {
        Ok(loaders(ctx)
            .llm_interactions
            .load_one(self.0)
            .await?
            .map(LlmInteraction))
    }
}

/// An MCP call was recorded.
pub struct McpInteractionRecorded(Key);

/// An MCP call was recorded.
#[Object]
impl McpInteractionRecorded {
    /// The interaction.
    async fn interaction(&self, ctx: &Context<'_>) -> Result<Option<McpInteraction>> {
        Ok(loaders(ctx)
            .mcp_interactions
            .load_one(self.0)
            .await?
            .map(McpInteraction))
    }
}

/// A follow-up chat was opened.
pub struct ChatOpened(Key);

/// A follow-up chat was opened.
#[Object]
impl ChatOpened {
    /// The chat.
    async fn chat(&self, ctx: &Context<'_>) -> Result<Option<Chat>> {
        Ok(loaders(ctx).chats.load_one(self.0).await?.map(Chat))
    }
}

/// A chat was deleted or restored (the event's action says which).
pub struct ChatDeletion(Key);

/// A chat was deleted or restored (the event's action says which).
#[Object]
impl ChatDeletion {
    /// The chat, as it is now.
    async fn chat(&self, ctx: &Context<'_>) -> Result<Option<Chat>> {
        Ok(loaders(ctx).chats.load_one(self.0).await?.map(Chat))
    }
}

/// A question was asked in a chat.
pub struct ChatQuestion(Key);

/// A question was asked in a chat.
#[Object]
impl ChatQuestion {
    /// The question.
    async fn question(&self, ctx: &Context<'_>) -> Result<Option<ChatUserMessage>> {
        Ok(loaders(ctx)
            .chat_user_messages
            .load_one(self.0)
            .await?
            .map(ChatUserMessage))
    }
}

/// A notification was written, or its delivery moved on.
pub struct NotificationChange {
    notification: Key,
    status: Option<Transition<NotificationStatus>>,
}

/// A notification was written, or its delivery moved on (sent, delivered, an attempt failed,
/// failed for good).
#[Object]
impl NotificationChange {
    /// Its status after this event.
    async fn status(&self) -> Option<NotificationStatus> {
        self.status.map(|s| s.to)
    }
    /// Its status before (null when it was written).
    async fn previous_status(&self) -> Option<NotificationStatus> {
        self.status.and_then(|s| s.from)
    }
    /// The notification, as it is now (null once its session is purged).
    async fn notification(&self, ctx: &Context<'_>) -> Result<Option<Notification>> {
        let Key { session, id } = self.notification;
        let rows = loaders(ctx)
            .notifications_by_session
            .load_one(session)
            .await?;
        Ok(rows
            .unwrap_or_default()
            .into_iter()
            .find(|n| n.id == id)
            .map(Notification))
    }
}

/// The session's agent tree as of the event's `sequence` (a snapshot, not a position of its
/// own): a flat list in tree order, each agent after its parent.
pub struct Topology {
    agents: Vec<Arc<ExecutionRow>>,
}

/// The session's agent tree as of the event's `sequence` (a snapshot, not a position of its
/// own): as seed 004's `hierarchy`, and as a flat list in tree order.
#[Object]
impl Topology {
    /// Seed 004's `hierarchy`: a record of the roots keyed by their global ID, each with its
    /// `agent_id`, `agent_type`, `agent_name`, `team_name`, `status` and `children` (a record
    /// of the same shape), spelled as the plain event stream spells them.
    async fn hierarchy(&self) -> Json<Value> {
        Json(hierarchy(&self.agents, |id| {
            ids::encode(NodeType::AgentExecution, id).to_string()
        }))
    }
    /// Every agent, each right after its parent.
    async fn agents(&self) -> Vec<AgentExecution> {
        self.agents.iter().cloned().map(AgentExecution).collect()
    }
}
