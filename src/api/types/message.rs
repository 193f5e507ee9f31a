use std::sync::Arc;

use async_graphql::{Context, ID, Object};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{AgentExecution, RequestedToolCall, loaders, required};
use crate::api::ids::{self, NodeType};
use crate::api::scalars::{JsonRef, Text};
use crate::model::MessageRole;
use crate::store::{Key, MessageRow};
use async_graphql::Result;

pub struct Message(pub Arc<MessageRow>);

/// One message of an agent's LLM conversation. Stored once and never changed.
#[Object]
impl Message {
    /// Global ID.
    pub async fn id(&self) -> ID {
        ids::encode(NodeType::Message, self.0.id)
    }
    /// Database id (UUIDv7).
    async fn uuid(&self) -> Uuid {
        self.0.id
    }
    /// Position in the execution's conversation: 1, 2, 3, …
    async fn sequence_number(&self) -> i32 {
        self.0.sequence_number
    }
    /// Who speaks.
    async fn role(&self) -> MessageRole {
        self.0.role
    }
    /// Message text.
    async fn content(&self) -> Text<'_> {
        Text(&self.0.content)
    }
    /// For a `TOOL` message: the id of the tool call it answers.
    async fn tool_call_id(&self) -> Option<Text<'_>> {
        self.0.tool_call_id.as_deref().map(Text)
    }
    /// For a `TOOL` message: the tool that produced it.
    async fn tool_name(&self) -> Option<Text<'_>> {
        self.0.tool_name.as_deref().map(Text)
    }
    /// For an `ASSISTANT` message: the tool calls it requested, as sent.
    #[graphql(
        deprecation = "Use `requestedToolCalls`: each call parsed, and linked to its answer, its MCP interaction and its timeline events."
    )]
    async fn tool_calls(&self) -> Option<JsonRef<'_>> {
        self.0.tool_calls.as_ref().map(JsonRef)
    }
    /// For an `ASSISTANT` message: the tool calls it requested, in order, each linked by its
    /// id to the `TOOL` message answering it, the MCP interaction executing it and the
    /// timeline events showing it (empty for other messages).
    async fn requested_tool_calls(&self) -> Vec<RequestedToolCall> {
        RequestedToolCall::of(&self.0)
    }
    /// For a `TOOL` message: the call it answers, as requested by an earlier `ASSISTANT`
    /// message (null for other messages, and for a tool message stored before calls were
    /// checked whose call was never requested).
    async fn answers(&self, ctx: &Context<'_>) -> Result<Option<RequestedToolCall>> {
        let Some(call_id) = &self.0.tool_call_id else {
            return Ok(None);
        };
        let conversation = Key::new(self.0.session_id, self.0.execution_id);
        RequestedToolCall::find(ctx, conversation, call_id).await
    }
    /// When it was stored.
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    /// The agent execution whose conversation this is.
    async fn execution(&self, ctx: &Context<'_>) -> Result<AgentExecution> {
        let row = loaders(ctx)
            .executions
            .load_one(Key::new(self.0.session_id, self.0.execution_id))
            .await?;
        Ok(AgentExecution(required(row, "execution")?))
    }
}
