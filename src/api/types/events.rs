//! A session's event stream in GraphQL: seed 004's envelope (sequence, timestamp, the source
//! agent, category and action, data), its data as typed objects.

use std::sync::Arc;

use async_graphql::{Context, ID, Json, Object, Union};
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{
    AgentExecution, Chat, ChatUserMessage, LlmInteraction, McpInteraction, Message, Session, Stage,
    TimelineEvent, loaders,
};
use crate::api::ids::{self, NodeType};
use crate::api::scalars::Text;
use crate::cursor::EventsPosition;
use crate::live::envelope::{Envelope, EventAction, EventCategory};
use crate::model::{
    AgentType, ExecutionStatus, SessionStatus, StageStatus, TimelineEventStatus, TimelineEventType,
    from_db_name,
};
use crate::store::session_events::ChangeKind;
use crate::store::{ExecutionRow, TimelineEventRow};
use async_graphql::Result;

/// One event of a session's run, in the session's one order (seed 004's envelope).
pub struct SessionEvent(pub Envelope);

/// One event of a session's run, in the session's one order (seed 004's envelope). Categories
/// and actions: `LIFECYCLE` CREATED / STARTED / CANCELLING / COMPLETED / FAILED / CANCELLED /
/// TIMED_OUT / UPDATED / DELETED / RESTORED (the session's when `source` is null, else the
/// source agent's); `STAGE` CREATED / STARTED / COMPLETED / FAILED / CANCELLED / TIMED_OUT;
/// `DISPATCH` TEAM / WORKER (the source dispatched a team supervisor or a worker); `LLM` STREAM /
/// REASONING (text appended), TOOL_CALL / TOOL_RESULT; `TIMELINE` CREATED / FINISHED (other
/// timeline events); `MESSAGE` ADDED; `INTERACTION` LLM / MCP; `CHAT` OPENED / QUESTION;
/// `SYSTEM` WARNING / ERROR / TOPOLOGY.
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
    /// The agent it comes from; null for the session's own lifecycle, stages and chats.
    async fn source(&self) -> Option<EventSource> {
        self.0.source.clone().map(EventSource)
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
        EventsPosition {
            session: self.0.row.session_id,
            position: self.0.position,
        }
        .encode()
    }
}

/// The agent an event comes from (seed 004's `EventSource`).
pub struct EventSource(Arc<ExecutionRow>);

/// The agent an event comes from (seed 004's `EventSource`).
#[Object]
impl EventSource {
    /// The agent execution's global ID.
    async fn agent_id(&self) -> ID {
        ids::encode(NodeType::AgentExecution, self.0.id)
    }
    /// Where it stands in its tree.
    async fn agent_type(&self) -> AgentType {
        self.0.agent_type
    }
    /// Its name.
    async fn agent_name(&self) -> Text<'_> {
        Text(&self.0.agent_name)
    }
    /// Null for the global supervisor.
    async fn team_name(&self) -> Option<Text<'_>> {
        self.0.team_name.as_deref().map(Text)
    }
    /// The execution, as it is now.
    async fn execution(&self) -> AgentExecution {
        AgentExecution(self.0.clone())
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
    SystemNotice(SystemNotice),
    Topology(Topology),
}

impl EventData {
    fn of(envelope: &Envelope) -> EventData {
        let row = &envelope.row;
        let event = || envelope.event.clone().map(|e| as_of(envelope, e));
        match (envelope.category, envelope.action) {
            (EventCategory::System, EventAction::Topology) => EventData::Topology(Topology {
                agents: envelope.agents.clone(),
            }),
            (EventCategory::Lifecycle, _) if row.kind.is_session() => {
                EventData::SessionLifecycle(SessionLifecycle {
                    session: row.session_id,
                    status: parsed(&row.status),
                    previous: parsed(&row.previous_status),
                })
            }
            (EventCategory::Lifecycle, _) => EventData::AgentLifecycle(AgentLifecycle {
                execution: envelope.execution.clone(),
                status: parsed(&row.status),
                previous: parsed(&row.previous_status),
            }),
            (EventCategory::Stage, _) => EventData::StageLifecycle(StageLifecycle {
                stage: row.entity_id,
                status: parsed(&row.status),
                previous: parsed(&row.previous_status),
            }),
            (EventCategory::Dispatch, _) => EventData::Dispatch(Dispatch {
                execution: envelope.execution.clone(),
            }),
            (EventCategory::Llm, EventAction::Stream | EventAction::Reasoning) => {
                EventData::TextAppended(TextAppended {
                    event: row.entity_id,
                    offset: envelope.offset.unwrap_or(0),
                    text: envelope.text.clone().unwrap_or_default(),
                })
            }
            (EventCategory::Llm, EventAction::ToolCall) => {
                EventData::ToolCall(ToolCall { event: event() })
            }
            (EventCategory::Llm, _) => EventData::ToolResult(ToolResult { event: event() }),
            (EventCategory::System, _) => EventData::SystemNotice(SystemNotice { event: event() }),
            (EventCategory::Message, _) => EventData::MessageAdded(MessageAdded(row.entity_id)),
            (EventCategory::Interaction, EventAction::Llm) => {
                EventData::LlmInteractionRecorded(LlmInteractionRecorded(row.entity_id))
            }
            (EventCategory::Interaction, _) => {
                EventData::McpInteractionRecorded(McpInteractionRecorded(row.entity_id))
            }
            (EventCategory::Chat, _) if row.kind == ChangeKind::Chat => {
                EventData::ChatOpened(ChatOpened(row.entity_id))
            }
            (EventCategory::Chat, _) => EventData::ChatQuestion(ChatQuestion(row.entity_id)),
            (EventCategory::Timeline, _) => {
                EventData::TimelineEventChange(TimelineEventChange { event: event() })
            }
        }
    }
}

