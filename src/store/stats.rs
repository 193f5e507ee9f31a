//! Analytics over the sessions a filter matches: session figures and LLM usage, grouped, each
//! grouping one statement (the aggregation is PostgreSQL's, never done in Rust).

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use sqlx::{FromRow, Postgres, QueryBuilder};

use super::Store;
use super::sessions::{SessionFilter, push_filter, push_ranked_sessions, push_source};
use crate::error::sqlstate::{BadData, DbFailure};
use crate::error::{Error, Result};
use crate::model::SessionStatus;

/// What figures are grouped by. Session figures take the first seven; usage takes any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatsDimension {
    Status,
    AlertType,
    Chain,
    /// The registered version of the session's chain (with `Chain`, which it implies).
    ChainVersion,
    Author,
    /// The calendar day the session was created, in the request's time zone.
    Day,
    /// The week (from Monday) the session was created, in the request's time zone.
    Week,
    /// The model an LLM interaction called.
    Model,
    /// The provider an agent execution was configured with.
    Provider,
    AgentName,
}

impl StatsDimension {
    /// The column of the group key it fills.
    pub fn key_column(self) -> &'static str {
        match self {
            Self::Status => "status",
            Self::AlertType => "alert_type",
            Self::Chain => "chain_id",
            Self::ChainVersion => "chain_version",
            Self::Author => "author",
            Self::Day | Self::Week => "period",
            Self::Model => "model",
            Self::Provider => "provider",
            Self::AgentName => "agent_name",
        }
    }

    /// Whether it orders groups in time (periods come first, oldest first).
    fn is_period(self) -> bool {
        matches!(self, Self::Day | Self::Week)
    }
}

/// A grouping: the dimensions, the time zone of days and weeks (an IANA name PostgreSQL knows),
/// and how many groups at most (the first in group order).
#[derive(Debug, Clone)]
pub struct Grouping {
    pub by: Vec<StatsDimension>,
    pub time_zone: String,
    pub limit: i64,
}

/// The key of a group: the value of each dimension grouped by (`None` for the others, and for
/// sessions or executions without that value).
#[derive(Debug, Clone, FromRow)]
pub struct GroupKeyRow {
    pub status: Option<SessionStatus>,
    pub alert_type: Option<String>,
    pub chain_id: Option<String>,
    pub chain_version: Option<String>,
    pub author: Option<String>,
    pub period: Option<DateTime<Utc>>,
    pub model: Option<String>,
    pub provider: Option<String>,
    pub agent_name: Option<String>,
}

const KEY_COLUMNS: [(&str, &str); 9] = [
    ("status", "text"),
    ("alert_type", "text"),
    ("chain_id", "text"),
    ("chain_version", "text"),
    ("author", "text"),
    ("period", "timestamptz"),
    ("model", "text"),
    ("provider", "text"),
    ("agent_name", "text"),
];

/// Session figures of one group (each per session).
#[derive(Debug, Clone, FromRow)]
pub struct SessionGroupRow {
    #[sqlx(flatten)]
    pub key: GroupKeyRow,
    pub session_count: i64,
    pub active_count: i64,
    pub completed_count: i64,
    pub failed_count: i64,
    pub timed_out_count: i64,
    pub cancelled_count: i64,
    /// Sessions with a duration (started and completed).
    pub timed_count: i64,
    pub duration_p50_ms: Option<f64>,
    pub duration_p95_ms: Option<f64>,
    pub duration_avg_ms: Option<f64>,
    /// How many groups there are in all (the same on every row).
    pub group_count: i64,
}

/// Usage figures of one group: LLM calls and tokens (per interaction, from the roll-ups) and
/// agent executions.
#[derive(Debug, Clone, FromRow)]
pub struct UsageGroupRow {
    #[sqlx(flatten)]
    pub key: GroupKeyRow,
    pub execution_count: i64,
    pub finished_execution_count: i64,
    pub failed_execution_count: i64,
    pub llm_calls: i64,
    pub failed_llm_calls: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub total_tokens: i64,
    pub thinking_tokens: i64,
    pub cached_input_tokens: i64,
    /// Every cost; of it, the parts of the computed ones.
    pub estimated_cost_usd: Decimal,
    pub input_cost_usd: Decimal,
    pub output_cost_usd: Decimal,
    /// Interactions whose model had no price.
    pub unpriced_llm_calls: i64,
    pub group_count: i64,
}

