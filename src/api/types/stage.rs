use std::sync::Arc;

use crate::api::cost;
use crate::api::scalars::Text;
use async_graphql::{Context, ID, Object};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::connection::{
    self, LlmInteractionConnection, McpInteractionConnection, MessageConnection,
};
use super::timeline::{TimelineConnection, TimelineFilterInput, timeline_page};
use super::{AgentExecution, Chat, ChatUserMessage, Session, TokenUsage};
use super::{loaders, required};
use crate::api::ids::{self, NodeType};
use crate::api::pagination::PageArgs;
use crate::model::{ParallelType, StageStatus, SuccessPolicy};
use crate::store::{Scope, StageRow};
use async_graphql::Result;

pub struct Stage(pub Arc<StageRow>);

/// A stage of the chain: runs one agent, or several in parallel, and aggregates their status.
#[Object]
impl Stage {
    /// Global ID.
    pub async fn id(&self) -> ID {
        ids::encode(NodeType::Stage, self.0.id)
    }
    /// Database id (UUIDv7).
    async fn uuid(&self) -> Uuid {
        self.0.id
    }
    /// Stage name, e.g. "Initial Analysis".
    async fn name(&self) -> Text<'_> {
        Text(&self.0.stage_name)
    }
    /// Position in the chain: 0, 1, 2, …
    async fn stage_index(&self) -> i32 {
        self.0.stage_index
    }
    /// How many agents the stage runs.
    async fn expected_agent_count(&self) -> i32 {
        self.0.expected_agent_count
    }
    /// How parallel agents relate (null for a single agent).
    async fn parallel_type(&self) -> Option<ParallelType> {
        self.0.parallel_type
    }
    /// When the stage succeeds (null for a single agent, which decides alone).
    async fn success_policy(&self) -> Option<SuccessPolicy> {
        self.0.success_policy
    }
    /// Aggregated from its executions.
    async fn status(&self) -> StageStatus {
        self.0.status
    }
    /// When its first agent started.
    async fn started_at(&self) -> Option<DateTime<Utc>> {
        self.0.started_at
    }
    /// When it reached a final status.
    async fn completed_at(&self) -> Option<DateTime<Utc>> {
        self.0.completed_at
    }
    /// Milliseconds from start to completion.
    async fn duration_ms(&self) -> Option<i64> {
        self.0.duration_ms
    }
    /// Why it did not complete (names the agents that did not succeed).
    async fn error_message(&self) -> Option<Text<'_>> {
        self.0.error_message.as_deref().map(Text)
    }
    /// When it was created.
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    /// When it last changed.
    async fn updated_at(&self) -> DateTime<Utc> {
        self.0.updated_at
    }
    /// The session it belongs to.
    async fn session(&self, ctx: &Context<'_>) -> Result<Session> {
        let row = loaders(ctx).sessions.load_one(self.0.session_id).await?;
        Ok(Session(required(row, "session")?))
    }
    /// Its agent executions, by agent index.
    #[graphql(complexity = "cost::list(cost::rows::EXECUTIONS_PER_STAGE, child_complexity)")]
    async fn executions(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            default = true,
            desc = "Include sub-agents spawned by an orchestrator agent (false: top-level agents only)."
        )]
        include_sub_agents: bool,
    ) -> Result<Vec<AgentExecution>> {
        let rows = loaders(ctx).executions_by_stage.load_one(self.0.id).await?;
        Ok(rows
            .unwrap_or_default()
            .into_iter()
            .filter(|r| include_sub_agents || r.parent_execution_id.is_none())
            .map(AgentExecution)
            .collect())
    }
    /// The timeline of all its agents, by sequence number, a page at a time: forward with
    /// `first`/`after`, backward with `last`/`before`. Edges are always in sequence order.
    #[graphql(complexity = "cost::page(first, last, child_complexity)")]
    async fn timeline(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "The first this many events after `after` (and before `before`); at most the server's maximum page size. Without `first` and `last`, the first 20. Give `first` or `last`, not both."
        )]
        first: Option<i32>,
        #[graphql(
            desc = "Only events after this cursor (an event's cursor from any timeline of the session)."
        )]
        after: Option<String>,
        #[graphql(
            desc = "The last this many events before `before` (and after `after`): to page backward, the page just before `before`, or without it the latest events; at most the server's maximum page size. Give `first` or `last`, not both."
        )]
        last: Option<i32>,
        #[graphql(
            desc = "Only events before this cursor (an event's cursor from any timeline of the session)."
        )]
        before: Option<String>,
        #[graphql(desc = "Only events of these types and states.")] filter: Option<
            TimelineFilterInput,
        >,
    ) -> Result<TimelineConnection> {
        let args = PageArgs {
            first,
            after,
            last,
            before,
        };
        timeline_page(
            ctx,
            Scope::Stage,
            self.0.id,
            self.0.session_id,
            args,
            filter,
        )
        .await
    }
    /// The LLM conversations of its agents (the seed's "messages by stage"), a page at a time:
    /// each agent's conversation whole, by sequence number, agents in the order of their ids
    /// (creation order, for the ids casefile makes).
    #[graphql(complexity = "cost::page(first, last, child_complexity)")]
    async fn messages_connection(
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
        connection::messages(ctx, Scope::Stage, self.0.id, args).await
    }
    /// LLM calls of its agents, chronologically, a page at a time.
    #[graphql(complexity = "cost::page(first, last, child_complexity)")]
    async fn llm_interactions_connection(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "The first this many LLM interactions after `after` (and before `before`); at most the server's maximum page size. Without `first` and `last`, the first 20. Give `first` or `last`, not both."
        )]
        first: Option<i32>,
        #[graphql(desc = "Only LLM interactions after this cursor.")] after: Option<String>,
        #[graphql(
            desc = "The last this many LLM interactions before `before` (and after `after`); at most the server's maximum page size. Give `first` or `last`, not both."
        )]
        last: Option<i32>,
        #[graphql(desc = "Only LLM interactions before this cursor.")] before: Option<String>,
    ) -> Result<LlmInteractionConnection> {
        let args = PageArgs {
            first,
            after,
            last,
            before,
        };
        connection::llm_interactions(ctx, Scope::Stage, self.0.id, args).await
    }
    /// MCP calls of its agents, chronologically, a page at a time.
    #[graphql(complexity = "cost::page(first, last, child_complexity)")]
    async fn mcp_interactions_connection(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "The first this many MCP interactions after `after` (and before `before`); at most the server's maximum page size. Without `first` and `last`, the first 20. Give `first` or `last`, not both."
        )]
        first: Option<i32>,
        #[graphql(desc = "Only MCP interactions after this cursor.")] after: Option<String>,
        #[graphql(
            desc = "The last this many MCP interactions before `before` (and after `after`); at most the server's maximum page size. Give `first` or `last`, not both."
        )]
        last: Option<i32>,
        #[graphql(desc = "Only MCP interactions before this cursor.")] before: Option<String>,
    ) -> Result<McpInteractionConnection> {
        let args = PageArgs {
            first,
            after,
            last,
            before,
        };
        connection::mcp_interactions(ctx, Scope::Stage, self.0.id, args).await
    }
    /// Tokens and estimated cost of its agents' LLM calls.
    #[graphql(complexity = "cost::aggregate(cost::ROLL_UP, child_complexity)")]
    async fn token_usage(&self, ctx: &Context<'_>) -> Result<TokenUsage> {
        let row = loaders(ctx)
            .token_usage_by
            .get(Scope::Stage)
            .load_one(self.0.id)
            .await?;
        Ok(row.unwrap_or_default().into())
    }
    /// The chat this stage answers in (null for chain stages).
    async fn chat(&self, ctx: &Context<'_>) -> Result<Option<Chat>> {
        let Some(id) = self.0.chat_id else {
            return Ok(None);
        };
        Ok(loaders(ctx).chats.load_one(id).await?.map(Chat))
    }
    /// The chat question this stage answers (null for chain stages).
    async fn chat_user_message(&self, ctx: &Context<'_>) -> Result<Option<ChatUserMessage>> {
        let Some(id) = self.0.chat_user_message_id else {
            return Ok(None);
        };
        Ok(loaders(ctx)
            .chat_user_messages
            .load_one(id)
            .await?
            .map(ChatUserMessage))
    }
}
