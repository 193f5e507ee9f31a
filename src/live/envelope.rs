//! A session event as clients receive it: seed 004's envelope (sequence, timestamp, the source
//! agent, `category.action`, data), extended where casefile records more. One position of the
//! session's order is one envelope, except consecutive appends to one timeline event, which may
//! travel as one envelope that says which positions it covers.
//!
//! | category      | actions                                                               |
//! |---------------|-----------------------------------------------------------------------|
//! | `lifecycle`   | `created`, `started`, `cancelling`, `completed`, `failed`,            |
//! |               | `cancelled`, `timed_out`, `updated`, `deleted`, `restored` (session   |
//! |               | when there is no source, else the source agent)                       |
//! | `stage`       | `created`, `started`, `completed`, `failed`, `cancelled`, `timed_out` |
//! | `dispatch`    | `team`, `worker` (the source dispatched a team supervisor or worker)  |
//! | `llm`         | `stream`, `reasoning` (text appended), `tool_call`, `tool_result`     |
//! | `timeline`    | `created`, `finished` (other timeline events)                         |
//! | `message`     | `added`                                                               |
//! | `interaction` | `llm`, `mcp`                                                          |
//! | `chat`        | `opened`, `question`                                                  |
//! | `system`      | `warning`, `error`, `topology`                                        |

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::model::{AgentType, TimelineEventType};
use crate::store::session_events::{ChangeKind, SessionEventRow};
use crate::store::{ExecutionRow, TimelineEventRow};

/// What part of a run an event is about.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize, async_graphql::Enum,
)]
#[serde(rename_all = "snake_case")]
pub enum EventCategory {
    /// The session's lifecycle (no source), or an agent's (its source).
    Lifecycle,
    /// A stage's lifecycle.
    Stage,
    /// An agent dispatched a team supervisor or a worker.
    Dispatch,
    /// What an agent's model produced: text as it streams, tool calls and their results.
    Llm,
    /// Other timeline events created and finished (summaries, final analyses, questions).
    Timeline,
    /// A message added to an agent's LLM conversation.
    Message,
    /// A debug record of an LLM or MCP call.
    Interaction,
    /// Follow-up chat activity.
    Chat,
    /// Warnings and errors the orchestrator recorded, and the agent tree.
    System,
}

/// What happened, within its category (see [`EventCategory`] for which go together).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize, async_graphql::Enum,
)]
#[serde(rename_all = "snake_case")]
pub enum EventAction {
    /// Created (the session, a stage, an agent not dispatched by another, a timeline event).
    Created,
    /// Started running.
    Started,
    /// The session was asked to cancel; it ends when its running agents have.
    Cancelling,
    /// Ended successfully.
    Completed,
    /// Ended in failure.
    Failed,
    /// Ended by cancellation.
    Cancelled,
    /// Ended by running out of time.
    TimedOut,
    /// The session changed without changing status.
    Updated,
    /// The session was deleted (hidden from lists).
    Deleted,
    /// The deleted session was restored.
    Restored,
    /// A team supervisor was dispatched.
    Team,
    /// A worker was dispatched.
    Worker,
    /// Response text was appended.
    Stream,
    /// Reasoning text was appended.
    Reasoning,
    /// The model asked for a tool call.
    ToolCall,
    /// An MCP tool call ended, with its result.
    ToolResult,
    /// A timeline event ended (its final content).
    Finished,
    /// A message was added to a conversation.
    Added,
    /// An LLM call was recorded.
    Llm,
    /// An MCP call was recorded.
    Mcp,
    /// A follow-up chat was opened.
    Opened,
    /// A question was asked in a chat.
    Question,
    /// A warning was recorded.
    Warning,
    /// An error was recorded.
    Error,
    /// A snapshot of the agent tree.
    Topology,
}

