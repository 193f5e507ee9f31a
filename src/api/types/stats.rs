//! Analytics (`Query.sessionStats`): session figures and LLM usage over the sessions a filter
//! matches, grouped. Each grouping is one SQL statement (see [`crate::store::stats`]).

use std::collections::HashSet;

use async_graphql::{Context, Enum, Object, SimpleObject};
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive as _;

use super::prices::usd;

use crate::error::Error;
use crate::model::SessionStatus;
use crate::store::Store;
use crate::store::sessions::SessionFilter;
use crate::store::stats::{GroupKeyRow, Grouping, SessionGroupRow, StatsDimension, UsageGroupRow};
use async_graphql::Result;

/// Most groups one grouping returns.
const MAX_GROUPS: i32 = 1000;
/// Longest time zone name accepted (IANA names are far shorter).
const MAX_TIME_ZONE_LEN: usize = 64;

/// What session figures are grouped by.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
pub enum SessionDimension {
    /// The session's status.
    Status,
    /// The session's alert type.
    AlertType,
    /// The chain (`chainId`).
    Chain,
    /// The registered chain version (`chain`), within its chain: implies `CHAIN`, so the key
    /// has both `chainId` and `chainVersion`. Sessions created with a chain name only form
    /// their chain's group whose version is null.
    ChainVersion,
    /// The session's author (sessions without one form a group whose author is null).
    Author,
    /// The calendar day the session was created, in `sessionStats`' `timeZone`.
    Day,
    /// The week, Monday to Sunday, the session was created, in `sessionStats`' `timeZone`.
    Week,
}

/// What usage figures are grouped by: a property of the session, or of the agent execution or
/// LLM call.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
pub enum UsageDimension {
    /// The session's status.
    Status,
    /// The session's alert type.
    AlertType,
    /// The session's chain (`chainId`).
    Chain,
    /// The session's registered chain version, within its chain (implies `CHAIN`): what each
    /// version costs. Sessions created with a chain name only form their chain's group whose
    /// version is null.
    ChainVersion,
    /// The session's author.
    Author,
    /// The calendar day the session was created, in `sessionStats`' `timeZone`.
    Day,
    /// The week, Monday to Sunday, the session was created, in `sessionStats`' `timeZone`.
    Week,
    /// The model an LLM interaction called (`LLMInteraction.modelName`). Executions that made
    /// no LLM call fall in a group whose model is null.
    Model,
    /// The LLM provider the agent execution was configured with (`AgentExecution.llmProvider`).
    Provider,
    /// The agent (`AgentExecution.agentName`).
    AgentName,
}

impl From<SessionDimension> for StatsDimension {
    fn from(d: SessionDimension) -> Self {
        match d {
            SessionDimension::Status => Self::Status,
            SessionDimension::AlertType => Self::AlertType,
            SessionDimension::Chain => Self::Chain,
            SessionDimension::ChainVersion => Self::ChainVersion,
            SessionDimension::Author => Self::Author,
            SessionDimension::Day => Self::Day,
            SessionDimension::Week => Self::Week,
        }
    }
}

impl From<UsageDimension> for StatsDimension {
    fn from(d: UsageDimension) -> Self {
        match d {
            UsageDimension::Status => Self::Status,
            UsageDimension::AlertType => Self::AlertType,
            UsageDimension::Chain => Self::Chain,
            UsageDimension::ChainVersion => Self::ChainVersion,
            UsageDimension::Author => Self::Author,
            UsageDimension::Day => Self::Day,
            UsageDimension::Week => Self::Week,
            UsageDimension::Model => Self::Model,
            UsageDimension::Provider => Self::Provider,
            UsageDimension::AgentName => Self::AgentName,
        }
    }
}

/// Figures over the sessions a filter matches.
pub struct SessionStats {
    filter: SessionFilter,
    time_zone: String,
}

