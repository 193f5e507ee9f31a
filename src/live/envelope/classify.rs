//! How a change is read into an envelope's category, action and typed payload.

use std::sync::Arc;

use super::{EventAction, EventCategory, Known, Payload};
use crate::model::{
    AgentType, ExecutionStatus, NotificationStatus, SessionStatus, StageStatus, Status,
    TimelineEventType, Transition,
};
use crate::store::TimelineEventRow;
use crate::store::session_events::{ChangeKind, SessionEventRow};

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
/// The category, action and payload of a change.
pub(super) fn classify(
    row: &SessionEventRow,
    known: Known,
) -> Option<(EventCategory, EventAction, Payload)> {
    use EventAction as A;
    use EventCategory as C;
    let id = row.entity_id;
    Some(match row.kind {
        ChangeKind::Session => {
            let status = match row.status {
                Some(Status::Session(status)) => Some(status),
                _ => None,
            };
            let session = known.session;
            (
                C::Lifecycle,
                A::of_status(status),
                Payload::Session { status, session },
            )
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
            let payload = Payload::Session {
                status,
                session: None,
            };
            (C::Lifecycle, action, payload)
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
        ChangeKind::ChatDeleted => (C::Chat, A::Deleted, Payload::ChatDeletion(id)),
        ChangeKind::ChatRestored => (C::Chat, A::Restored, Payload::ChatDeletion(id)),
        ChangeKind::Notification => {
            let status = match row.status {
                Some(Status::Notification(status)) => Some(status),
                _ => None,
            };
            let action = match status {
                None | Some(Transition { from: None, .. }) => A::Created,
                Some(Transition { to, .. }) => match to {
                    NotificationStatus::Sent => A::Sent,
                    NotificationStatus::Delivered => A::Delivered,
                    // Back to pending: an attempt failed and it waits out its backoff.
                    NotificationStatus::Pending
                    | NotificationStatus::Sending
                    | NotificationStatus::Failed => A::Failed,
                },
            };
            let payload = Payload::Notification {
                notification: id,
                status,
            };
            (C::Notification, action, payload)
        }
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
