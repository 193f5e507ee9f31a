//! A session's event stream as plain Server-Sent Events, for clients with no GraphQL library (a
//! browser's `EventSource`, curl): `GET /sessions/{id}/events`, one seed 004 JSON envelope per
//! event, its `id:` the event's sequence, so a reconnecting `EventSource` resumes by itself
//! (`Last-Event-ID`; or `?after=N`). Credentials: the `Authorization` header, or `?ticket=` from
//! the `createEventStreamTicket` mutation (an `EventSource` cannot send headers).
//!
//! Query parameters: `after`, `ticket`, `categories` (comma-separated, e.g. `llm,lifecycle`),
//! `agents` and `stages` (comma-separated IDs), `topology=true` (start with the agent tree).
//!
//! Like the GraphQL streams: refused from another site's page (403), counted against its
//! caller's rate, streams and subscriptions (429), and its credentials are looked up only
//! within its address's rate of look-ups.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Extension;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use serde_json::{Value, json};

use super::AppState;
use super::access::{OriginPolicy, rejected};
use super::serve::stopping;
use super::throttle::Refusal;
use crate::api::ids::{NodeType, decode_as};
use crate::auth::{Caller, Rejection};
use crate::error::Error;
use crate::live::NoSlot;
use crate::live::envelope::{Envelope, EventAction, EventCategory};
use crate::live::events::{self, EventFilter};
use crate::model::{Role, db_name, from_db_name};
use crate::observe::metrics::OpenStream;
use crate::store::session_events::ChangeKind;

/// How often an idle stream carries a comment, so proxies keep it open.
const HEARTBEAT: Duration = Duration::from_secs(15);

/// A refusal before the stream starts: a status and a GraphQL-shaped error body.
fn refuse(status: StatusCode, code: &str, message: &str) -> Response {
    let body = json!({ "errors": [{ "message": message, "extensions": { "code": code } }] });
    (status, axum::Json(body)).into_response()
}

fn bad_request(message: &str) -> Response {
    refuse(StatusCode::BAD_REQUEST, "BAD_USER_INPUT", message)
}

/// `GET /sessions/{id}/events`.
pub async fn stream(
    State(state): State<AppState>,
    Path(session): Path<String>,
    Query(params): Query<HashMap<String, String>>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    // A page on another site must not read live data with the browser's credentials.
    if !state.origins.allows(&headers, &uri) {
        return OriginPolicy::refused();
    }
    let Ok(session) = decode_as(NodeType::Session, &session) else {
        return bad_request("not a session ID");
    };
    let peer = peer.map(|Extension(ConnectInfo(peer))| peer);
    let client = peer.map(|peer| peer.ip());
    let identity = match params.get("ticket") {
        Some(ticket) => match state.auth.redeem_ticket(ticket, session, client).await {
            Ok(identity) => identity,
            Err(Rejection::Unauthenticated) => {
                return refuse(
                    StatusCode::UNAUTHORIZED,
                    "UNAUTHENTICATED",
                    "the stream ticket is unknown, expired, or for another session",
                );
            }
            Err(rejection) => return rejected(&rejection),
        },
        None => match state.auth.authenticate(&headers, client).await {
            Ok(identity) => identity,
            Err(rejection) => return rejected(&rejection),
        },
    };
    let caller = Caller::of(&identity, peer);
    if let Err(refusal) = state.throttle.check_rate(&caller) {
        return refusal.response();
    }
    if identity.role < Role::Reader {
        return refuse(
            StatusCode::FORBIDDEN,
            "FORBIDDEN",
            "reading needs the READER role",
        );
    }
    let after = match start_after(&params, &headers) {
        Ok(after) => after,
        Err(message) => return bad_request(&message),
    };
    let filter = match filter_of(&params) {
        Ok(filter) => filter,
        Err(message) => return bad_request(&message),
    };
    let share = match state.streams.take(&caller) {
        Ok(share) => share,
        Err(full) => return Refusal::from(full).response(),
    };
    let slot = match state.slots.take("events", &caller) {
        Ok(slot) => slot,
        Err(refused) => {
            // The caller's own share is its doing; the process's is not.
            let status = match refused {
                NoSlot::CallerFull(_) => StatusCode::TOO_MANY_REQUESTS,
                NoSlot::ProcessFull(_) => StatusCode::SERVICE_UNAVAILABLE,
            };
            let public = Error::from(refused).public();
            return refuse(status, public.code, &public.message);
        }
    };
    // The session is looked up once the caller holds its places: a caller at its caps costs
    // no statement.
    match state.store.membership(session, None, None).await {
        Ok(found) if found.session_exists => {}
        Ok(_) => {
            return refuse(
                StatusCode::NOT_FOUND,
                "NOT_FOUND",
                &format!("session {session} does not exist"),
            );
        }
        Err(err) => {
            let public = logged(&err);
            return refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                public.code,
                &public.message,
            );
        }
    }
    let topology = params
        .get("topology")
        .is_some_and(|v| v == "true" || v == "1");
    let envelopes = events::stream(
        state.store.clone(),
        state.hub.clone(),
        session,
        after,
        filter,
        topology,
    );
    let auth = state.auth.clone();
    let mut closing = state.closing.clone();
    let lifetime = state.live.stream_lifetime;
    let body = async_stream::stream! {
        let _open = (OpenStream::new("events"), share, slot);
        let lapsed = auth.until_lapsed(&identity);
        let ends = tokio::time::sleep(lifetime);
        futures::pin_mut!(envelopes, lapsed, ends);
        loop {
            tokio::select! {
                // The server stops, or the stream has lived its time: the client reconnects,
                // resuming from the last id it received.
                () = stopping(&mut closing) => break,
                () = &mut ends => break,
                () = &mut lapsed => {
                    yield Ok::<_, Infallible>(failure("UNAUTHENTICATED", "the credentials of this stream were revoked or expired"));
                    break;
                }
                next = envelopes.next() => match next {
                    Some(Ok(envelope)) => yield Ok(to_event(&envelope)),
                    Some(Err(err)) => {
                        let public = logged(&err);
                        yield Ok(failure(public.code, &public.message));
                        break;
                    }
                    None => break,
                },
            }
        }
    };
    let mut response = Sse::new(body)
        .keep_alive(KeepAlive::new().interval(HEARTBEAT))
        .into_response();
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// Where the stream starts: after `Last-Event-ID` (a reconnecting `EventSource`), else after
/// `?after=`, else at the start.
fn start_after(params: &HashMap<String, String>, headers: &HeaderMap) -> Result<i64, String> {
    let given = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| params.get("after").cloned());
    match given {
        None => Ok(0),
        Some(text) => match text.trim().parse::<i64>() {
            Ok(n) if n >= 0 => Ok(n),
            _ => Err(format!(
                "`after` (or `Last-Event-ID`) must be a sequence number (0 or more), got {text:?}"
            )),
        },
    }
}