impl EventAction {
    /// The action a status change into `status` (snake_case, as stored) stands for.
    fn of_status(status: Option<&str>, previous: Option<&str>) -> EventAction {
        if previous.is_none() {
            return EventAction::Created;
        }
        if status == previous {
            return EventAction::Updated;
        }
        match status {
            Some("in_progress" | "active") => EventAction::Started,
            Some("cancelling") => EventAction::Cancelling,
            Some("completed") => EventAction::Completed,
            Some("failed") => EventAction::Failed,
            Some("cancelled") => EventAction::Cancelled,
            Some("timed_out") => EventAction::TimedOut,
            _ => EventAction::Updated,
        }
    }
}

/// The agent an event comes from (seed 004's `EventSource`).
pub type Source = Arc<ExecutionRow>;

/// One envelope: the positions it covers, and what they say.
#[derive(Debug, Clone)]
pub struct Envelope {
    /// The first position it covers (its `position` unless appends were merged).
    pub first: i64,
    /// The last (or only) position it covers.
    pub position: i64,
    /// When the last of them was recorded.
    pub at: DateTime<Utc>,
    pub category: EventCategory,
    pub action: EventAction,
    /// The change (of the last position it covers).
    pub row: Arc<SessionEventRow>,
    pub source: Option<Source>,
    /// For a timeline change: the event (its content as of this position: see
    /// [`Envelope::event_content`]).
    pub event: Option<Arc<TimelineEventRow>>,
    /// For an execution's change: the execution.
    pub execution: Option<Arc<ExecutionRow>>,
    /// For appends: the appended text.
    pub text: Option<String>,
    /// For appends: where the text starts, in characters.
    pub offset: Option<i64>,
    /// For a topology snapshot: the agent tree, as a flat list in tree order.
    pub agents: Vec<Arc<ExecutionRow>>,
}

/// What is known of a change besides its row, for its envelope.
#[derive(Default)]
pub struct Known {
    /// For a timeline event's creation or end: the event as read.
    pub event: Option<Arc<TimelineEventRow>>,
    /// For an append: the event's type.
    pub event_type: Option<TimelineEventType>,
    pub execution: Option<Arc<ExecutionRow>>,
    /// The execution's parent (the source of a dispatch).
    pub parent: Option<Arc<ExecutionRow>>,
    pub text: Option<String>,
}

impl Envelope {
    /// The envelope of one change, or `None` when what it needs was not found (a record deleted
    /// since: its session is being deleted).
    pub fn of(row: Arc<SessionEventRow>, known: Known) -> Option<Envelope> {
        let (category, action) = classify(&row, &known)?;
        let source = match (category, row.kind) {
            (EventCategory::Dispatch, _) => known.parent.clone(),
            (_, kind) if kind.is_session() => None,
            (EventCategory::Stage | EventCategory::Chat, _) => None,
            _ => known.execution.clone(),
        };
        let offset = (row.kind == ChangeKind::EventAppended)
            .then(|| row.start_offset.map(i64::from))
            .flatten();
        Some(Envelope {
            first: row.position,
            position: row.position,
            at: row.created_at,
            category,
            action,
            source,
            event: known.event,
            execution: known.execution,
            text: known.text,
            offset,
            agents: Vec::new(),
            row,
        })
    }

    /// A snapshot of a session's agent tree as of `position` (not a position of its own).
    pub fn topology(session: Uuid, position: i64, agents: Vec<Arc<ExecutionRow>>) -> Envelope {
        let now = Utc::now();
        Envelope {
            first: position,
            position,
            at: now,
            category: EventCategory::System,
            action: EventAction::Topology,
            row: Arc::new(SessionEventRow::of_session(session, position, now)),
            source: None,
            event: None,
            execution: None,
            text: None,
            offset: None,
            agents,
        }
    }