impl SessionStats {
    /// Figures over `filter`'s sessions, days and weeks in `time_zone` (checked by the database
    /// when a grouping uses it).
    pub fn new(filter: SessionFilter, time_zone: String) -> crate::error::Result<Self> {
        let time_zone = time_zone.trim().to_owned();
        if time_zone.is_empty()
            || time_zone.chars().count() > MAX_TIME_ZONE_LEN
            || time_zone.contains('\0')
        {
            return Err(Error::bad_input(format!(
                "`timeZone` must be a time zone name such as \"Europe/Berlin\" or \"UTC\" (at \
                 most {MAX_TIME_ZONE_LEN} characters)"
            )));
        }
        Ok(Self { filter, time_zone })
    }

    fn grouping<D>(&self, by: Vec<D>, first: i32) -> crate::error::Result<Grouping>
    where
        D: Into<StatsDimension>,
    {
        if !(1..=MAX_GROUPS).contains(&first) {
            return Err(Error::bad_input(format!(
                "`first` must be between 1 and {MAX_GROUPS}"
            )));
        }
        let mut by: Vec<StatsDimension> = by.into_iter().map(Into::into).collect();
        // A version is a version of its chain: grouped within it.
        if let Some(at) = by.iter().position(|d| *d == StatsDimension::ChainVersion)
            && !by.contains(&StatsDimension::Chain)
        {
            by.insert(at, StatsDimension::Chain);
        }
        let mut seen = HashSet::new();
        for d in &by {
            // DAY and WEEK both fill the key's period.
            if !seen.insert(d.key_column()) {
                return Err(Error::bad_input(
                    "`by` names a dimension twice (or both DAY and WEEK)",
                ));
            }
        }
        Ok(Grouping {
            by,
            time_zone: self.time_zone.clone(),
            limit: first.into(),
        })
    }
}

/// Figures over the sessions `sessionStats`' filter matches, grouped as each field asks. Each
/// field is one SQL statement over those sessions.
#[Object]
impl SessionStats {
    /// Session figures, grouped `by` these dimensions (none: one group of every session).
    /// Groups come in time order when grouped by `DAY` or `WEEK`, otherwise largest first, then
    /// by key; at most `first` (1 to 1,000; `totalCount` says how many exist).
    #[graphql(complexity = "crate::api::cost::groups(first, child_complexity)")]
    async fn groups(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            default,
            desc = "The dimensions, each at most once (not both DAY and WEEK)."
        )]
        by: Vec<SessionDimension>,
        #[graphql(default = 100, desc = "Most groups returned (1 to 1,000).")] first: i32,
    ) -> Result<SessionGroups> {
        let grouping = self.grouping(by, first)?;
        let rows = ctx
            .data_unchecked::<Store>()
            .session_groups(&self.filter, &grouping)
            .await?;
        Ok(SessionGroups {
            total_count: rows.first().map_or(0, |r| r.group_count),
            nodes: rows.into_iter().map(SessionGroup::from).collect(),
        })
    }

    /// LLM usage and agent executions under those sessions, grouped `by` these dimensions
    /// (none: one group of everything). Ordered as `groups` (most LLM calls first); at most
    /// `first` (1 to 1,000).
    #[graphql(complexity = "crate::api::cost::groups(first, child_complexity)")]
    async fn usage(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            default,
            desc = "The dimensions, each at most once (not both DAY and WEEK)."
        )]
        by: Vec<UsageDimension>,
        #[graphql(default = 100, desc = "Most groups returned (1 to 1,000).")] first: i32,
    ) -> Result<UsageGroups> {
        let grouping = self.grouping(by, first)?;
        let rows = ctx
            .data_unchecked::<Store>()
            .usage_groups(&self.filter, &grouping)
            .await?;
        Ok(UsageGroups {
            total_count: rows.first().map_or(0, |r| r.group_count),
            nodes: rows.into_iter().map(UsageGroup::from).collect(),
        })
    }
}