fn filter_of(params: &HashMap<String, String>) -> Result<EventFilter, String> {
    let list = |name: &str| -> Vec<String> {
        params
            .get(name)
            .map(|v| {
                v.split(',')
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    };
    let ids = |name: &str, node| -> Result<_, String> {
        list(name)
            .iter()
            .map(|id| decode_as(node, id).map_err(|e| format!("`{name}`: {e}")))
            .collect()
    };
    Ok(EventFilter {
        categories: list("categories")
            .iter()
            .map(|c| {
                from_db_name::<EventCategory>(&c.to_lowercase())
                    .ok_or_else(|| format!("`categories`: {c:?} is not a category"))
            })
            .collect::<Result<_, _>>()?,
        executions: ids("agents", NodeType::AgentExecution)?,
        stages: ids("stages", NodeType::Stage)?,
    })
}

/// What the client is told of an error (logged when it is ours).
fn logged(err: &crate::error::Error) -> crate::error::Public {
    let public = err.public();
    if public.log == crate::error::Log::Error {
        tracing::error!("event stream failed: {err}");
    }
    public
}

/// An error that ends the stream: an `error` event with seed 004's error shape.
fn failure(code: &str, message: &str) -> Event {
    Event::default()
        .event("error")
        .data(json!({ "code": code, "message": message }).to_string())
}

fn to_event(envelope: &Envelope) -> Event {
    Event::default()
        .id(envelope.position.to_string())
        .data(seed_json(envelope).to_string())
}

/// Seed 004's `ExecutorEvent`: `run_id`, `timestamp`, `sequence`, `source`, `event` and `data`
/// (plus `first_sequence` when merged appends cover several positions).
pub fn seed_json(envelope: &Envelope) -> Value {
    let mut out = json!({
        "run_id": envelope.row.session_id,
        "timestamp": envelope.at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        "sequence": envelope.position,
        "source": envelope.source.as_ref().map(|s| json!({
            "agent_id": s.id,
            "agent_type": db_name(s.agent_type),
            "agent_name": s.agent_name,
            "team_name": s.team_name,
        })),
        "event": { "category": db_name(envelope.category), "action": db_name(envelope.action) },
        "data": data_json(envelope),
    });
    if envelope.first != envelope.position {
        out["first_sequence"] = json!(envelope.first);
    }
    out
}

fn data_json(envelope: &Envelope) -> Value {
    let row = &envelope.row;
    let metadata = || -> Value {
        envelope
            .event
            .as_ref()
            .and_then(|e| serde_json::from_str(e.metadata.get()).ok())
            .unwrap_or(Value::Null)
    };
    let content = || envelope.event_content();
    let event_id = envelope
        .event
        .as_ref()
        .map(|e| e.id)
        .unwrap_or(row.entity_id);
    match (envelope.category, envelope.action) {
        (EventCategory::System, EventAction::Topology) => json!({
            "hierarchy": envelope.agents.iter().map(|a| json!({
                "agent_id": a.id,
                "parent_id": a.parent_execution_id,
                "agent_type": db_name(a.agent_type),
                "agent_name": a.agent_name,
                "team_name": a.team_name,
                "depth": a.depth,
                "status": db_name(a.status),
            })).collect::<Vec<_>>(),
        }),
        (EventCategory::Lifecycle, _) if row.kind.is_session() => json!({
            "subject": "session",
            "status": row.status,
            "previous_status": row.previous_status,
        }),
        (EventCategory::Lifecycle, action) => {
            let execution = envelope.execution.as_ref();
            let mut data = json!({
                "subject": "agent",
                "status": row.status,
                "previous_status": row.previous_status,
            });
            if action == EventAction::Completed {
                data["summary"] = json!(execution.and_then(|e| e.result_summary.clone()));
            }
            if matches!(
                action,
                EventAction::Failed | EventAction::TimedOut | EventAction::Cancelled
            ) {
                data["error"] = json!(execution.and_then(|e| e.error_message.clone()));
            }
            data
        }
        (EventCategory::Stage, _) => json!({
            "stage_id": row.entity_id,
            "status": row.status,
            "previous_status": row.previous_status,
        }),
        (EventCategory::Dispatch, action) => {
            let execution = envelope.execution.as_ref();
            let name = if action == EventAction::Team {
                "team_name"
            } else {
                "worker_name"
            };
            let mut data = json!({
                "agent_id": execution.map(|e| e.id),
                "task": execution.and_then(|e| e.task.clone()),
                "team_name": execution.and_then(|e| e.team_name.clone()),
            });
            if action == EventAction::Worker {
                data[name] = json!(execution.map(|e| e.agent_name.clone()));
            }
            data
        }
        (EventCategory::Llm, EventAction::Stream | EventAction::Reasoning) => {
            let field = if envelope.action == EventAction::Reasoning {
                "thought"
            } else {
                "content"
            };
            json!({
                field: envelope.text,
                "event_id": event_id,
                "offset": envelope.offset,
            })
        }
        (EventCategory::Llm, EventAction::ToolCall) => {
            let metadata = metadata();
            json!({
                "tool": metadata.get("tool_name"),
                "args": metadata.get("arguments"),
                "call_id": metadata.get("tool_call_id"),
                "event_id": event_id,
            })
        }
        (EventCategory::Llm, _) => {
            let metadata = metadata();
            json!({
                "tool": metadata.get("tool_name"),
                "result": content(),
                "status": envelope.event.as_ref().map(|e| db_name(e.status)),
                "call_id": metadata.get("tool_call_id"),
                "event_id": event_id,
            })
        }
        (EventCategory::System, _) => json!({
            "message": content(),
            "code": metadata().get("code"),
            "event_id": event_id,
        }),
        (EventCategory::Timeline, _) => json!({
            "event_id": event_id,
            "event_type": envelope.event.as_ref().map(|e| db_name(e.event_type)),
            "status": envelope.event.as_ref().map(|e| db_name(e.status)),
            "content": content(),
        }),
        (EventCategory::Message, _) => json!({ "message_id": row.entity_id }),
        (EventCategory::Interaction, _) => json!({ "interaction_id": row.entity_id }),
        (EventCategory::Chat, _) if row.kind == ChangeKind::Chat => {
            json!({ "chat_id": row.entity_id })
        }
        (EventCategory::Chat, _) => json!({ "question_id": row.entity_id }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_comes_from_last_event_id_first() {
        let mut headers = HeaderMap::new();
        let mut params = HashMap::new();
        assert_eq!(start_after(&params, &headers), Ok(0));
        params.insert("after".to_owned(), "7".to_owned());
        assert_eq!(start_after(&params, &headers), Ok(7));
        headers.insert("last-event-id", HeaderValue::from_static("12"));
        assert_eq!(start_after(&params, &headers), Ok(12));
        headers.insert("last-event-id", HeaderValue::from_static("-1"));
        assert!(start_after(&params, &headers).is_err());
    }

    #[test]
    fn categories_are_checked() {
        let params = HashMap::from([("categories".to_owned(), "llm, LIFECYCLE".to_owned())]);
        let filter = filter_of(&params).unwrap();
        assert!(filter.categories.contains(&EventCategory::Llm));
        assert!(filter.categories.contains(&EventCategory::Lifecycle));
        let params = HashMap::from([("categories".to_owned(), "nope".to_owned())]);
        assert!(filter_of(&params).unwrap_err().contains("nope"));
    }
}