/// A status as the log recorded it (snake_case), as the enum it is.
fn parsed<T: serde::de::DeserializeOwned>(status: &Option<String>) -> Option<T> {
    status.as_deref().and_then(from_db_name)
}

/// The timeline event as of the envelope's position (its content then).
fn as_of(envelope: &Envelope, event: Arc<TimelineEventRow>) -> TimelineEvent {
    match envelope.event_content() {
        Some(content) if content.len() != event.content.len() => {
            let mut row = event.as_ref().clone();
            row.content = content;
            TimelineEvent(Arc::new(row))
        }
        _ => TimelineEvent(event),
    }
}

/// The session's lifecycle: created, started, completed, …
pub struct SessionLifecycle {
    session: uuid::Uuid,
    status: Option<SessionStatus>,
    previous: Option<SessionStatus>,
}

/// The session's lifecycle: created, started, completed, …
#[Object]
impl SessionLifecycle {
    /// Its status after this event.
    async fn status(&self) -> Option<SessionStatus> {
        self.status
    }
    /// Its status before (null when it was created).
    async fn previous_status(&self) -> Option<SessionStatus> {
        self.previous
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
    stage: uuid::Uuid,
    status: Option<StageStatus>,
    previous: Option<StageStatus>,
}

/// A stage's lifecycle.
#[Object]
impl StageLifecycle {
    /// Its status after this event.
    async fn status(&self) -> Option<StageStatus> {
        self.status
    }
    /// Its status before (null when it was created).
    async fn previous_status(&self) -> Option<StageStatus> {
        self.previous
    }
    /// The stage, as it is now.
    async fn stage(&self, ctx: &Context<'_>) -> Result<Option<Stage>> {
        Ok(loaders(ctx).stages.load_one(self.stage).await?.map(Stage))
    }
}

/// An agent's lifecycle (the event's source).
pub struct AgentLifecycle {
    execution: Option<Arc<ExecutionRow>>,
    status: Option<ExecutionStatus>,
    previous: Option<ExecutionStatus>,
}

/// An agent's lifecycle (the event's source).
#[Object]
impl AgentLifecycle {
    /// Its status after this event.
    async fn status(&self) -> Option<ExecutionStatus> {
        self.status
    }
    /// Its status before (null when it was created).
    async fn previous_status(&self) -> Option<ExecutionStatus> {
        self.previous
    }
    /// For `COMPLETED`: what it returned (seed 004's `summary`).
    async fn summary(&self) -> Option<Text<'_>> {
        (self.status == Some(ExecutionStatus::Completed))
            .then(|| self.execution.as_ref()?.result_summary.as_deref().map(Text))
            .flatten()
    }
    /// For `FAILED`, `TIMED_OUT`, `CANCELLED`: why (seed 004's `error`).
    async fn error(&self) -> Option<Text<'_>> {
        let finished_badly = matches!(
            self.status,
            Some(ExecutionStatus::Failed | ExecutionStatus::TimedOut | ExecutionStatus::Cancelled)
        );
        finished_badly
            .then(|| self.execution.as_ref()?.error_message.as_deref().map(Text))
            .flatten()
    }
    /// The execution, as it is now.
    async fn execution(&self) -> Option<AgentExecution> {
        self.execution.clone().map(AgentExecution)
    }
}

/// The source dispatched a team supervisor (`TEAM`) or a worker (`WORKER`).
pub struct Dispatch {
    execution: Option<Arc<ExecutionRow>>,
}

