use std::sync::Arc;

use crate::api::cost;
use crate::api::scalars::Text;
use async_graphql::{Context, ID, Object};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::scoped::{ScopedCalls, ScopedMessages, ScopedTimeline, Under};
use super::{AgentExecution, Chat, ChatUserMessage, Session};
use super::{loaders, required};
use crate::api::ids::{self, NodeType};
use crate::model::{ParallelType, StageStatus, SuccessPolicy};
use crate::store::{InSession as _, Key, StageRow};
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
        let rows = loaders(ctx)
            .executions_by_stage
            .load_one(self.0.key())
            .await?;
        Ok(rows
            .unwrap_or_default()
            .into_iter()
            .filter(|r| include_sub_agents || r.parent_execution_id.is_none())
            .map(AgentExecution)
            .collect())
    }
    // The relationships shared with the other levels (`scoped.rs`), in their place here.
    #[graphql(flatten)]
    async fn scoped_timeline(&self) -> ScopedTimeline {
        ScopedTimeline(Under::stage(&self.0))
    }
    #[graphql(flatten)]
    async fn scoped_messages(&self) -> ScopedMessages {
        ScopedMessages(Under::stage(&self.0))
    }
    #[graphql(flatten)]
    async fn scoped_calls(&self) -> ScopedCalls {
        ScopedCalls(Under::stage(&self.0))
    }
    /// The chat this stage answers in (null for chain stages).
    async fn chat(&self, ctx: &Context<'_>) -> Result<Option<Chat>> {
        let Some(id) = self.0.chat_id else {
            return Ok(None);
        };
        let chat = Key::new(self.0.session_id, id);
        Ok(loaders(ctx).chats.load_one(chat).await?.map(Chat))
    }
    /// The chat question this stage answers (null for chain stages).
    async fn chat_user_message(&self, ctx: &Context<'_>) -> Result<Option<ChatUserMessage>> {
        let Some(id) = self.0.chat_user_message_id else {
            return Ok(None);
        };
        Ok(loaders(ctx)
            .chat_user_messages
            .load_one(Key::new(self.0.session_id, id))
            .await?
            .map(ChatUserMessage))
    }
}
