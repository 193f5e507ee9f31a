use std::sync::Arc;

use crate::api::cost;
use crate::api::scalars::Text;
use async_graphql::{Context, ID, Object};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::scoped::{ScopedCalls, ScopedMessages, ScopedTimeline, Under};
use super::{Session, Stage, loaders, required};
use crate::api::ids::{self, NodeType};
use crate::model::{AgentType, ExecutionStatus};
use crate::store::{ExecutionRow, InSession as _, Key};
use async_graphql::Result;

pub struct AgentExecution(pub Arc<ExecutionRow>);

/// The work of one agent in a stage, or of a sub-agent an orchestrator agent spawned.
#[Object]
impl AgentExecution {
    /// Global ID.
    pub async fn id(&self) -> ID {
        ids::encode(NodeType::AgentExecution, self.0.id)
    }
    /// Database id (UUIDv7).
    async fn uuid(&self) -> Uuid {
        self.0.id
    }
    /// Agent name, e.g. "KubernetesAgent".
    async fn agent_name(&self) -> Text<'_> {
        Text(&self.0.agent_name)
    }
    /// Position among the stage's agents: 1 for a single agent, 1…N in parallel.
    async fn agent_index(&self) -> i32 {
        self.0.agent_index
    }
    /// Where the execution is in its lifecycle.
    async fn status(&self) -> ExecutionStatus {
        self.0.status
    }
    /// When it started.
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
    /// Why it failed, timed out or was cancelled.
    async fn error_message(&self) -> Option<Text<'_>> {
        self.0.error_message.as_deref().map(Text)
    }
    /// How the agent iterates, e.g. "react" or "native_thinking".
    async fn iteration_strategy(&self) -> Text<'_> {
        Text(&self.0.iteration_strategy)
    }
    /// LLM provider the agent uses.
    async fn llm_provider(&self) -> Option<Text<'_>> {
        self.0.llm_provider.as_deref().map(Text)
    }
    /// LLM model the agent uses.
    async fn llm_model(&self) -> Option<Text<'_>> {
        self.0.llm_model.as_deref().map(Text)
    }
    /// Where it stands in its tree (seed 004's `agent_type`).
    async fn agent_type(&self) -> AgentType {
        self.0.agent_type
    }
    /// Its team: set for team supervisors and workers, absent for the global supervisor.
    async fn team_name(&self) -> Option<Text<'_>> {
        self.0.team_name.as_deref().map(Text)
    }
    /// The task it was given (seed 003's inherited context).
    async fn task(&self) -> Option<Text<'_>> {
        self.0.task.as_deref().map(Text)
    }
    /// What it returned to its parent (seed 003's result summary).
    async fn result_summary(&self) -> Option<Text<'_>> {
        self.0.result_summary.as_deref().map(Text)
    }
    /// How deep in its tree: 0 for a root, at most 10.
    async fn depth(&self) -> i32 {
        self.0.depth
    }
    /// The global ID of the execution that dispatched it (none for a root).
    async fn parent_id(&self) -> Option<ID> {
        self.0
            .parent_execution_id
            .map(|id| ids::encode(NodeType::AgentExecution, id))
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
    /// The stage it runs in.
    async fn stage(&self, ctx: &Context<'_>) -> Result<Stage> {
        let stage = Key::new(self.0.session_id, self.0.stage_id);
        let row = loaders(ctx).stages.load_one(stage).await?;
        Ok(Stage(required(row, "stage")?))
    }
    /// The orchestrator execution that spawned this sub-agent (null for a top-level agent).
    async fn parent(&self, ctx: &Context<'_>) -> Result<Option<AgentExecution>> {
        let Some(id) = self.0.parent_execution_id else {
            return Ok(None);
        };
        Ok(loaders(ctx)
            .executions
            .load_one(Key::new(self.0.session_id, id))
            .await?
            .map(AgentExecution))
    }
    /// Sub-agents this execution spawned, by agent index.
    #[graphql(complexity = "cost::list(cost::rows::SUB_AGENTS, child_complexity)")]
    async fn sub_agents(&self, ctx: &Context<'_>) -> Result<Vec<AgentExecution>> {
        let rows = loaders(ctx)
            .sub_agents_by_parent
            .load_one(self.0.key())
            .await?;
        Ok(rows
            .unwrap_or_default()
            .into_iter()
            .map(AgentExecution)
            .collect())
    }
    // The relationships shared with the other levels (`scoped.rs`), in their place here.
    #[graphql(flatten)]
    async fn scoped_timeline(&self) -> ScopedTimeline {
        ScopedTimeline(Under::execution(&self.0))
    }
    #[graphql(flatten)]
    async fn scoped_messages(&self) -> ScopedMessages {
        ScopedMessages(Under::execution(&self.0))
    }
    #[graphql(flatten)]
    async fn scoped_calls(&self) -> ScopedCalls {
        ScopedCalls(Under::execution(&self.0))
    }
}
