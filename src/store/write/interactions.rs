//! LLM and MCP interactions: the debug record of each call, written once when it completes.

use serde::Serialize;
use serde_json::Value as Json;
use sqlx::PgConnection;
use uuid::Uuid;

use super::locks::{Owners, Target};
use super::{
    check_json, check_name, check_optional, fetch, id_taken, is_retry, limits,
    lock_running_execution, lock_session,
};
use crate::error::{Error, Result};
use crate::model::{LlmInteractionType, McpInteractionType};
use crate::store::traced::traced;
use crate::store::{Key, LlmInteractionRow, McpInteractionRow, Record as _};

#[derive(Debug, Clone, Serialize)]
pub struct NewLlmInteraction {
    pub id: Option<Uuid>,
    pub execution_id: Uuid,
    pub interaction_type: LlmInteractionType,
    pub model_name: String,
    pub last_message_id: Option<Uuid>,
    pub llm_request: Json,
    pub llm_response: Json,
    pub thinking_content: Option<String>,
    pub response_metadata: Json,
    pub input_tokens: Option<i32>,
    pub output_tokens: Option<i32>,
    pub total_tokens: Option<i32>,
    pub thinking_tokens: Option<i32>,
    pub estimated_cost_usd: Option<f64>,
    pub duration_ms: Option<i64>,
    pub error_message: Option<String>,
}

/// A count or a duration: absent, or 0 or more.
pub(crate) fn check_count(field: &str, value: Option<i64>) -> Result<()> {
    match value {
        Some(v) if v < 0 => Err(Error::bad_input(format!(
            "`{field}` must be 0 or more, got {v}"
        ))),
        _ => Ok(()),
    }
}

impl NewLlmInteraction {
    pub(crate) fn check(&self) -> Result<()> {
        check_name("modelName", &self.model_name)?;
        check_json("llmRequest", &self.llm_request, limits::JSON)?;
        check_json("llmResponse", &self.llm_response, limits::JSON)?;
        check_json(
            "responseMetadata",
            &self.response_metadata,
            limits::SMALL_JSON,
        )?;
        check_optional(
            "thinkingContent",
            self.thinking_content.as_deref(),
            limits::TEXT,
        )?;
        check_optional("errorMessage", self.error_message.as_deref(), limits::TEXT)?;
        for (field, value) in [
            ("inputTokens", self.input_tokens.map(i64::from)),
            ("outputTokens", self.output_tokens.map(i64::from)),
            ("totalTokens", self.total_tokens.map(i64::from)),
            ("thinkingTokens", self.thinking_tokens.map(i64::from)),
            ("durationMs", self.duration_ms),
        ] {
            check_count(field, value)?;
        }
        if let Some(cost) = self.estimated_cost_usd
            && !(0.0..=limits::COST_USD).contains(&cost)
        {
            return Err(Error::bad_input(format!(
                "`estimatedCostUsd` must be between 0 and {}, got {cost}",
                limits::COST_USD
            )));
        }
        Ok(())
    }
}

pub async fn record_llm(
    conn: &mut PgConnection,
    owners: &mut Owners,
    new: &NewLlmInteraction,
) -> Result<LlmInteractionRow> {
    new.check()?;
    let session_id = owners
        .session_of(conn, Target::Execution(new.execution_id))
        .await?;
    let id = new.id.unwrap_or_else(Uuid::now_v7);
    lock_session(conn, session_id).await?;
    if is_retry(
        conn,
        new.id,
        session_id,
        ("recordLlmInteraction", "llm_interactions"),
        new,
    )
    .await?
    {
        return fetch::<LlmInteractionRow>(conn, session_id, id).await;
    }
    let (_, execution) =
        lock_running_execution(conn, session_id, new.execution_id, "an LLM interaction").await?;
    let conversation = Key::new(session_id, execution.id);
    check_last_message(conn, conversation, new.last_message_id).await?;
    // Providers do not always report a total; it is the sum when both parts are known.
    let total = new.total_tokens.or_else(|| {
        new.input_tokens
            .zip(new.output_tokens)
            .map(|(i, o)| i.saturating_add(o))
    });
    sqlx::query_as(&format!(
        "INSERT INTO llm_interactions (id, session_id, stage_id, execution_id, interaction_type, \
            model_name, last_message_id, llm_request, llm_response, thinking_content, \
            response_metadata, input_tokens, output_tokens, total_tokens, thinking_tokens, \
            estimated_cost_usd, duration_ms, error_message) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18) \
         RETURNING {}",
        LlmInteractionRow::COLUMNS
    ))
    .bind(id)
    .bind(execution.session_id)
    .bind(execution.stage_id)
    .bind(execution.id)
    .bind(new.interaction_type)
    .bind(&new.model_name)
    .bind(new.last_message_id)
    .bind(&new.llm_request)
    .bind(&new.llm_response)
    .bind(&new.thinking_content)
    .bind(&new.response_metadata)
    .bind(new.input_tokens)
    .bind(new.output_tokens)
    .bind(total)
    .bind(new.thinking_tokens)
    .bind(new.estimated_cost_usd)
    .bind(new.duration_ms)
    .bind(&new.error_message)
    .fetch_one(traced(conn))
    .await
    .map_err(|e| id_taken(e, id))
}

