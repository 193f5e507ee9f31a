//! A tool call the model requested, joined by its id to everything that followed it.

use std::sync::Arc;

use super::{McpInteraction, Message, TimelineEvent, loaders};
use crate::api::scalars::Text;
use crate::store::{CallKey, Key, McpInteractionRow, MessageRow, RequestedCall, requested_calls};
use async_graphql::{Context, Json, Object, Result};
use serde_json::Value;

/// One call of an assistant message's `toolCalls`.
pub struct RequestedToolCall {
    message: Arc<MessageRow>,
    call: RequestedCall,
}

impl RequestedToolCall {
    /// The calls `message` requested, in order (none unless it is an `ASSISTANT` message).
    pub(super) fn of(message: &Arc<MessageRow>) -> Vec<Self> {
        let Some(raw) = &message.tool_calls else {
            return Vec::new();
        };
        let calls = serde_json::from_str(raw.get())
            .map_or_else(|_| Vec::new(), |json| requested_calls(&json));
        calls
            .into_iter()
            .map(|call| Self {
                message: message.clone(),
                call,
            })
            .collect()
    }

    /// The call with id `call_id` in the conversation of an execution (by key), if one was
    /// requested.
    pub(super) async fn find(
        ctx: &Context<'_>,
        conversation: Key,
        call_id: &str,
    ) -> Result<Option<Self>> {
        let key = CallKey {
            session_id: conversation.session,
            execution_id: conversation.id,
            call_id: call_id.to_owned(),
        };
        let Some((position, message)) = loaders(ctx).requests_by_call.load_one(key).await? else {
            return Ok(None);
        };
        Ok(Self::of(&message)
            .into_iter()
            .find(|c| c.call.position == position))
    }

    /// The MCP interactions that executed it, one per attempt, in order.
    async fn executions(&self, ctx: &Context<'_>) -> Result<Vec<Arc<McpInteractionRow>>> {
        let attempts = loaders(ctx)
            .mcp_interactions_by_call
            .load_one(self.key())
            .await?;
        Ok(attempts.unwrap_or_default())
    }

    fn key(&self) -> CallKey {
        CallKey {
            session_id: self.message.session_id,
            execution_id: self.message.execution_id,
            call_id: self.call.call_id.clone(),
        }
    }
}

/// A tool call the model requested in an assistant message, linked by its id to the `TOOL`
/// message answering it, the MCP interactions executing it (one per attempt) and the timeline
/// events showing it.
#[Object]
impl RequestedToolCall {
    /// The id the model gave the call, which its answer and execution name.
    async fn call_id(&self) -> Text<'_> {
        Text(&self.call.call_id)
    }
    /// The tool (function) the model asked for, as it named it.
    async fn tool_name(&self) -> Text<'_> {
        Text(&self.call.tool_name)
    }
    /// The arguments (parsed when the model sent them as a JSON string; null when it sent
    /// none).
    async fn arguments(&self) -> Json<Value> {
        Json(self.call.arguments.clone())
    }
    /// Its place among the message's calls, from 0.
    async fn position(&self) -> i32 {
        self.call.position
    }
    /// The `ASSISTANT` message that requested it.
    async fn requested_by(&self) -> Message {
        Message(self.message.clone())
    }
    /// The `TOOL` message that answered it, whose content is the result the model saw (null
    /// until it is answered).
    async fn result_message(&self, ctx: &Context<'_>) -> Result<Option<Message>> {
        let answer = loaders(ctx).answers_by_call.load_one(self.key()).await?;
        Ok(answer.map(Message))
    }
    /// The MCP interaction that executed it, its last attempt: arguments, result, duration
    /// and error (null when none was recorded with this call id).
    async fn mcp_interaction(&self, ctx: &Context<'_>) -> Result<Option<McpInteraction>> {
        Ok(self.executions(ctx).await?.pop().map(McpInteraction))
    }
    /// Every MCP interaction that executed it, one per attempt, first to last (a retried call
    /// has more than one, each with its own result).
    async fn attempts(&self, ctx: &Context<'_>) -> Result<Vec<McpInteraction>> {
        let attempts = self.executions(ctx).await?;
        Ok(attempts.into_iter().map(McpInteraction).collect())
    }
    /// The `LLM_TOOL_CALL` timeline event showing the request (the first whose metadata's
    /// `tool_call_id` is this call's id).
    async fn request_event(&self, ctx: &Context<'_>) -> Result<Option<TimelineEvent>> {
        let events = loaders(ctx).events_by_call.load_one(self.key()).await?;
        Ok(events.and_then(|e| e.request).map(TimelineEvent))
    }
    /// The `MCP_TOOL_CALL` timeline event showing the execution (the first likewise).
    async fn execution_event(&self, ctx: &Context<'_>) -> Result<Option<TimelineEvent>> {
        let events = loaders(ctx).events_by_call.load_one(self.key()).await?;
        Ok(events.and_then(|e| e.execution).map(TimelineEvent))
    }
}
