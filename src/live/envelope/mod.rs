//! A session event as clients receive it: seed 004's envelope (sequence, timestamp, the source
//! agent, `category.action`, data), extended where casefile records more. One position of the
//! session's order is one envelope, except consecutive appends to one timeline event, which may
//! travel as one envelope that says which positions it covers.
//!
//! | category      | actions                                                               |
//! |---------------|-----------------------------------------------------------------------|
//! | `lifecycle`   | `created`, `started`, `cancelling`, `completed`, `failed`,            |
//! |               | `cancelled`, `timed_out`, `updated`, `deleted`, `restored` (the       |
//! |               | session's when the source is the orchestrator, else the source's)     |
//! | `stage`       | `created`, `started`, `completed`, `failed`, `cancelled`, `timed_out` |
//! | `dispatch`    | `team`, `worker` (the source dispatched a team supervisor or worker)  |
//! | `llm`         | `stream`, `reasoning` (text appended), `tool_call`, `tool_result`     |
//! | `timeline`    | `created`, `finished` (other timeline events)                         |
//! | `message`     | `added`                                                               |
//! | `interaction` | `llm`, `mcp`                                                          |
//! | `chat`        | `opened`, `question`                                                  |
//! | `notification`| `created`, `sent`, `delivered`, `failed` (an attempt, or for good)     |
//! | `system`      | `warning`, `error`, `topology`                                        |
//!
//! Every envelope has a source ([`Source`]): the agent, or for what concerns the session as a
//! whole, its orchestrator.
//!
//! What an envelope says is one typed [`Payload`], read from the change once ([`classify`]);
//! each transport only renders it.

mod classify;
mod hierarchy;

pub use hierarchy::hierarchy;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::model::{
    AgentType, ExecutionStatus, NotificationStatus, SessionStatus, StageStatus, TimelineEventType,
    Transition,
};
use crate::store::session_events::{ChangeKind, SessionEventRow};
use crate::store::{ExecutionRow, SessionRow, TimelineEventRow};

/// What part of a run an event is about.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize, async_graphql::Enum,
)]
#[serde(rename_all = "snake_case")]
pub enum EventCategory {
    /// The session's lifecycle (its source the orchestrator), or an agent's (its source).
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
    /// A notification written, and the outcomes its delivery worker reported (claims are not
    /// events).
    Notification,
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
    /// Ended in failure (a notification: an attempt failed, or it failed for good).
    Failed,
    /// Ended by cancellation.
    Cancelled,
    /// Ended by running out of time.
    TimedOut,
    /// The session changed without changing status.
    Updated,
    /// The session (category `lifecycle`) or a chat (`chat`) was deleted (hidden from lists).
    Deleted,
    /// The deleted session or chat was restored.
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
    /// A notification was handed to its destination.
    Sent,
    /// A notification's destination confirmed it.
    Delivered,
    /// A warning was recorded.
    Warning,
    /// An error was recorded.
    Error,
    /// A snapshot of the agent tree.
    Topology,
}

/// Who an event comes from (seed 004's `EventSource`).
#[derive(Debug, Clone)]
pub enum Source {
    /// An agent execution.
    Agent(Arc<ExecutionRow>),
    /// The session's orchestrator, the source of what concerns the session as a whole (its
    /// lifecycle, stages, chats, notifications, the topology snapshot). Seed 004 requires a
    /// source on every event but `lifecycle.started`, and its sources are agents of three types;
    /// what runs the session stands above every agent, so it is the hierarchy's global
    /// supervisor: no team, named `orchestrator`, the session's id as its id.
    Orchestrator(Uuid),
}

/// The orchestrator's `agent_name`.
const ORCHESTRATOR: &str = "orchestrator";

impl Source {
    /// The execution's id, or the session's for the orchestrator.
    pub fn id(&self) -> Uuid {
        match self {
            Source::Agent(execution) => execution.id,
            Source::Orchestrator(session) => *session,
        }
    }
    pub fn agent_type(&self) -> AgentType {
        match self {
            Source::Agent(execution) => execution.agent_type,
            Source::Orchestrator(_) => AgentType::GlobalSupervisor,
        }
    }
    pub fn agent_name(&self) -> &str {
        match self {
            Source::Agent(execution) => &execution.agent_name,
            Source::Orchestrator(_) => ORCHESTRATOR,
        }
    }
    pub fn team_name(&self) -> Option<&str> {
        match self {
            Source::Agent(execution) => execution.team_name.as_deref(),
            Source::Orchestrator(_) => None,
        }
    }
    /// The agent execution (none for the orchestrator).
    pub fn execution(&self) -> Option<&Arc<ExecutionRow>> {
        match self {
            Source::Agent(execution) => Some(execution),
            Source::Orchestrator(_) => None,
        }
    }
}

