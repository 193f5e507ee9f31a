use async_graphql::SimpleObject;

use crate::store::{SessionCountsRow, TokenUsageRow};

/// Token use and estimated cost, summed over LLM interactions.
#[derive(SimpleObject)]
pub struct TokenUsage {
    /// Tokens sent to the models.
    pub input_tokens: i64,
    /// Tokens the models produced.
    pub output_tokens: i64,
    /// Total tokens as the providers reported them.
    pub total_tokens: i64,
    /// Tokens spent on native thinking.
    pub thinking_tokens: i64,
    /// Estimated cost in US dollars: the exact sum of the interactions' costs (kept as
    /// decimals to 10 places, so no floating-point noise).
    pub estimated_cost_usd: f64,
    /// How many LLM interactions were summed.
    pub llm_interaction_count: i64,
}

impl From<TokenUsageRow> for TokenUsage {
    fn from(r: TokenUsageRow) -> Self {
        Self {
            input_tokens: r.input_tokens,
            output_tokens: r.output_tokens,
            total_tokens: r.total_tokens,
            thinking_tokens: r.thinking_tokens,
            estimated_cost_usd: r.estimated_cost_usd,
            llm_interaction_count: r.interaction_count,
        }
    }
}

/// How much a session holds.
#[derive(SimpleObject)]
pub struct SessionCounts {
    /// Stages (including chat stages).
    pub stages: i64,
    /// Agent executions, sub-agents included.
    pub executions: i64,
    /// Timeline events.
    pub timeline_events: i64,
    /// LLM conversation messages.
    pub messages: i64,
    /// LLM interactions.
    pub llm_interactions: i64,
    /// MCP interactions.
    pub mcp_interactions: i64,
}

impl From<SessionCountsRow> for SessionCounts {
    fn from(r: SessionCountsRow) -> Self {
        Self {
            stages: r.stage_count,
            executions: r.execution_count,
            timeline_events: r.timeline_event_count,
            messages: r.message_count,
            llm_interactions: r.llm_interaction_count,
            mcp_interactions: r.mcp_interaction_count,
        }
    }
}