/// The value of each dimension a group was grouped by; fields not grouped by are null (and so
/// is a value a session or execution does not have, such as a missing author).
#[derive(SimpleObject)]
pub struct StatsGroupKey {
    /// The sessions' status (`STATUS`).
    pub status: Option<SessionStatus>,
    /// The sessions' alert type (`ALERT_TYPE`).
    pub alert_type: Option<String>,
    /// The sessions' chain (`CHAIN`, `CHAIN_VERSION`).
    pub chain_id: Option<String>,
    /// The sessions' registered chain version (`CHAIN_VERSION`; null for sessions created with
    /// a chain name only).
    pub chain_version: Option<String>,
    /// The sessions' author (`AUTHOR`).
    pub author: Option<String>,
    /// The start of the day or week (`DAY`, `WEEK`): midnight of its first day in the time
    /// zone, as an instant.
    pub period_start: Option<DateTime<Utc>>,
    /// The model called (`MODEL`).
    pub model: Option<String>,
    /// The executions' LLM provider (`PROVIDER`).
    pub provider: Option<String>,
    /// The executions' agent (`AGENT_NAME`).
    pub agent_name: Option<String>,
}

impl From<GroupKeyRow> for StatsGroupKey {
    fn from(k: GroupKeyRow) -> Self {
        Self {
            status: k.status,
            alert_type: k.alert_type,
            chain_id: k.chain_id,
            chain_version: k.chain_version,
            author: k.author,
            period_start: k.period,
            model: k.model,
            provider: k.provider,
            agent_name: k.agent_name,
        }
    }
}

/// Session groups, and how many there are in all.
#[derive(SimpleObject)]
pub struct SessionGroups {
    /// The groups, in order.
    pub nodes: Vec<SessionGroup>,
    /// Groups in all (`nodes` holds the first `first`).
    pub total_count: i64,
}

/// Figures of one group of sessions. Every figure counts sessions (one per session, whatever
/// it holds).
#[derive(SimpleObject)]
pub struct SessionGroup {
    /// What the group's sessions share.
    pub key: StatsGroupKey,
    /// Sessions in the group.
    pub session_count: i64,
    /// Sessions still pending, in progress or cancelling.
    pub active_count: i64,
    /// Sessions completed.
    pub completed_count: i64,
    /// Sessions failed.
    pub failed_count: i64,
    /// Sessions timed out.
    pub timed_out_count: i64,
    /// Sessions cancelled.
    pub cancelled_count: i64,
    /// Completed sessions out of those that ended with an outcome (completed, failed or timed
    /// out; cancelled ones are left out): 0 to 1, null when none has.
    pub success_rate: Option<f64>,
    /// How long the sessions ran, from start to completion (sessions that have both).
    pub duration: DurationStats,
}

/// Durations of the sessions of a group that started and completed, in milliseconds.
#[derive(SimpleObject)]
pub struct DurationStats {
    /// Sessions with a duration.
    pub session_count: i64,
    /// Median (interpolated, as PostgreSQL's `percentile_cont`); null without sessions.
    pub p50_ms: Option<f64>,
    /// 95th percentile (interpolated).
    pub p95_ms: Option<f64>,
    /// Mean.
    pub avg_ms: Option<f64>,
}

impl From<SessionGroupRow> for SessionGroup {
    fn from(r: SessionGroupRow) -> Self {
        Self {
            key: r.key.into(),
            session_count: r.session_count,
            active_count: r.active_count,
            completed_count: r.completed_count,
            failed_count: r.failed_count,
            timed_out_count: r.timed_out_count,
            cancelled_count: r.cancelled_count,
            success_rate: ratio(
                r.completed_count,
                r.completed_count + r.failed_count + r.timed_out_count,
            ),
            duration: DurationStats {
                session_count: r.timed_count,
                p50_ms: r.duration_p50_ms,
                p95_ms: r.duration_p95_ms,
                avg_ms: r.duration_avg_ms,
            },
        }
    }
}