/// Statuses as the figures count them: sessions still active, and executions that failed or
/// ended with an outcome.
const ACTIVE: &str = "('pending', 'in_progress', 'cancelling')";
const FAILED_EXECUTION: &str = "('failed', 'timed_out')";
const FINISHED_EXECUTION: &str = "('completed', 'failed', 'timed_out')";

impl Store {
    /// Session figures of the sessions `filter` matches, grouped.
    pub async fn session_groups(
        &self,
        filter: &SessionFilter,
        grouping: &Grouping,
    ) -> Result<Vec<SessionGroupRow>> {
        let mut qb = QueryBuilder::new("");
        push_ranked_sessions(&mut qb, filter);
        push_key_select(&mut qb, grouping);
        qb.push(format!(
            "count(*) AS session_count, \
             count(*) FILTER (WHERE r.status IN {ACTIVE}) AS active_count, \
             count(*) FILTER (WHERE r.status = 'completed') AS completed_count, \
             count(*) FILTER (WHERE r.status = 'failed') AS failed_count, \
             count(*) FILTER (WHERE r.status = 'timed_out') AS timed_out_count, \
             count(*) FILTER (WHERE r.status = 'cancelled') AS cancelled_count, \
             count(r.duration_ms) AS timed_count, \
             percentile_cont(0.5) WITHIN GROUP (ORDER BY r.duration_ms) AS duration_p50_ms, \
             percentile_cont(0.95) WITHIN GROUP (ORDER BY r.duration_ms) AS duration_p95_ms, \
             avg(r.duration_ms)::float8 AS duration_avg_ms, \
             count(*) OVER () AS group_count FROM ("
        ));
        push_sessions(&mut qb, filter);
        qb.push(") r");
        push_time_zone_check(&mut qb, grouping);
        push_group_order(&mut qb, grouping, "session_count");
        self.fetch_groups(qb).await
    }

