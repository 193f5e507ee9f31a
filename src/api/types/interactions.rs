use std::sync::Arc;

use crate::api::cost;
use async_graphql::{Context, ID, Object};
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive as _;
use uuid::Uuid;

use super::connection::{self, MessageConnection};
use super::prices::{Pricing, usd};
use super::{AgentExecution, Message, RequestedToolCall, Session, Stage, loaders, required};
use crate::api::ids::{self, NodeType};
use crate::api::pagination::PageArgs;
use crate::api::scalars::{SharedJson, SharedText, Text};
use crate::model::{CostSource, LlmInteractionType, McpInteractionType};
use crate::store::{
    CallKey, InSession as _, Key, LlmInteractionRow, LlmPayloadRow, LlmRequestRow,
    McpInteractionRow, McpPayloadRow,
};
use async_graphql::Result;

pub struct LlmInteraction(pub Arc<LlmInteractionRow>);

/// The full technical record of one LLM call (debug view). Immutable.
#[Object(name = "LLMInteraction")]
impl LlmInteraction {
    /// Global ID.
    pub async fn id(&self) -> ID {
        ids::encode(NodeType::LlmInteraction, self.0.id)
    }
    /// Database id (UUIDv7).
    async fn uuid(&self) -> Uuid {
        self.0.id
    }
    /// Why the model was called.
    async fn interaction_type(&self) -> LlmInteractionType {
        self.0.interaction_type
    }
    /// Model name, e.g. "gemini-2.5-pro".
    async fn model_name(&self) -> Text<'_> {
        Text(&self.0.model_name)
    }
    /// The request sent to the provider.
    async fn llm_request(&self, ctx: &Context<'_>) -> Result<SharedJson<LlmRequestRow>> {
        let request = loaders(ctx).llm_requests.load_one(self.0.key()).await?;
        let request = required(request, "an LLM interaction's request")?;
        Ok(SharedJson::new(request, |r| &r.llm_request))
    }
    /// The provider's response.
    async fn llm_response(&self, ctx: &Context<'_>) -> Result<SharedJson<LlmPayloadRow>> {
        Ok(SharedJson::new(self.payload(ctx).await?, |p| {
            &p.llm_response
        }))
    }
    /// The model's native thinking, when it exposes it.
    async fn thinking_content(
        &self,
        ctx: &Context<'_>,
    ) -> Result<Option<SharedText<LlmPayloadRow>>> {
        let payload = self.payload(ctx).await?;
        Ok(payload.thinking_content.is_some().then(|| {
            SharedText::new(payload, |p| {
                p.thinking_content.as_deref().unwrap_or_default()
            })
        }))
    }
    /// Grounding, tool usage and other provider metadata.
    async fn response_metadata(&self, ctx: &Context<'_>) -> Result<SharedJson<LlmPayloadRow>> {
        Ok(SharedJson::new(self.payload(ctx).await?, |p| {
            &p.response_metadata
        }))
    }
    /// Tokens sent, cached ones included.
    async fn input_tokens(&self) -> Option<i32> {
        self.0.input_tokens
    }
    /// Of the input tokens, those read from the provider's cache.
    async fn cached_input_tokens(&self) -> Option<i32> {
        self.0.cached_input_tokens
    }
    /// Tokens produced, thinking included.
    async fn output_tokens(&self) -> Option<i32> {
        self.0.output_tokens
    }
    /// Total tokens as reported by the provider.
    async fn total_tokens(&self) -> Option<i32> {
        self.0.total_tokens
    }
    /// Of the output tokens, those spent on thinking.
    async fn thinking_tokens(&self) -> Option<i32> {
        self.0.thinking_tokens
    }
    /// Where the cost comes from: computed from the price list, sent by the client, or none
    /// and why.
    async fn cost_source(&self) -> CostSource {
        self.0.cost_source()
    }
    /// The cost of the input tokens in US dollars, for a cost computed from the price list
    /// (null for any other: a client's cost cannot be split).
    async fn input_cost_usd(&self) -> Option<Decimal> {
        self.0.input_cost_usd.map(usd)
    }
    /// The cost of the output tokens (thinking included) in US dollars, for a computed cost.
    async fn output_cost_usd(&self) -> Option<Decimal> {
        self.0.output_cost_usd.map(usd)
    }
    /// The cost in US dollars, exact (to 10 decimal places): computed (`inputCostUsd` +
    /// `outputCostUsd`) or the client's; null without one (see `costSource`).
    async fn total_cost_usd(&self) -> Option<Decimal> {
        self.0.estimated_cost_usd.map(usd)
    }
    /// The price a computed cost used, as it was at the call's time.
    async fn pricing_snapshot(&self) -> Option<Pricing> {
        let snapshot = self.0.pricing_snapshot.as_ref()?;
        Some(Pricing(snapshot.0.clone()))
    }
    /// The cost in US dollars, as a float.
    #[graphql(deprecation = "Use `totalCostUsd`: the same cost, exact (a decimal string).")]
    async fn estimated_cost_usd(&self) -> Option<f64> {
        self.0.estimated_cost_usd.and_then(|c| c.to_f64())
    }
    /// How long the call took, in milliseconds.
    async fn duration_ms(&self) -> Option<i64> {
        self.0.duration_ms
    }
    /// Why the call failed (null when it succeeded).
    async fn error_message(&self) -> Option<Text<'_>> {
        self.0.error_message.as_deref().map(Text)
    }
    /// Whether the call succeeded (no error message).
    async fn success(&self) -> bool {
        self.0.error_message.is_none()
    }
    /// When it was recorded.
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    /// The last message sent to the model in this call.
    async fn last_message(&self, ctx: &Context<'_>) -> Result<Option<Message>> {
        let Some(id) = self.0.last_message_id else {
            return Ok(None);
        };
        let message = Key::new(self.0.session_id, id);
        Ok(loaders(ctx).messages.load_one(message).await?.map(Message))
    }
    /// Whether what was sent is not simply the execution's conversation up to `lastMessage`:
    /// the agent compressed part of its history (a summary message standing in for earlier
    /// ones) or discarded steps, and the call recorded the messages it sent (`sentMessageIds`).
    async fn history_edited(&self) -> bool {
        self.0.sent_message_ids.is_some()
    }
    /// Exactly the messages sent to the model, in the order sent, a page at a time: the
    /// execution's conversation up to and including `lastMessage` by sequence number, or, when
    /// `historyEdited`, the messages the call recorded as sent (empty when neither was
    /// recorded).
    #[graphql(complexity = "cost::page(first, last, child_complexity)")]
    async fn conversation_connection(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "The first this many messages after `after` (and before `before`); at most the server's maximum page size. Without `first` and `last`, the first 20. Give `first` or `last`, not both."
        )]
        first: Option<i32>,
        #[graphql(desc = "Only messages after this cursor.")] after: Option<String>,
        #[graphql(
            desc = "The last this many messages before `before` (and after `after`); at most the server's maximum page size. Give `first` or `last`, not both."
        )]
        last: Option<i32>,
        #[graphql(desc = "Only messages before this cursor.")] before: Option<String>,
    ) -> Result<MessageConnection> {
        let args = PageArgs {
            first,
            after,
            last,
            before,
        };
        connection::conversation(ctx, self.0.key(), args).await
    }
    /// The agent execution that made the call.
    async fn execution(&self, ctx: &Context<'_>) -> Result<AgentExecution> {
        let row = loaders(ctx)
            .executions
            .load_one(Key::new(self.0.session_id, self.0.execution_id))
            .await?;
        Ok(AgentExecution(required(row, "execution")?))
    }
    /// The stage it happened in.
    async fn stage(&self, ctx: &Context<'_>) -> Result<Stage> {
        let stage = Key::new(self.0.session_id, self.0.stage_id);
        let row = loaders(ctx).stages.load_one(stage).await?;
        Ok(Stage(required(row, "stage")?))
    }
    /// The session it belongs to.
    async fn session(&self, ctx: &Context<'_>) -> Result<Session> {
        let row = loaders(ctx).sessions.load_one(self.0.session_id).await?;
        Ok(Session(required(row, "session")?))
    }
}