    /// Merges the next envelope into this one when both are appends to the same event, the
    /// next right after this one's text; true when it did.
    pub fn absorb(&mut self, next: &Envelope) -> bool {
        let appends = self.row.kind == ChangeKind::EventAppended
            && next.row.kind == ChangeKind::EventAppended
            && self.row.entity_id == next.row.entity_id;
        let (Some(text), Some(more)) = (&mut self.text, &next.text) else {
            return false;
        };
        let end = self.offset.unwrap_or(0) + text.chars().count() as i64;
        if !appends || next.offset != Some(end) {
            return false;
        }
        text.push_str(more);
        self.position = next.position;
        self.at = next.at;
        self.row = next.row.clone();
        if next.event.is_some() {
            self.event = next.event.clone();
        }
        true
    }

    /// The timeline event's content as of this position: what it was created with, for a
    /// creation; all of it otherwise (it is final once finished).
    pub fn event_content(&self) -> Option<String> {
        let event = self.event.as_ref()?;
        match self.row.kind {
            ChangeKind::EventCreated if self.row.status.as_deref() == Some("streaming") => {
                let initial = self.row.end_offset.unwrap_or(0).max(0) as usize;
                Some(event.content.chars().take(initial).collect())
            }
            _ => Some(event.content.clone()),
        }
    }

    /// `category.action`, as seed 004 writes it.
    pub fn event_type(&self) -> String {
        format!(
            "{}.{}",
            crate::model::db_name(self.category),
            crate::model::db_name(self.action)
        )
    }
}

/// The category and action of a change.
fn classify(row: &SessionEventRow, known: &Known) -> Option<(EventCategory, EventAction)> {
    use EventAction as A;
    use EventCategory as C;
    let status = row.status.as_deref();
    let previous = row.previous_status.as_deref();
    Some(match row.kind {
        ChangeKind::Session => (C::Lifecycle, EventAction::of_status(status, previous)),
        ChangeKind::SessionDeleted => (C::Lifecycle, A::Deleted),
        ChangeKind::SessionRestored => (C::Lifecycle, A::Restored),
        ChangeKind::Stage => (C::Stage, EventAction::of_status(status, previous)),
        ChangeKind::Execution => {
            let execution = known.execution.as_ref()?;
            match (previous, execution.agent_type) {
                (None, AgentType::TeamSupervisor) if execution.parent_execution_id.is_some() => {
                    (C::Dispatch, A::Team)
                }
                (None, AgentType::Worker) if execution.parent_execution_id.is_some() => {
                    (C::Dispatch, A::Worker)
                }
                _ => (C::Lifecycle, EventAction::of_status(status, previous)),
            }
        }
        ChangeKind::EventCreated | ChangeKind::EventFinished => {
            let event = known.event.as_ref()?;
            let instant = row.kind == ChangeKind::EventCreated && status != Some("streaming");
            let ends = row.kind == ChangeKind::EventFinished || instant;
            match event.event_type {
                TimelineEventType::SystemWarning => (C::System, A::Warning),
                TimelineEventType::SystemError => (C::System, A::Error),
                TimelineEventType::LlmToolCall if ends => (C::Llm, A::ToolCall),
                TimelineEventType::McpToolCall if ends => (C::Llm, A::ToolResult),
                _ if row.kind == ChangeKind::EventCreated => (C::Timeline, A::Created),
                _ => (C::Timeline, A::Finished),
            }
        }
        ChangeKind::EventAppended => {
            let event_type = known
                .event_type
                .or_else(|| known.event.as_ref().map(|e| e.event_type))?;
            match event_type {
                TimelineEventType::LlmThinking => (C::Llm, A::Reasoning),
                _ => (C::Llm, A::Stream),
            }
        }
        ChangeKind::Message => (C::Message, A::Added),
        ChangeKind::LlmInteraction => (C::Interaction, A::Llm),
        ChangeKind::McpInteraction => (C::Interaction, A::Mcp),
        ChangeKind::Chat => (C::Chat, A::Opened),
        ChangeKind::ChatUserMessage => (C::Chat, A::Question),
    })
}