    /// LLM usage and agent executions under the sessions `filter` matches, grouped. An
    /// execution counts once in each group it falls in: once in all, or once per model it
    /// called when grouped by model.
    pub async fn usage_groups(
        &self,
        filter: &SessionFilter,
        grouping: &Grouping,
    ) -> Result<Vec<UsageGroupRow>> {
        let mut qb = QueryBuilder::new("");
        push_ranked_sessions(&mut qb, filter);
        push_key_select(&mut qb, grouping);
        qb.push(
            "coalesce(sum(r.executions), 0)::bigint AS execution_count, \
             coalesce(sum(r.finished_executions), 0)::bigint AS finished_execution_count, \
             coalesce(sum(r.failed_executions), 0)::bigint AS failed_execution_count, \
             coalesce(sum(r.calls), 0)::bigint AS llm_calls, \
             coalesce(sum(r.failed_calls), 0)::bigint AS failed_llm_calls, \
             coalesce(sum(r.input_tokens), 0)::bigint AS input_tokens, \
             coalesce(sum(r.output_tokens), 0)::bigint AS output_tokens, \
             coalesce(sum(r.total_tokens), 0)::bigint AS total_tokens, \
             coalesce(sum(r.thinking_tokens), 0)::bigint AS thinking_tokens, \
             coalesce(sum(r.cached_input_tokens), 0)::bigint AS cached_input_tokens, \
             coalesce(sum(r.estimated_cost_usd), 0) AS estimated_cost_usd, \
             coalesce(sum(r.input_cost_usd), 0) AS input_cost_usd, \
             coalesce(sum(r.output_cost_usd), 0) AS output_cost_usd, \
             coalesce(sum(r.unpriced_calls), 0)::bigint AS unpriced_llm_calls, \
             count(*) OVER () AS group_count FROM (",
        );
        // Rows of executions and of roll-ups, alike: the session's columns, the execution's
        // agent and provider, and the figures each adds.
        let session = "s.status, s.alert_type, s.chain_id, s.chain_version, s.author, s.created_at";
        let execution = format!(
            "1 AS executions, (e.status IN {FINISHED_EXECUTION})::int AS finished_executions, \
             (e.status IN {FAILED_EXECUTION})::int AS failed_executions"
        );
        let calls = "calls, failed_calls, input_tokens, output_tokens, total_tokens, \
                     thinking_tokens, estimated_cost_usd, cached_input_tokens, input_cost_usd, \
                     output_cost_usd, unpriced_calls";
        if grouping.by.contains(&StatsDimension::Model) {
            // Each execution with each model it called (or none): one row per pair, so counting
            // rows counts executions per model.
            qb.push(format_args!(
                "SELECT {session}, e.agent_name, e.llm_provider, u.model_name, {execution}, \
                   coalesce(u.calls, 0) AS calls, coalesce(u.failed_calls, 0) AS failed_calls, \
                   coalesce(u.input_tokens, 0) AS input_tokens, \
                   coalesce(u.output_tokens, 0) AS output_tokens, \
                   coalesce(u.total_tokens, 0) AS total_tokens, \
                   coalesce(u.thinking_tokens, 0) AS thinking_tokens, \
                   coalesce(u.estimated_cost_usd, 0) AS estimated_cost_usd, \
                   coalesce(u.cached_input_tokens, 0) AS cached_input_tokens, \
                   coalesce(u.input_cost_usd, 0) AS input_cost_usd, \
                   coalesce(u.output_cost_usd, 0) AS output_cost_usd, \
                   coalesce(u.unpriced_calls, 0) AS unpriced_calls FROM ("
            ));
            push_sessions(&mut qb, filter);
            qb.push(
                ") s JOIN agent_executions e ON e.session_id = s.id \
                 LEFT JOIN llm_usage_rollups u \
                   ON u.execution_id = e.id AND u.session_id = e.session_id",
            );
        } else {
            // Executions and roll-ups as rows of their own, each joined to its session only:
            // each execution counted once however many models it called, and no count of
            // distinct executions to sort for.
            qb.push(format_args!(
                "SELECT {session}, e.agent_name, e.llm_provider, NULL::text AS model_name, \
                   {execution}, 0::bigint AS calls, 0::bigint AS failed_calls, \
                   0::bigint AS input_tokens, 0::bigint AS output_tokens, \
                   0::bigint AS total_tokens, 0::bigint AS thinking_tokens, \
                   0::numeric AS estimated_cost_usd, 0::bigint AS cached_input_tokens, \
                   0::numeric AS input_cost_usd, 0::numeric AS output_cost_usd, \
                   0::bigint AS unpriced_calls FROM ("
            ));
            push_sessions(&mut qb, filter);
            qb.push(format_args!(
                ") s JOIN agent_executions e ON e.session_id = s.id \
                 UNION ALL SELECT {session}, u.agent_name, u.llm_provider, u.model_name, \
                   0, 0, 0, {calls} FROM ("
            ));
            push_sessions(&mut qb, filter);
            qb.push(") s JOIN llm_usage_rollups u ON u.session_id = s.id");
        }
        qb.push(") r");
        push_time_zone_check(&mut qb, grouping);
        push_group_order(&mut qb, grouping, "llm_calls");
        self.fetch_groups(qb).await
    }

