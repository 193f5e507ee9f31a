//! LLM and MCP interactions: the debug record of each call, written once when it completes.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive as _;
use serde::{Serialize, Serializer};
use serde_json::Value as Json;
use sqlx::PgConnection;
use uuid::Uuid;

use super::locks::{Owners, Target};
use super::{
    check_amount, check_json, check_name, check_optional, check_time, fetch, id_taken, is_retry,
    limits, lock_running_execution, lock_session,
};
use crate::error::{Error, Result};
use crate::model::{CostSource, LlmInteractionType, McpInteractionType};
use crate::pricing::{Cost, PricingSnapshot, Usage};
use crate::store::prices::{PriceCache, interaction_time};
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
    /// The cost the client sent, kept as sent (none: computed from the price list).
    #[serde(rename = "estimated_cost_usd", serialize_with = "cost_as_float")]
    pub cost_usd: Option<Decimal>,
    pub duration_ms: Option<i64>,
    pub error_message: Option<String>,
    // Absent from the request's hash when not given, so a retry keeps the hash it had before
    // these existed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<i32>,
    /// When the call happened, for a call recorded late (none: now).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub called_at: Option<DateTime<Utc>>,
    /// The messages sent, in order, when they were not the conversation up to
    /// `last_message_id` (none: they were).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent_message_ids: Option<Vec<Uuid>>,
}

/// A request's hash was computed when a cost was a float: it is hashed as that float still, so
/// a retry of a request sent before costs were decimals is recognized as one.
fn cost_as_float<S: Serializer>(
    cost: &Option<Decimal>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    cost.and_then(|c| c.to_f64()).serialize(s)
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

/// A client's cost of one call, in US dollars: 0 to [`limits::COST_USD`].
pub(crate) fn check_cost(field: &str, cost: Decimal) -> Result<()> {
    check_amount(field, cost, limits::COST_USD, "")
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
            ("cachedInputTokens", self.cached_input_tokens.map(i64::from)),
            ("outputTokens", self.output_tokens.map(i64::from)),
            ("totalTokens", self.total_tokens.map(i64::from)),
            ("thinkingTokens", self.thinking_tokens.map(i64::from)),
            ("durationMs", self.duration_ms),
        ] {
            check_count(field, value)?;
        }
        // Parts of a count never exceed it: a provider that reports them apart (Anthropic's
        // cache reads, Gemini's thoughts) is added up by the client, so nothing is priced twice.
        match (self.cached_input_tokens, self.input_tokens) {
            (Some(cached), None) => {
                return Err(Error::bad_input(format!(
                    "`cachedInputTokens` ({cached}) are part of `inputTokens`, which is missing"
                )));
            }
            (Some(cached), Some(input)) if cached > input => {
                return Err(Error::bad_input(format!(
                    "`cachedInputTokens` ({cached}) are part of `inputTokens` ({input}) and \
                     cannot exceed them: add the cached tokens to the input tokens when the \
                     provider reports them apart"
                )));
            }
            _ => {}
        }
        if let (Some(thinking), Some(output)) = (self.thinking_tokens, self.output_tokens)
            && thinking > output
        {
            return Err(Error::bad_input(format!(
                "`thinkingTokens` ({thinking}) are part of `outputTokens` ({output}) and cannot \
                 exceed them: add the thinking tokens to the output tokens when the provider \
                 reports them apart"
            )));
        }
        if let Some(cost) = self.cost_usd {
            check_cost("totalCostUsd", cost)?;
        }
        if let Some(at) = self.called_at {
            check_time("calledAt", at)?;
        }
        Ok(())
    }

    /// Its token counts, as pricing reads them.
    pub(crate) fn usage(&self) -> Usage {
        Usage {
            input: self.input_tokens,
            cached_input: self.cached_input_tokens,
            output: self.output_tokens,
            thinking: self.thinking_tokens,
        }
    }
}