/// Usage groups, and how many there are in all.
#[derive(SimpleObject)]
pub struct UsageGroups {
    /// The groups, in order.
    pub nodes: Vec<UsageGroup>,
    /// Groups in all (`nodes` holds the first `first`).
    pub total_count: i64,
}

/// Usage of one group. LLM figures count LLM interactions (calls); execution figures count
/// agent executions (sub-agents included), each once per group it falls in.
#[derive(SimpleObject)]
pub struct UsageGroup {
    /// What the group's executions and calls share.
    pub key: StatsGroupKey,
    /// LLM interactions.
    pub llm_calls: i64,
    /// LLM interactions that recorded an error.
    pub failed_llm_calls: i64,
    /// Failed LLM interactions out of all (0 to 1), null without any.
    pub llm_failure_rate: Option<f64>,
    /// Tokens sent to the models (summed per interaction), cached ones included.
    pub input_tokens: i64,
    /// Of the input tokens, those read from the providers' caches.
    pub cached_input_tokens: i64,
    /// Tokens the models produced, thinking included.
    pub output_tokens: i64,
    /// Total tokens as the providers reported them.
    pub total_tokens: i64,
    /// Of the output tokens, those spent on native thinking.
    pub thinking_tokens: i64,
    /// Every cost in US dollars, exact: computed from the price list or sent by the client
    /// (`inputCostUsd` + `outputCostUsd` + `unsplitCostUsd`).
    pub total_cost_usd: Decimal,
    /// Of it, what the input tokens cost (computed costs only).
    pub input_cost_usd: Decimal,
    /// Of it, what the output tokens cost (computed costs only).
    pub output_cost_usd: Decimal,
    /// Of it, the costs that cannot be split: those clients sent, and every cost recorded
    /// before casefile had prices.
    pub unsplit_cost_usd: Decimal,
    /// LLM interactions without a cost because their model had no price at their time.
    pub unpriced_llm_calls: i64,
    /// The same as `totalCostUsd`, as a float.
    #[graphql(deprecation = "Use `totalCostUsd`: the same sum, exact (a decimal string).")]
    pub estimated_cost_usd: f64,
    /// Agent executions.
    pub execution_count: i64,
    /// Executions that failed or timed out.
    pub failed_execution_count: i64,
    /// Failed executions out of those that ended with an outcome (completed, failed or timed
    /// out): 0 to 1, null when none has.
    pub execution_failure_rate: Option<f64>,
}

impl From<UsageGroupRow> for UsageGroup {
    fn from(r: UsageGroupRow) -> Self {
        Self {
            key: r.key.into(),
            llm_calls: r.llm_calls,
            failed_llm_calls: r.failed_llm_calls,
            llm_failure_rate: ratio(r.failed_llm_calls, r.llm_calls),
            input_tokens: r.input_tokens,
            output_tokens: r.output_tokens,
            total_tokens: r.total_tokens,
            thinking_tokens: r.thinking_tokens,
            cached_input_tokens: r.cached_input_tokens,
            total_cost_usd: usd(r.estimated_cost_usd),
            input_cost_usd: usd(r.input_cost_usd),
            output_cost_usd: usd(r.output_cost_usd),
            unsplit_cost_usd: usd(r.estimated_cost_usd - r.input_cost_usd - r.output_cost_usd),
            unpriced_llm_calls: r.unpriced_llm_calls,
            estimated_cost_usd: r.estimated_cost_usd.to_f64().unwrap_or_default(),
            execution_count: r.execution_count,
            failed_execution_count: r.failed_execution_count,
            execution_failure_rate: ratio(r.failed_execution_count, r.finished_execution_count),
        }
    }
}

/// `part / whole`, or null for an empty whole.
fn ratio(part: i64, whole: i64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}