/// The source dispatched a team supervisor (`TEAM`) or a worker (`WORKER`).
#[Object]
impl Dispatch {
    /// The team it works in.
    async fn team_name(&self) -> Option<Text<'_>> {
        self.execution.as_ref()?.team_name.as_deref().map(Text)
    }
    /// The dispatched agent's name.
    async fn agent_name(&self) -> Option<Text<'_>> {
        self.execution.as_ref().map(|e| Text(&e.agent_name))
    }
    /// The task it was given.
    async fn task(&self) -> Option<Text<'_>> {
        self.execution.as_ref()?.task.as_deref().map(Text)
    }
    /// The dispatched execution, as it is now.
    async fn execution(&self) -> Option<AgentExecution> {
        self.execution.clone().map(AgentExecution)
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
pub struct TimelineEventChange {
    event: Option<TimelineEvent>,
}

/// A timeline event created (its content as created; more follows as appended text) or
/// finished (its final content).
#[Object]
impl TimelineEventChange {
    /// The event as of this change.
    async fn event(&self) -> Option<&TimelineEvent> {
        self.event.as_ref()
    }
}

/// What a tool timeline event's metadata says (`tool_name`, `arguments`, `tool_call_id`).
fn metadata(event: &Option<TimelineEvent>) -> Value {
    event
        .as_ref()
        .and_then(|e| serde_json::from_str(e.0.metadata.get()).ok())
        .unwrap_or(Value::Null)
}

fn text_field(metadata: &Value, key: &str) -> Option<String> {
    metadata.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// The model asked for a tool call.
pub struct ToolCall {
    event: Option<TimelineEvent>,
}

/// The model asked for a tool call.
#[Object]
impl ToolCall {
    /// The tool (its metadata's `tool_name`).
    async fn tool(&self) -> Option<String> {
        text_field(&metadata(&self.event), "tool_name")
    }
    /// Its arguments (its metadata's `arguments`).
    async fn args(&self) -> Option<Json<Value>> {
        metadata(&self.event).get("arguments").cloned().map(Json)
    }
    /// The call's id, which its result names (its metadata's `tool_call_id`).
    async fn call_id(&self) -> Option<String> {
        text_field(&metadata(&self.event), "tool_call_id")
    }
    /// The timeline event.
    async fn event(&self) -> Option<&TimelineEvent> {
        self.event.as_ref()
    }
}

/// An MCP tool call ended.
pub struct ToolResult {
    event: Option<TimelineEvent>,
}

/// An MCP tool call ended.
#[Object]
impl ToolResult {
    /// The tool (its metadata's `tool_name`).
    async fn tool(&self) -> Option<String> {
        text_field(&metadata(&self.event), "tool_name")
    }
    /// What it returned (the event's content).
    async fn result(&self) -> Option<&str> {
        self.event.as_ref().map(|e| e.0.content.as_str())
    }
    /// How it ended.
    async fn status(&self) -> Option<TimelineEventStatus> {
        self.event.as_ref().map(|e| e.0.status)
    }
    /// The id of the call it answers (its metadata's `tool_call_id`).
    async fn call_id(&self) -> Option<String> {
        text_field(&metadata(&self.event), "tool_call_id")
    }
    /// The timeline event.
    async fn event(&self) -> Option<&TimelineEvent> {
        self.event.as_ref()
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
pub struct SystemNotice {
    event: Option<TimelineEvent>,
}

/// A warning or error the orchestrator recorded.
#[Object]
impl SystemNotice {
    /// How serious it is.
    async fn level(&self) -> SystemLevel {
        match self.event.as_ref().map(|e| e.0.event_type) {
            Some(TimelineEventType::SystemError) => SystemLevel::Error,
            _ => SystemLevel::Warning,
        }
    }
    /// Machine-readable, e.g. `MCP_SERVER_UNAVAILABLE`.
    async fn code(&self) -> Option<String> {
        text_field(&metadata(&self.event), "code")
    }
    /// For people.
    async fn message(&self) -> Option<&str> {
        self.event.as_ref().map(|e| e.0.content.as_str())
    }
    /// The timeline event that records it.
    async fn event(&self) -> Option<&TimelineEvent> {
        self.event.as_ref()
    }
}

/// A message was added to an agent's LLM conversation.
pub struct MessageAdded(uuid::Uuid);

/// A message was added to an agent's LLM conversation.
#[Object]
impl MessageAdded {
    /// The message.
    async fn message(&self, ctx: &Context<'_>) -> Result<Option<Message>> {
        Ok(loaders(ctx).messages.load_one(self.0).await?.map(Message))
    }
}

/// An LLM call was recorded.
pub struct LlmInteractionRecorded(uuid::Uuid);

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
pub struct McpInteractionRecorded(uuid::Uuid);

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
pub struct ChatOpened(uuid::Uuid);

/// A follow-up chat was opened.
#[Object]
impl ChatOpened {
    /// The chat.
    async fn chat(&self, ctx: &Context<'_>) -> Result<Option<Chat>> {
        Ok(loaders(ctx).chats.load_one(self.0).await?.map(Chat))
    }
}

/// A question was asked in a chat.
pub struct ChatQuestion(uuid::Uuid);

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

/// The session's agent tree as of the event's `sequence` (a snapshot, not a position of its
/// own): a flat list in tree order, each agent after its parent.
pub struct Topology {
    agents: Vec<Arc<ExecutionRow>>,
}

/// The session's agent tree as of the event's `sequence` (a snapshot, not a position of its
/// own): a flat list in tree order, each agent after its parent.
#[Object]
impl Topology {
    /// Every agent, each right after its parent.
    async fn agents(&self) -> Vec<AgentExecution> {
        self.agents.iter().cloned().map(AgentExecution).collect()
    }
}
