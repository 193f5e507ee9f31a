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

use crate::model::{
    AgentType, ExecutionStatus, SessionStatus, StageStatus, Status, TimelineEventType, Transition,
};
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
    /// The action a change of status stands for.
    fn of_status<S: Copy + PartialEq + Into<EventAction>>(
        status: Option<Transition<S>>,
    ) -> EventAction {
        match status {
            None | Some(Transition { from: None, .. }) => EventAction::Created,
            Some(Transition {
                to,
                from: Some(from),
            }) if to == from => EventAction::Updated,
            Some(Transition { to, .. }) => to.into(),
        }
    }
}

impl From<SessionStatus> for EventAction {
    fn from(status: SessionStatus) -> EventAction {
        match status {
            SessionStatus::Pending => EventAction::Updated,
            SessionStatus::InProgress => EventAction::Started,
            SessionStatus::Cancelling => EventAction::Cancelling,
            SessionStatus::Completed => EventAction::Completed,
            SessionStatus::Failed => EventAction::Failed,
            SessionStatus::Cancelled => EventAction::Cancelled,
            SessionStatus::TimedOut => EventAction::TimedOut,
        }
    }
}

impl From<StageStatus> for EventAction {
    fn from(status: StageStatus) -> EventAction {
        match status {
            StageStatus::Pending => EventAction::Updated,
            StageStatus::Active => EventAction::Started,
            StageStatus::Completed => EventAction::Completed,
            StageStatus::Failed => EventAction::Failed,
            StageStatus::TimedOut => EventAction::TimedOut,
            StageStatus::Cancelled => EventAction::Cancelled,
        }
    }
}

impl From<ExecutionStatus> for EventAction {
    fn from(status: ExecutionStatus) -> EventAction {
        match status {
            ExecutionStatus::Pending => EventAction::Updated,
            ExecutionStatus::Active => EventAction::Started,
            ExecutionStatus::Completed => EventAction::Completed,
            ExecutionStatus::Failed => EventAction::Failed,
            ExecutionStatus::TimedOut => EventAction::TimedOut,
            ExecutionStatus::Cancelled => EventAction::Cancelled,
        }
    }
}

/// The agent an event comes from (seed 004's `EventSource`).
pub type Source = Arc<ExecutionRow>;

/// What an envelope says, typed: built once from the change, rendered by each transport (the
/// GraphQL `EventData` union, the plain SSE JSON).
#[derive(Debug, Clone)]
pub enum Payload {
    /// The session's lifecycle (`None`: a change that is not a stored one).
    Session(Option<Transition<SessionStatus>>),
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
    pub source: Option<Source>,
    pub payload: Payload,
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
        let (parent, execution) = (known.parent.clone(), known.execution.clone());
        let (category, action, payload) = classify(&row, known)?;
        let source = match (category, row.kind) {
            (EventCategory::Dispatch, _) => parent,
            (_, kind) if kind.is_session() => None,
            (EventCategory::Stage | EventCategory::Chat, _) => None,
            _ => execution,
        };
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
            source: None,
            payload: Payload::Topology(agents),
        }
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

/// The category, action and payload of a change.
fn classify(row: &SessionEventRow, known: Known) -> Option<(EventCategory, EventAction, Payload)> {
    use EventAction as A;
    use EventCategory as C;
    let id = row.entity_id;
    Some(match row.kind {
        ChangeKind::Session => {
            let status = match row.status {
                Some(Status::Session(status)) => Some(status),
                _ => None,
            };
            (C::Lifecycle, A::of_status(status), Payload::Session(status))
        }
        ChangeKind::SessionDeleted | ChangeKind::SessionRestored => {
            let status = match row.status {
                Some(Status::Session(status)) => Some(status),
                _ => None,
            };
            let action = if row.kind == ChangeKind::SessionDeleted {
                A::Deleted
            } else {
                A::Restored
            };
            (C::Lifecycle, action, Payload::Session(status))
        }
        ChangeKind::Stage => {
            let status = match row.status {
                Some(Status::Stage(status)) => Some(status),
                _ => None,
            };
            (
                C::Stage,
                A::of_status(status),
                Payload::Stage { stage: id, status },
            )
        }
        ChangeKind::Execution => {
            let execution = known.execution?;
            let status = match row.status {
                Some(Status::Execution(status)) => Some(status),
                _ => None,
            };
            let created = status.is_none_or(|s| s.from.is_none());
            let dispatched = created && execution.parent_execution_id.is_some();
            match execution.agent_type {
                AgentType::TeamSupervisor if dispatched => {
                    (C::Dispatch, A::Team, Payload::Dispatch(execution))
                }
                AgentType::Worker if dispatched => {
                    (C::Dispatch, A::Worker, Payload::Dispatch(execution))
                }
                _ => (
                    C::Lifecycle,
                    A::of_status(status),
                    Payload::Agent { execution, status },
                ),
            }
        }
        ChangeKind::EventCreated | ChangeKind::EventFinished => {
            let event = as_of(row, known.event?);
            let streams = row.creates_streaming_event();
            let ends = row.kind == ChangeKind::EventFinished || !streams;
            match event.event_type {
                TimelineEventType::SystemWarning => (C::System, A::Warning, Payload::Notice(event)),
                TimelineEventType::SystemError => (C::System, A::Error, Payload::Notice(event)),
                TimelineEventType::LlmToolCall if ends => {
                    (C::Llm, A::ToolCall, Payload::ToolCall(event))
                }
                TimelineEventType::McpToolCall if ends => {
                    (C::Llm, A::ToolResult, Payload::ToolResult(event))
                }
                _ if row.kind == ChangeKind::EventCreated => {
                    (C::Timeline, A::Created, Payload::Timeline(event))
                }
                _ => (C::Timeline, A::Finished, Payload::Timeline(event)),
            }
        }
        ChangeKind::EventAppended => {
            let action = match known.event_type? {
                TimelineEventType::LlmThinking => A::Reasoning,
                _ => A::Stream,
            };
            let payload = Payload::Appended {
                event: id,
                offset: row.start_offset.map(i64::from),
                text: known.text,
            };
            (C::Llm, action, payload)
        }
        ChangeKind::Message => (C::Message, A::Added, Payload::Message(id)),
        ChangeKind::LlmInteraction => (C::Interaction, A::Llm, Payload::LlmInteraction(id)),
        ChangeKind::McpInteraction => (C::Interaction, A::Mcp, Payload::McpInteraction(id)),
        ChangeKind::Chat => (C::Chat, A::Opened, Payload::ChatOpened(id)),
        ChangeKind::ChatUserMessage => (C::Chat, A::Question, Payload::ChatQuestion(id)),
    })
}

/// The timeline event as of this change: what it was created with, for a creation while it
/// streams (the rest follows as appends); all of it otherwise (it is final once finished).
fn as_of(row: &SessionEventRow, event: Arc<TimelineEventRow>) -> Arc<TimelineEventRow> {
    if !row.creates_streaming_event() {
        return event;
    }
    let initial = row.end_offset.unwrap_or(0).max(0) as usize;
    let content: String = event.content.chars().take(initial).collect();
    if content.len() == event.content.len() {
        return event;
    }
    let mut then = event.as_ref().clone();
    then.content = content;
    Arc::new(then)
}