/// What is stored of an interaction's cost.
struct StoredCost {
    source: CostSource,
    total: Option<Decimal>,
    parts: Option<Cost>,
    snapshot: Option<PricingSnapshot>,
}

/// The cost of `new`: the client's, kept as sent; else computed from the price of its model
/// (and `provider`) in effect at its time; else none, saying why.
async fn cost_of(
    conn: &mut PgConnection,
    prices: &mut PriceCache,
    new: &NewLlmInteraction,
    provider: Option<&str>,
) -> Result<StoredCost> {
    let none = |source| StoredCost {
        source,
        total: None,
        parts: None,
        snapshot: None,
    };
    if let Some(total) = new.cost_usd {
        return Ok(StoredCost {
            total: Some(total),
            ..none(CostSource::Client)
        });
    }
    let usage = new.usage();
    if usage.is_unknown() {
        return Ok(none(CostSource::NoTokens));
    }
    let Some(price) = prices
        .in_effect(conn, &new.model_name, provider, new.called_at)
        .await?
    else {
        return Ok(none(CostSource::NoPrice));
    };
    let cost = price.cost(usage);
    Ok(StoredCost {
        source: CostSource::PriceList,
        total: Some(cost.total),
        parts: Some(cost),
        snapshot: Some(price),
    })
}

pub async fn record_llm(
    conn: &mut PgConnection,
    owners: &mut Owners,
    prices: &mut PriceCache,
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
    let sent = check_sent_messages(
        conn,
        conversation,
        new.last_message_id,
        new.sent_message_ids.as_deref(),
    )
    .await?;
    let cost = cost_of(conn, prices, new, execution.llm_provider.as_deref()).await?;
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
            estimated_cost_usd, duration_ms, error_message, cached_input_tokens, input_cost_usd, \
            output_cost_usd, cost_source, pricing_snapshot, sent_message_ids, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, \
                 $19, $20, $21, $22, $23, $24, {}) \
         RETURNING {}",
        interaction_time(25),
        LlmInteractionRow::COLUMNS
    ))
    .bind(id)
    .bind(execution.session_id)
    .bind(execution.stage_id)
    .bind(execution.id)
    .bind(new.interaction_type)
    .bind(&new.model_name)
    .bind(sent.last_message_id)
    .bind(&new.llm_request)
    .bind(&new.llm_response)
    .bind(&new.thinking_content)
    .bind(&new.response_metadata)
    .bind(new.input_tokens)
    .bind(new.output_tokens)
    .bind(total)
    .bind(new.thinking_tokens)
    .bind(cost.total)
    .bind(new.duration_ms)
    .bind(&new.error_message)
    .bind(new.cached_input_tokens)
    .bind(cost.parts.map(|c| c.input))
    .bind(cost.parts.map(|c| c.output))
    .bind(cost.source)
    .bind(cost.snapshot.map(sqlx::types::Json))
    .bind(sent.selection)
    .bind(new.called_at)
    .fetch_one(traced(conn))
    .await
    .map_err(|e| id_taken(e, id))
}

/// What an LLM call sent, as stored: its last message, and the messages in the order sent
/// when they are not the conversation up to it (`None`: they are, or nothing was recorded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SentMessages {
    pub last_message_id: Option<Uuid>,
    pub selection: Option<Vec<Uuid>>,
}

/// The checks of `sentMessageIds` that need no database: a bounded, non-empty list without
/// repeats that ends with `lastMessageId` when both are given.
fn check_sent(sent: &[Uuid], last_message_id: Option<Uuid>) -> Result<()> {
    if sent.is_empty() || sent.len() > limits::SENT_MESSAGES {
        return Err(Error::bad_input(format!(
            "`sentMessageIds` must name 1 to {} messages, got {}",
            limits::SENT_MESSAGES,
            sent.len()
        )));
    }
    let mut seen = std::collections::HashSet::with_capacity(sent.len());
    if let Some(twice) = sent.iter().find(|id| !seen.insert(**id)) {
        return Err(Error::bad_input(format!(
            "`sentMessageIds` names message {twice} twice"
        )));
    }
    let last = sent[sent.len() - 1];
    match last_message_id {
        Some(given) if given != last => Err(Error::bad_input(format!(
            "`lastMessageId` {given} is not the last of `sentMessageIds` ({last}): give it equal, \
             or leave it out"
        ))),
        _ => Ok(()),
    }
}

