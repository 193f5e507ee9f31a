//! Messages: an execution's LLM conversation, appended one at a time, never changed.

use serde::Serialize;
use serde_json::Value as Json;
use sqlx::PgConnection;
use uuid::Uuid;

use std::collections::HashSet;

use super::locks::{Owners, Target};
use super::{
    check_json, check_name, check_optional, check_text, fetch, id_taken, is_retry, limits,
    lock_running_execution, lock_session,
};
use crate::error::{Error, Result};
use crate::model::MessageRole;
use crate::store::traced::traced;
use crate::store::{Key, MessageRow, RequestedCall, requested_calls};

#[derive(Debug, Clone, Serialize)]
pub struct NewMessage {
    pub id: Option<Uuid>,
    pub execution_id: Uuid,
    pub role: MessageRole,
    pub content: String,
    pub tool_call_id: Option<String>,
    pub tool_name: Option<String>,
    pub tool_calls: Option<Json>,
}

impl NewMessage {
    /// Checks the message; returns the tool calls it requests.
    pub(crate) fn check(&self) -> Result<Vec<RequestedCall>> {
        check_text("content", &self.content, limits::TEXT)?;
        check_optional("toolCallId", self.tool_call_id.as_deref(), limits::NAME)?;
        check_optional("toolName", self.tool_name.as_deref(), limits::NAME)?;
        let requested = match &self.tool_calls {
            Some(calls) => {
                check_json("toolCalls", calls, limits::JSON)?;
                check_requested_calls(calls)?
            }
            None => Vec::new(),
        };
        let has_tool_fields = self.tool_call_id.is_some() || self.tool_name.is_some();
        match self.role {
            MessageRole::Tool if self.tool_call_id.is_none() => {
                return Err(Error::bad_input(
                    "a `TOOL` message needs the `toolCallId` it answers",
                ));
            }
            MessageRole::Tool => {}
            _ if has_tool_fields => {
                return Err(Error::bad_input(
                    "only a `TOOL` message has `toolCallId` and `toolName`",
                ));
            }
            _ => {}
        }
        if self.tool_calls.is_some() && self.role != MessageRole::Assistant {
            return Err(Error::bad_input(
                "only an `ASSISTANT` message requests `toolCalls`",
            ));
        }
        Ok(requested)
    }
}

pub async fn append(
    conn: &mut PgConnection,
    owners: &mut Owners,
    new: &NewMessage,
) -> Result<MessageRow> {
    let requested = new.check()?;
    let session_id = owners
        .session_of(conn, Target::Execution(new.execution_id))
        .await?;
    let id = new.id.unwrap_or_else(Uuid::now_v7);
    lock_session(conn, session_id).await?;
    if is_retry(conn, new.id, session_id, ("appendMessage", "messages"), new).await? {
        return fetch::<MessageRow>(conn, session_id, id).await;
    }
    let (_, execution) =
        lock_running_execution(conn, session_id, new.execution_id, "a message").await?;
    // The execution row is locked, so its messages are numbered one at a time without gaps,
    // and the calls it requests and answers are checked against a conversation that holds
    // still.
    let conversation = Key::new(session_id, execution.id);
    check_calls(conn, conversation, new.tool_call_id.as_deref(), &requested).await?;
    let message: MessageRow = sqlx::query_as(
        "INSERT INTO messages (id, session_id, stage_id, execution_id, sequence_number, role, \
            content, tool_call_id, tool_name, tool_calls) \
         VALUES ($1, $2, $3, $4, \
            (SELECT coalesce(max(sequence_number), 0) + 1 FROM messages \
             WHERE execution_id = $4 AND session_id = $2), \
            $5, $6, $7, $8, $9) RETURNING *",
    )
    .bind(id)
    .bind(execution.session_id)
    .bind(execution.stage_id)
    .bind(execution.id)
    .bind(new.role)
    .bind(&new.content)
    .bind(&new.tool_call_id)
    .bind(&new.tool_name)
    .bind(&new.tool_calls)
    .fetch_one(traced(&mut *conn))
    .await
    .map_err(|e| id_taken(e, id))?;
    insert_calls(conn, &message, &requested).await?;
    Ok(message)
}

/// Refuses a message that answers a call its conversation (an execution, by key) did not
/// request or already answered, or that requests a call the conversation already requested.
pub(crate) async fn check_calls(
    conn: &mut PgConnection,
    conversation: Key,
    answers: Option<&str>,
    requested: &[RequestedCall],
) -> Result<()> {
    if let Some(call_id) = answers {
        check_answerable(conn, conversation, call_id).await?;
    }
    check_new_calls(conn, conversation, requested).await
}

