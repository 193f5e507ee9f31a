//! Messages: an execution's LLM conversation, appended one at a time, never changed.

use serde::Serialize;
use serde_json::Value as Json;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{
    check_json, check_optional, check_text, fetch, id_taken, is_retry, limits,
    lock_running_execution, lock_session,
};
use crate::error::{Error, Result};
use crate::model::MessageRole;
use crate::store::MessageRow;
use crate::store::traced::traced;

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

pub async fn append(conn: &mut PgConnection, new: &NewMessage) -> Result<MessageRow> {
    check_text("content", &new.content, limits::TEXT)?;
    check_optional("toolCallId", new.tool_call_id.as_deref(), limits::NAME)?;
    check_optional("toolName", new.tool_name.as_deref(), limits::NAME)?;
    if let Some(calls) = &new.tool_calls {
        check_json("toolCalls", calls, limits::JSON)?;
    }
    let has_tool_fields = new.tool_call_id.is_some() || new.tool_name.is_some();
    match new.role {
        MessageRole::Tool if new.tool_call_id.is_none() => {
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
    if new.tool_calls.is_some() && new.role != MessageRole::Assistant {
        return Err(Error::bad_input(
            "only an `ASSISTANT` message requests `toolCalls`",
        ));
    }
    let session_id = super::session_of_execution(conn, new.execution_id).await?;
    let id = new.id.unwrap_or_else(Uuid::now_v7);
    lock_session(conn, session_id).await?;
    if is_retry(conn, new.id, session_id, "appendMessage", new).await? {
        return fetch::<MessageRow>(conn, id).await;
    }
    let (_, execution) = lock_running_execution(conn, new.execution_id, "a message").await?;
    // The execution row is locked, so its messages are numbered one at a time without gaps.
    sqlx::query_as(
        "INSERT INTO messages (id, session_id, stage_id, execution_id, sequence_number, role, \
            content, tool_call_id, tool_name, tool_calls) \
         VALUES ($1, $2, $3, $4, \
            (SELECT coalesce(max(sequence_number), 0) + 1 FROM messages WHERE execution_id = $4), \
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
    .fetch_one(traced(conn))
    .await
    .map_err(|e| id_taken(e, id))
}