/// Checks what an LLM call says it sent against the execution's conversation (by key): the
/// last message, or every message of a selection, must be the execution's own. A selection that
/// is the conversation from its first message on, in order, is stored as the plain prefix it
/// is, so a conversation reads the same whichever way the client described it.
pub(crate) async fn check_sent_messages(
    conn: &mut PgConnection,
    conversation: Key,
    last_message_id: Option<Uuid>,
    sent: Option<&[Uuid]>,
) -> Result<SentMessages> {
    let execution_id = conversation.id;
    let Some(sent) = sent else {
        check_last_message(conn, conversation, last_message_id).await?;
        return Ok(SentMessages {
            last_message_id,
            selection: None,
        });
    };
    check_sent(sent, last_message_id)?;
    // Each id's sequence number in this conversation, in the order sent (null: not one of its
    // messages).
    let sequences: Vec<Option<i32>> = sqlx::query_scalar(
        "SELECT m.sequence_number FROM unnest($1::uuid[]) WITH ORDINALITY AS s(id, position) \
         LEFT JOIN messages m ON m.id = s.id AND m.session_id = $2 AND m.execution_id = $3 \
         ORDER BY s.position",
    )
    .bind(sent)
    .bind(conversation.session)
    .bind(execution_id)
    .fetch_all(traced(conn))
    .await?;
    if let Some((id, _)) = sent.iter().zip(&sequences).find(|(_, s)| s.is_none()) {
        return Err(Error::bad_input(format!(
            "`sentMessageIds`: {id} is not a message of agent execution {execution_id}"
        )));
    }
    let prefix = sequences
        .iter()
        .zip(1..)
        .all(|(sequence, expected)| *sequence == Some(expected));
    Ok(SentMessages {
        last_message_id: sent.last().copied(),
        selection: (!prefix).then(|| sent.to_vec()),
    })
}

/// Refuses a last message sent that is not a message of the execution's own conversation (the
/// execution, by key).
async fn check_last_message(
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
    let conversation = Key::new(session_id, execution.id);
    let attempt = next_attempt(conn, conversation, new.tool_call_id.as_deref()).await?;
    sqlx::query_as(&format!(
        "INSERT INTO mcp_interactions (id, session_id, stage_id, execution_id, interaction_type, \
            server_name, tool_name, tool_arguments, tool_result, available_tools, duration_ms, \
            error_message, tool_call_id, attempt) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING {}",
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
    .bind(attempt)
    .fetch_one(traced(conn))
    .await
    .map_err(|e| id_taken(e, id))
}

/// The attempt an interaction executing `call_id` in the execution's conversation (by key) is:
/// the next after those recorded, from 1; 1 when it executes no requested call. Attempts are
/// numbered by the server, in the order recorded: the session's lock (held by the caller)
/// keeps two recordings from taking one number, and a resent recording (the same client id)
/// is answered by its receipt before it gets here, so it adds no attempt. Refuses a call the
/// conversation did not request (the execution row is locked, so that holds until commit).
pub(crate) async fn next_attempt(
    conn: &mut PgConnection,
    conversation: Key,
    call_id: Option<&str>,
) -> Result<i32> {
    let Some(call_id) = call_id else {
        return Ok(1);
    };
    let (requested, last): (bool, Option<i32>) = sqlx::query_as(
        "SELECT EXISTS (SELECT FROM tool_calls \
                        WHERE execution_id = $1 AND call_id = $2 AND session_id = $3), \
           (SELECT max(attempt) FROM mcp_interactions \
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
    Ok(last.map_or(1, |n| n.saturating_add(1)))
}
