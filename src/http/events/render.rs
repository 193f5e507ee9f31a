//! The SSE rendering of the typed event ([`Payload`]): seed 004's `ExecutorEvent` JSON.

use axum::response::sse::Event;
use serde_json::{Value, json};

use crate::live::envelope::{Envelope, EventAction, Payload, hierarchy};
use crate::model::{Transition, db_name};
use crate::store::TimelineEventRow;

/// One envelope as an SSE event, its `id:` its sequence (what `Last-Event-ID` resumes after).
pub(super) fn to_event(envelope: &Envelope) -> Event {
    Event::default()
        .id(envelope.position.to_string())
        .data(seed_json(envelope).to_string())
}

/// An error that ends the stream: an `error` event with seed 004's error shape.
pub(super) fn failure(code: &str, message: &str) -> Event {
    Event::default()
        .event("error")
        .data(json!({ "code": code, "message": message }).to_string())
}

/// Seed 004's `ExecutorEvent`: `run_id`, `timestamp`, `sequence`, `source`, `event` and `data`
/// (plus `first_sequence` when merged appends cover several positions).
fn seed_json(envelope: &Envelope) -> Value {
    let mut out = json!({
        "run_id": envelope.row.session_id,
        "timestamp": envelope.at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        "sequence": envelope.position,
        "source": {
            "agent_id": envelope.source.id(),
            "agent_type": db_name(envelope.source.agent_type()),
            "agent_name": envelope.source.agent_name(),
            "team_name": envelope.source.team_name(),
        },
        "event": { "category": db_name(envelope.category), "action": db_name(envelope.action) },
        "data": data_json(envelope),
    });
    if envelope.first != envelope.position {
        out["first_sequence"] = json!(envelope.first);
    }
    out
}

fn data_json(envelope: &Envelope) -> Value {
    let action = envelope.action;
    match &envelope.payload {
        Payload::Topology(agents) => json!({
            "hierarchy": hierarchy(agents, |id| id.to_string()),
        }),
        Payload::Session { status, .. } => outcome(
            envelope,
            json!({
                "subject": "session",
                "status": status.map(|s| db_name(s.to)),
                "previous_status": previous(*status),
            }),
        ),
        Payload::Agent { status, .. } => outcome(
            envelope,
            json!({
                "subject": "agent",
                "status": status.map(|s| db_name(s.to)),
                "previous_status": previous(*status),
            }),
        ),
        Payload::Stage { stage, status } => json!({
            "stage_id": stage,
            "status": status.map(|s| db_name(s.to)),
            "previous_status": previous(*status),
        }),
        Payload::Dispatch(execution) => {
            let mut data = json!({
                "agent_id": execution.id,
                "task": execution.task,
                "team_name": execution.team_name,
            });
            if action == EventAction::Worker {
                data["worker_name"] = json!(execution.agent_name);
            }
            data
        }
        Payload::Appended {
            event,
            offset,
            text,
        } => {
            let field = if action == EventAction::Reasoning {
                "thought"
            } else {
                "content"
            };
            json!({ field: text, "event_id": event, "offset": offset })
        }
        Payload::ToolCall(event) => {
            let metadata = metadata(event);
            json!({
                "tool": metadata.get("tool_name"),
                "args": metadata.get("arguments"),
                "call_id": metadata.get("tool_call_id"),
                "event_id": event.id,
            })
        }
        Payload::ToolResult(event) => {
            let metadata = metadata(event);
            json!({
                "tool": metadata.get("tool_name"),
                "result": event.content,
                "status": db_name(event.status),
                "call_id": metadata.get("tool_call_id"),
                "event_id": event.id,
            })
        }
        Payload::Notice(event) => json!({
            "message": event.content,
            "code": metadata(event).get("code"),
            "event_id": event.id,
        }),
        Payload::Timeline(event) => json!({
            "event_id": event.id,
            "event_type": db_name(event.event_type),
            "status": db_name(event.status),
            "content": event.content,
        }),
        Payload::Message(id) => json!({ "message_id": id }),
        Payload::LlmInteraction(id) | Payload::McpInteraction(id) => {
            json!({ "interaction_id": id })
        }
        Payload::ChatOpened(id) | Payload::ChatDeletion(id) => json!({ "chat_id": id }),
        Payload::ChatQuestion(id) => json!({ "question_id": id }),
        Payload::Notification {
            notification,
            status,
        } => json!({
            "notification_id": notification,
            "status": status.map(|s| db_name(s.to)),
            "previous_status": previous(*status),
        }),
    }
}

/// A lifecycle's `data` with seed 004's `summary` (`lifecycle.completed`) or `error`
/// (`lifecycle.failed`, and `timed_out` and `cancelled`): null when none was recorded.
fn outcome(envelope: &Envelope, mut data: Value) -> Value {
    match envelope.action {
        EventAction::Completed => data["summary"] = json!(envelope.payload.summary()),
        EventAction::Failed | EventAction::TimedOut | EventAction::Cancelled => {
            data["error"] = json!(envelope.payload.error())
        }
        _ => {}
    }
    data
}

/// The status before the change, as the database spells it (null on creation).
fn previous<S: serde::Serialize>(status: Option<Transition<S>>) -> Option<String> {
    status.and_then(|s| s.from).map(db_name)
}

/// What a timeline event's metadata says (`tool_name`, `arguments`, `tool_call_id`, `code`).
fn metadata(event: &TimelineEventRow) -> Value {
    serde_json::from_str(event.metadata.get()).unwrap_or(Value::Null)
}