pub struct McpInteraction(pub Arc<McpInteractionRow>);

/// The full technical record of one MCP tool call or tool listing (debug view). Immutable.
#[Object(name = "MCPInteraction")]
impl McpInteraction {
    /// Global ID.
    pub async fn id(&self) -> ID {
        ids::encode(NodeType::McpInteraction, self.0.id)
    }
    /// Database id (UUIDv7).
    async fn uuid(&self) -> Uuid {
        self.0.id
    }
    /// A tool call or a tool listing.
    async fn interaction_type(&self) -> McpInteractionType {
        self.0.interaction_type
    }
    /// MCP server, e.g. "kubernetes".
    async fn server_name(&self) -> Text<'_> {
        Text(&self.0.server_name)
    }
    /// Tool called (null for a listing).
    async fn tool_name(&self) -> Option<Text<'_>> {
        self.0.tool_name.as_deref().map(Text)
    }
    /// Arguments passed to the tool.
    async fn tool_arguments(&self, ctx: &Context<'_>) -> Result<SharedJson<McpPayloadRow>> {
        Ok(SharedJson::new(self.payload(ctx).await?, |p| {
            &p.tool_arguments
        }))
    }
    /// What the tool returned.
    async fn tool_result(&self, ctx: &Context<'_>) -> Result<SharedJson<McpPayloadRow>> {
        Ok(SharedJson::new(self.payload(ctx).await?, |p| {
            &p.tool_result
        }))
    }
    /// The tools the server offered (for a listing).
    async fn available_tools(&self, ctx: &Context<'_>) -> Result<SharedJson<McpPayloadRow>> {
        Ok(SharedJson::new(self.payload(ctx).await?, |p| {
            &p.available_tools
        }))
    }
    /// How long the call took, in milliseconds.
    async fn duration_ms(&self) -> Option<i64> {
        self.0.duration_ms
    }
    /// Why the call failed (null when it succeeded).
    async fn error_message(&self) -> Option<Text<'_>> {
        self.0.error_message.as_deref().map(Text)
    }
    /// Whether the call succeeded (no error message).
    async fn success(&self) -> bool {
        self.0.error_message.is_none()
    }
    /// When it was recorded.
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    /// For a `TOOL_CALL`: the id of the call the model requested that this interaction
    /// executed (null when it was recorded without one).
    async fn tool_call_id(&self) -> Option<Text<'_>> {
        self.0.tool_call_id.as_deref().map(Text)
    }
    /// Which attempt at its tool call this was, from 1, in the order the attempts were
    /// recorded (1 for an interaction that executes no requested call).
    async fn attempt(&self) -> i32 {
        self.0.attempt
    }
    /// The call the model requested that this interaction executed, with its answer and
    /// timeline events.
    async fn tool_call(&self, ctx: &Context<'_>) -> Result<Option<RequestedToolCall>> {
        let Some(call_id) = &self.0.tool_call_id else {
            return Ok(None);
        };
        let conversation = Key::new(self.0.session_id, self.0.execution_id);
        RequestedToolCall::find(ctx, conversation, call_id).await
    }
    /// The `ASSISTANT` message that requested the call this interaction executed.
    async fn requested_by(&self, ctx: &Context<'_>) -> Result<Option<Message>> {
        let Some(call_id) = &self.0.tool_call_id else {
            return Ok(None);
        };
        let key = CallKey {
            session_id: self.0.session_id,
            execution_id: self.0.execution_id,
            call_id: call_id.clone(),
        };
        let request = loaders(ctx).requests_by_call.load_one(key).await?;
        Ok(request.map(|(_, message)| Message(message)))
    }
    /// The agent execution that made the call.
    async fn execution(&self, ctx: &Context<'_>) -> Result<AgentExecution> {
        let row = loaders(ctx)
            .executions
            .load_one(Key::new(self.0.session_id, self.0.execution_id))
            .await?;
        Ok(AgentExecution(required(row, "execution")?))
    }
    /// The stage it happened in.
    async fn stage(&self, ctx: &Context<'_>) -> Result<Stage> {
        let stage = Key::new(self.0.session_id, self.0.stage_id);
        let row = loaders(ctx).stages.load_one(stage).await?;
        Ok(Stage(required(row, "stage")?))
    }
    /// The session it belongs to.
    async fn session(&self, ctx: &Context<'_>) -> Result<Session> {
        let row = loaders(ctx).sessions.load_one(self.0.session_id).await?;
        Ok(Session(required(row, "session")?))
    }
}

impl LlmInteraction {
    /// Its response, thinking and metadata, read (for all interactions of the level at once)
    /// only when asked for.
    async fn payload(&self, ctx: &Context<'_>) -> Result<Arc<LlmPayloadRow>> {
        let payload = loaders(ctx).llm_payloads.load_one(self.0.key()).await?;
        Ok(required(payload, "an LLM interaction's payload")?)
    }
}

impl McpInteraction {
    /// Its arguments, result and tools, read only when asked for.
    async fn payload(&self, ctx: &Context<'_>) -> Result<Arc<McpPayloadRow>> {
        let payload = loaders(ctx).mcp_payloads.load_one(self.0.key()).await?;
        Ok(required(payload, "an MCP interaction's payload")?)
    }
}