/// Refuses a last message sent that is not a message of the execution's own conversation (the
/// execution, by key).
pub(crate) async fn check_last_message(
    conn: &mut PgConnection,
    conversation: Key,
    message_id: Option<Uuid>,
) -> Result<()> {
    let Some(message_id) = message_id else {
        return Ok(());
    };
    let execution_id = conversation.id;
    let owner: Option<Uuid> =
        sqlx::query_scalar("SELECT execution_id FROM messages WHERE id = $1 AND session_id = $2")
            .bind(message_id)
            .bind(conversation.session)
            .fetch_optional(traced(conn))
            .await?;
    if owner != Some(execution_id) {
        return Err(Error::bad_input(format!(
            "`lastMessageId` {message_id} is not a message of agent execution {execution_id}"
        )));
    }
    Ok(())
}

#[derive(Debug, Clone, Serialize)]
pub struct NewMcpInteraction {
    pub id: Option<Uuid>,
    pub execution_id: Uuid,
    pub interaction_type: McpInteractionType,
    pub server_name: String,
    pub tool_name: Option<String>,
    pub tool_arguments: Json,
    pub tool_result: Json,
    pub available_tools: Json,
    pub duration_ms: Option<i64>,
    pub error_message: Option<String>,
    /// Absent from the request's hash when not given, so a retry keeps the hash it had before
    /// calls were linked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl NewMcpInteraction {
    pub(crate) fn check(&self) -> Result<()> {
        check_name("serverName", &self.server_name)?;
        match (&self.interaction_type, &self.tool_name) {
            (McpInteractionType::ToolCall, None) => {
                return Err(Error::bad_input(
                    "a `TOOL_CALL` interaction needs `toolName`",
                ));
            }
            (_, Some(tool)) => check_name("toolName", tool)?,
            _ => {}
        }
        if let Some(call_id) = &self.tool_call_id {
            check_name("toolCallId", call_id)?;
            if self.interaction_type != McpInteractionType::ToolCall {
                return Err(Error::bad_input(
                    "only a `TOOL_CALL` interaction executes a `toolCallId`",
                ));
            }
        }
        check_json("toolArguments", &self.tool_arguments, limits::JSON)?;
        check_json("toolResult", &self.tool_result, limits::JSON)?;
        check_json("availableTools", &self.available_tools, limits::JSON)?;
        check_optional("errorMessage", self.error_message.as_deref(), limits::TEXT)?;
        check_count("durationMs", self.duration_ms)
    }
}

pub async fn record_mcp(
    conn: &mut PgConnection,
    owners: &mut Owners,
    new: &NewMcpInteraction,
) -> Result<McpInteractionRow> {
    new.check()?;
    let session_id = owners
        .session_of(conn, Target::Execution(new.execution_id))
        .await?;
    let id = new.id.unwrap_or_else(Uuid::now_v7);
    lock_session(conn, session_id).await?;
    if is_retry(
        conn,
        new.id,
        session_id,
        ("recordMcpInteraction", "mcp_interactions"),
        new,
    )
    .await?
    {
        return fetch::<McpInteractionRow>(conn, session_id, id).await;
    }
    let (_, execution) =
        lock_running_execution(conn, session_id, new.execution_id, "an MCP interaction").await?;
    if let Some(call_id) = &new.tool_call_id {
        check_executable(conn, Key::new(session_id, execution.id), call_id).await?;
    }
    sqlx::query_as(&format!(
        "INSERT INTO mcp_interactions (id, session_id, stage_id, execution_id, interaction_type, \
            server_name, tool_name, tool_arguments, tool_result, available_tools, duration_ms, \
            error_message, tool_call_id) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING {}",
        McpInteractionRow::COLUMNS
    ))
    .bind(id)
    .bind(execution.session_id)
    .bind(execution.stage_id)
    .bind(execution.id)
    .bind(new.interaction_type)
    .bind(&new.server_name)
    .bind(&new.tool_name)
    .bind(&new.tool_arguments)
    .bind(&new.tool_result)
    .bind(&new.available_tools)
    .bind(new.duration_ms)
    .bind(&new.error_message)
    .bind(&new.tool_call_id)
    .fetch_one(traced(conn))
    .await
    .map_err(|e| id_taken(e, id))
}

/// Refuses to record the execution of a call unless the execution's conversation (by key)
/// requested it (the execution row is locked, so that holds until commit) and nothing executed
/// it yet.
pub(crate) async fn check_executable(
    conn: &mut PgConnection,
    conversation: Key,
    call_id: &str,
) -> Result<()> {
    let (requested, executed_by): (bool, Option<Uuid>) = sqlx::query_as(
        "SELECT EXISTS (SELECT FROM tool_calls \
                        WHERE execution_id = $1 AND call_id = $2 AND session_id = $3), \
           (SELECT id FROM mcp_interactions \
             WHERE execution_id = $1 AND tool_call_id = $2 AND session_id = $3)",
    )
    .bind(conversation.id)
    .bind(call_id)
    .bind(conversation.session)
    .fetch_one(traced(conn))
    .await?;
    if !requested {
        return Err(Error::bad_input(format!(
            "no message of this agent's conversation requested tool call `{call_id}`: append \
             the `ASSISTANT` message whose `toolCalls` request it first"
        )));
    }
    if let Some(other) = executed_by {
        return Err(Error::bad_input(format!(
            "tool call `{call_id}` is already executed, by MCP interaction {other}"
        )));
    }
    Ok(())
}
