use std::sync::Arc;

use async_graphql::connection::PageInfo;
use async_graphql::{Context, ID, Object, SimpleObject};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{AgentExecution, loaders, required};
use crate::api::ids::{self, NodeType};
use crate::api::pagination::{PageArgs, page_info};
use crate::api::scalars::{JsonRef, Text};
use crate::config::Limits;
use crate::cursor::{decode_message_cursor, message_cursor};
use crate::model::MessageRole;
use crate::store::{CountedPage, MessagePageKey, MessageRow, Scope};
use async_graphql::Result;

/// A page of messages: each agent's conversation whole, by sequence number (agents in the
/// order of their ids: creation order, for the ids casefile makes).
#[derive(SimpleObject)]
pub struct MessageConnection {
    /// The messages of this page, each with its cursor.
    edges: Vec<MessageEdge>,
    /// Where this page is: whether messages lie before and after it, and the cursors to page
    /// on from either end.
    page_info: PageInfo,
    /// How many messages the list holds in all.
    total_count: i64,
}

/// A message and its cursor.
#[derive(SimpleObject)]
pub struct MessageEdge {
    /// Pass as `after` or `before` to page on after or before this message.
    cursor: String,
    /// The message.
    node: Message,
}

/// One page of the messages of `parent` (a stage or an execution).
pub(crate) async fn message_page(
    ctx: &Context<'_>,
    scope: Scope,
    parent: Uuid,
    args: PageArgs,
) -> Result<MessageConnection> {
    let slice = args.slice(ctx.data_unchecked::<Limits>(), decode_message_cursor)?;
    let CountedPage { page, total } = loaders(ctx)
        .message_pages
        .get(scope)
        .load_one(MessagePageKey { parent, slice })
        .await?
        .unwrap_or_default();
    let edges: Vec<MessageEdge> = page
        .rows
        .into_iter()
        .map(|row| MessageEdge {
            cursor: message_cursor((row.execution_id, i64::from(row.sequence_number))),
            node: Message(row),
        })
        .collect();
    let page_info = page_info(
        edges.first().map(|e| &e.cursor),
        edges.last().map(|e| &e.cursor),
        page.has_previous,
        page.has_next,
    );
    Ok(MessageConnection {
        edges,
        page_info,
        total_count: total,
    })
}

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
    /// For an `ASSISTANT` message: the tool calls it requested.
    async fn tool_calls(&self) -> Option<JsonRef<'_>> {
        self.0.tool_calls.as_ref().map(JsonRef)
    }
    /// When it was stored.
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    /// The agent execution whose conversation this is.
    async fn execution(&self, ctx: &Context<'_>) -> Result<AgentExecution> {
        let row = loaders(ctx)
            .executions
            .load_one(self.0.execution_id)
            .await?;
        Ok(AgentExecution(required(row, "execution")?))
    }
}
