use async_graphql::SimpleObject;
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive as _;

use super::prices::usd;

use crate::store::{SessionCountsRow, TokenUsageRow};

/// Token use and cost, summed over LLM interactions. Costs are exact decimals (US dollars):
/// `totalCostUsd` = `inputCostUsd` + `outputCostUsd` + `unsplitCostUsd`.
#[derive(SimpleObject)]
pub struct TokenUsage {
    /// Tokens sent to the models, cached ones included.
    pub input_tokens: i64,
    /// Of the input tokens, those read from the providers' caches.
    pub cached_input_tokens: i64,
    /// Tokens the models produced, thinking included.
    pub output_tokens: i64,
    /// Total tokens as the providers reported them.
    pub total_tokens: i64,
    /// Of the output tokens, those spent on native thinking.
    pub thinking_tokens: i64,
    /// Every cost: computed from the price list, or sent by the client.
    pub total_cost_usd: Decimal,
    /// Of it, what the input tokens cost (computed costs only).
    pub input_cost_usd: Decimal,
    /// Of it, what the output tokens cost (computed costs only).
    pub output_cost_usd: Decimal,
    /// Of it, the costs that cannot be split into input and output: those clients sent, and
    /// every cost recorded before casefile had prices.
    pub unsplit_cost_usd: Decimal,
    /// The same as `totalCostUsd`, as a float.
    #[graphql(deprecation = "Use `totalCostUsd`: the same sum, exact (a decimal string).")]
    pub estimated_cost_usd: f64,
    /// How many LLM interactions were summed.
    pub llm_interaction_count: i64,
    /// Of them, how many have no cost because their model had no price at their time
    /// (`costSource: NO_PRICE`).
    pub unpriced_llm_interaction_count: i64,
}

impl From<TokenUsageRow> for TokenUsage {
    fn from(r: TokenUsageRow) -> Self {
        let split = r.input_cost_usd + r.output_cost_usd;
        Self {
            input_tokens: r.input_tokens,
            cached_input_tokens: r.cached_input_tokens,
            output_tokens: r.output_tokens,
            total_tokens: r.total_tokens,
            thinking_tokens: r.thinking_tokens,
            total_cost_usd: usd(r.estimated_cost_usd),
            input_cost_usd: usd(r.input_cost_usd),
            output_cost_usd: usd(r.output_cost_usd),
            unsplit_cost_usd: usd(r.estimated_cost_usd - split),
            estimated_cost_usd: r.estimated_cost_usd.to_f64().unwrap_or_default(),
            llm_interaction_count: r.interaction_count,
            unpriced_llm_interaction_count: r.unpriced_count,
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