/// What an envelope says, typed: built once from the change, rendered by each transport (the
/// GraphQL `EventData` union, the plain SSE JSON).
#[derive(Debug, Clone)]
pub enum Payload {
    /// The session's lifecycle (`None`: a change that is not a stored one), with the session
    /// as it is now when the change ended it (its summary or error).
    Session {
        status: Option<Transition<SessionStatus>>,
        session: Option<Arc<SessionRow>>,
    },
    /// A stage's lifecycle.
    Stage {
        stage: Uuid,
        status: Option<Transition<StageStatus>>,
    },
    /// An agent's lifecycle (the source's).
    Agent {
        execution: Arc<ExecutionRow>,
        status: Option<Transition<ExecutionStatus>>,
    },
    /// The source dispatched this execution (a team supervisor or a worker).
    Dispatch(Arc<ExecutionRow>),
    /// Text appended to a timeline event, from `offset` (in characters); the text is `None`
    /// when it cannot be told any more (the event was finished with other content).
    Appended {
        event: Uuid,
        offset: Option<i64>,
        text: Option<String>,
    },
    /// The model asked for a tool call (the event as of this position, as in the ones below).
    ToolCall(Arc<TimelineEventRow>),
    /// An MCP tool call ended.
    ToolResult(Arc<TimelineEventRow>),
    /// A warning or error the orchestrator recorded.
    Notice(Arc<TimelineEventRow>),
    /// Another timeline event created or finished.
    Timeline(Arc<TimelineEventRow>),
    Message(Uuid),
    LlmInteraction(Uuid),
    McpInteraction(Uuid),
    ChatOpened(Uuid),
    ChatQuestion(Uuid),
    /// A chat was deleted or restored (the action says which).
    ChatDeletion(Uuid),
    /// A notification was written or its delivery moved on.
    Notification {
        notification: Uuid,
        status: Option<Transition<NotificationStatus>>,
    },
    /// The agent tree, as a flat list in tree order.
    Topology(Vec<Arc<ExecutionRow>>),
}

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
    pub source: Source,
    pub payload: Payload,
}

impl Payload {
    /// What a completed session or agent concluded (seed 004's `summary` of
    /// `lifecycle.completed`): the session's executive summary, else its final analysis; the
    /// summary an agent returned.
    pub fn summary(&self) -> Option<&str> {
        match self {
            Payload::Session {
                status: Some(status),
                session: Some(session),
            } if ended(status, EventAction::Completed) => session
                .executive_summary
                .as_deref()
                .or(session.final_analysis.as_deref()),
            Payload::Agent {
                execution,
                status: Some(status),
            } if ended(status, EventAction::Completed) => execution.result_summary.as_deref(),
            _ => None,
        }
    }

    /// Why a session or agent failed, timed out or was cancelled (seed 004's `error` of
    /// `lifecycle.failed`).
    pub fn error(&self) -> Option<&str> {
        match self {
            Payload::Session {
                status: Some(status),
                session: Some(session),
            } if ended_badly(status) => session.error_message.as_deref(),
            Payload::Agent {
                execution,
                status: Some(status),
            } if ended_badly(status) => execution.error_message.as_deref(),
            _ => None,
        }
    }
}

/// Whether a change of status made it `action` (an update within a status does not).
fn ended<S: Copy + PartialEq + Into<EventAction>>(
    status: &Transition<S>,
    action: EventAction,
) -> bool {
    status.from != Some(status.to) && status.to.into() == action
}

/// Whether a change of status ended it in failure, by time or by cancellation.
fn ended_badly<S: Copy + PartialEq + Into<EventAction>>(status: &Transition<S>) -> bool {
    [
        EventAction::Failed,
        EventAction::TimedOut,
        EventAction::Cancelled,
    ]
    .into_iter()
    .any(|action| ended(status, action))
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
    /// For a change that ends the session ([`Envelope::ends_session`]): the session.
    pub session: Option<Arc<SessionRow>>,
}

impl Envelope {
    /// The envelope of one change, or `None` when what it needs was not found (a record deleted
    /// since: its session is being deleted).
    pub fn of(row: Arc<SessionEventRow>, known: Known) -> Option<Envelope> {
        let (parent, execution) = (known.parent.clone(), known.execution.clone());
        let (category, action, payload) = classify::classify(&row, known)?;
        let agent = match (category, row.kind) {
            (EventCategory::Dispatch, _) => parent,
            (_, kind) if kind.is_session() => None,
            (EventCategory::Stage | EventCategory::Chat | EventCategory::Notification, _) => None,
            _ => execution,
        };
        let source = agent.map_or(Source::Orchestrator(row.session_id), Source::Agent);
        Some(Envelope {
            first: row.position,
            position: row.position,
            at: row.created_at,
            category,
            action,
            source,
            payload,
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
            source: Source::Orchestrator(session),
            payload: Payload::Topology(agents),
        }
    }

    /// Whether the change ends the session with a summary or an error, which its envelope
    /// carries: the session must be read for it ([`Known::session`]).
    pub fn ends_session(row: &SessionEventRow) -> bool {
        use crate::model::Status;
        row.kind == ChangeKind::Session
            && matches!(row.status, Some(Status::Session(s))
                if ended(&s, EventAction::Completed) || ended_badly(&s))
    }

    /// Merges the next envelope into this one when both are appends to the same event, the
    /// next right after this one's text; true when it did.
    pub fn absorb(&mut self, next: &Envelope) -> bool {
        let (
            Payload::Appended {
                event,
                offset,
                text: Some(text),
            },
            Payload::Appended {
                event: next_event,
                offset: next_offset,
                text: Some(more),
            },
        ) = (&mut self.payload, &next.payload)
        else {
            return false;
        };
        let end = offset.unwrap_or(0) + text.chars().count() as i64;
        if event != next_event || *next_offset != Some(end) {
            return false;
        }
        text.push_str(more);
        self.position = next.position;
        self.at = next.at;
        self.row = next.row.clone();
        true
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