/// Links the calls a message requests to it; returns how many there were.
pub(crate) async fn insert_calls(
    conn: &mut PgConnection,
    message: &MessageRow,
    requested: &[RequestedCall],
) -> Result<u64> {
    if requested.is_empty() {
        return Ok(0);
    }
    let (calls, positions): (Vec<&str>, Vec<i32>) = requested
        .iter()
        .map(|c| (c.call_id.as_str(), c.position))
        .unzip();
    let inserted = sqlx::query(
        "INSERT INTO tool_calls (execution_id, call_id, session_id, message_id, position) \
         SELECT $1, call_id, $2, $3, position FROM unnest($4::text[], $5::int[]) \
           AS c (call_id, position)",
    )
    .bind(message.execution_id)
    .bind(message.session_id)
    .bind(message.id)
    .bind(&calls)
    .bind(&positions)
    .execute(traced(conn))
    .await?;
    Ok(inserted.rows_affected())
}

/// The calls `tool_calls` requests; refused unless every element is a call (see
/// [`requested_calls`]) with an id and a name that fit, and no id repeats.
fn check_requested_calls(tool_calls: &Json) -> Result<Vec<RequestedCall>> {
    let Some(elements) = tool_calls.as_array() else {
        return Err(Error::bad_input(
            "`toolCalls` must be a list of tool calls, each with an `id` and a `name` (or `function.name`)",
        ));
    };
    let calls = requested_calls(tool_calls);
    if let Some(bad) =
        (0..elements.len()).find(|&i| calls.get(i).is_none_or(|c| c.position as usize != i))
    {
        return Err(Error::bad_input(format!(
            "`toolCalls[{bad}]` is not a tool call: it needs a string `id` and a string `name` (or `function.name`)"
        )));
    }
    let mut seen = HashSet::new();
    for call in &calls {
        let at = call.position;
        check_name(&format!("toolCalls[{at}].id"), &call.call_id)?;
        check_name(&format!("toolCalls[{at}].name"), &call.tool_name)?;
        if !seen.insert(call.call_id.as_str()) {
            return Err(Error::bad_input(format!(
                "`toolCalls` requests `{}` twice: a call id names one call",
                call.call_id
            )));
        }
    }
    Ok(calls)
}

/// Refuses call ids the conversation already requested: each answer and execution must name
/// one call.
async fn check_new_calls(
    conn: &mut PgConnection,
    conversation: Key,
    requested: &[RequestedCall],
) -> Result<()> {
    if requested.is_empty() {
        return Ok(());
    }
    let ids: Vec<&str> = requested.iter().map(|c| c.call_id.as_str()).collect();
    let taken: Option<(String, i32)> = sqlx::query_as(
        "SELECT t.call_id, m.sequence_number FROM tool_calls t \
         JOIN messages m ON m.id = t.message_id AND m.session_id = t.session_id \
         WHERE t.execution_id = $1 AND t.session_id = $3 AND t.call_id = ANY($2) LIMIT 1",
    )
    .bind(conversation.id)
    .bind(&ids)
    .bind(conversation.session)
    .fetch_optional(traced(conn))
    .await?;
    match taken {
        Some((call_id, seq)) => Err(Error::bad_input(format!(
            "tool call `{call_id}` was already requested, by message {seq} of this conversation; \
             a call id names one call"
        ))),
        None => Ok(()),
    }
}

/// Refuses a `TOOL` message unless an earlier message of its conversation requested the call
/// it answers, and nothing answered it yet.
async fn check_answerable(conn: &mut PgConnection, conversation: Key, call_id: &str) -> Result<()> {
    let (requested, answered_by): (bool, Option<i32>) = sqlx::query_as(
        "SELECT EXISTS (SELECT FROM tool_calls \
                        WHERE execution_id = $1 AND call_id = $2 AND session_id = $3), \
           (SELECT min(sequence_number) FROM messages \
             WHERE execution_id = $1 AND tool_call_id = $2 AND session_id = $3)",
    )
    .bind(conversation.id)
    .bind(call_id)
    .bind(conversation.session)
    .fetch_one(traced(conn))
    .await?;
    if !requested {
        return Err(Error::bad_input(format!(
            "no message of this conversation requested tool call `{call_id}`: a `TOOL` message \
             answers a call in an earlier `ASSISTANT` message's `toolCalls`"
        )));
    }
    if let Some(seq) = answered_by {
        return Err(Error::bad_input(format!(
            "tool call `{call_id}` is already answered, by message {seq} of this conversation"
        )));
    }
    Ok(())
}