    async fn fetch_groups<R>(&self, mut statement: QueryBuilder<'_, Postgres>) -> Result<Vec<R>>
    where
        R: for<'r> FromRow<'r, sqlx::postgres::PgRow> + Send + Unpin,
    {
        statement
            .build_query_as()
            .fetch_all(self.reader().await?.traced())
            .await
            .map_err(|e| match &e {
                // The only value PostgreSQL can refuse here is the time zone's name.
                sqlx::Error::Database(db)
                    if DbFailure::of(&e) == Some(DbFailure::BadData(BadData::BadParameter)) =>
                {
                    Error::bad_input(format!("unknown time zone: {}", db.message()))
                }
                _ => e.into(),
            })
    }
}

/// `SELECT` and the group key's columns, each the dimension's expression or a typed `NULL`,
/// ending with `, ` for the figures. Grouping and ordering name the key's columns by position,
/// so each expression (and the time zone bound in it) is written once.
fn push_key_select(qb: &mut QueryBuilder<'_, Postgres>, grouping: &Grouping) {
    qb.push("SELECT ");
    for (column, sql_type) in KEY_COLUMNS {
        match grouping.by.iter().find(|d| d.key_column() == column) {
            Some(dimension) => push_expression(qb, *dimension, &grouping.time_zone),
            None => {
                qb.push(format_args!("NULL::{sql_type}"));
            }
        }
        qb.push(format_args!(" AS {column}, "));
    }
}

/// `SELECT * FROM sessions WHERE …`: the sessions `filter` matches.
fn push_sessions(qb: &mut QueryBuilder<'_, Postgres>, filter: &SessionFilter) {
    qb.push("SELECT *");
    push_source(qb, filter);
    push_filter(qb, filter);
}

/// What a dimension groups on: a column of the rows grouped (`r`), which are sessions, or for
/// usage, executions and roll-ups with their session's columns.
fn push_expression(
    qb: &mut QueryBuilder<'_, Postgres>,
    dimension: StatsDimension,
    time_zone: &str,
) {
    let column = match dimension {
        StatsDimension::Status => "r.status",
        StatsDimension::AlertType => "r.alert_type",
        StatsDimension::Chain => "r.chain_id",
        StatsDimension::ChainVersion => "r.chain_version",
        StatsDimension::Author => "r.author",
        StatsDimension::Model => "r.model_name",
        StatsDimension::Provider => "r.llm_provider",
        StatsDimension::AgentName => "r.agent_name",
        StatsDimension::Day => return push_period(qb, "day", time_zone),
        StatsDimension::Week => return push_period(qb, "week", time_zone),
    };
    qb.push(column);
}

/// The start of the day or week of a session's creation, as an instant: truncated on the wall
/// clock of the time zone, so days follow its offsets (23 and 25 hours at DST changes).
fn push_period(qb: &mut QueryBuilder<'_, Postgres>, unit: &str, time_zone: &str) {
    qb.push(format_args!(
        "date_trunc('{unit}', r.created_at AT TIME ZONE "
    ))
    .push_bind(time_zone.to_owned())
    .push(") AT TIME ZONE ")
    .push_bind(time_zone.to_owned());
}

/// With days or weeks, ` WHERE` the time zone is one PostgreSQL knows: a condition on no row,
/// checked once before any is read, so an unknown zone is refused even when no session matches.
fn push_time_zone_check(qb: &mut QueryBuilder<'_, Postgres>, grouping: &Grouping) {
    if grouping.by.iter().any(|d| d.is_period()) {
        qb.push(" WHERE (SELECT now() AT TIME ZONE ")
            .push_bind(grouping.time_zone.clone())
            .push(") IS NOT NULL");
    }
}

/// `GROUP BY` the key's columns that are grouped by, ordered periods first (oldest first), then
/// the largest groups (by `size`), then the key; at most `limit` groups.
fn push_group_order(qb: &mut QueryBuilder<'_, Postgres>, grouping: &Grouping, size: &str) {
    // Select-list positions count from 1.
    let position = |column: &str| {
        1 + KEY_COLUMNS
            .iter()
            .position(|(c, _)| *c == column)
            .expect("a key column")
    };
    let grouped: Vec<usize> = grouping
        .by
        .iter()
        .map(|d| position(d.key_column()))
        .collect();
    if !grouped.is_empty() {
        let list: Vec<String> = grouped.iter().map(|p| p.to_string()).collect();
        qb.push(format_args!(" GROUP BY {}", list.join(", ")));
    }
    let mut order: Vec<String> = Vec::new();
    if grouping.by.iter().any(|d| d.is_period()) {
        order.push(format!("{} ASC", position("period")));
    }
    order.push(format!("{size} DESC"));
    order.extend(grouped.iter().map(|p| format!("{p} ASC NULLS LAST")));
    qb.push(format_args!(" ORDER BY {} LIMIT ", order.join(", ")))
        .push_bind(grouping.limit);
}
