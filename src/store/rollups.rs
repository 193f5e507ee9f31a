//! Aggregates computed in SQL, for many parents per statement.

use std::collections::HashMap;

use sqlx::FromRow;
use uuid::Uuid;

use super::{Key, Scope, SessionCountsRow, Store, TokenUsageRow, key_columns, one_session};
use crate::error::Result;

impl Store {
    /// Token and cost totals of the LLM interactions under each parent (zero when it has none).
    pub async fn token_usage_by(
        &self,
        scope: Scope,
        keys: &[Key],
    ) -> Result<HashMap<Key, TokenUsageRow>> {
        #[derive(FromRow)]
        struct Row {
            session_id: Uuid,
            parent: Uuid,
            #[sqlx(flatten)]
            usage: TokenUsageRow,
        }
        let (ids, sessions) = key_columns(keys);
        // Keys of one session bind it as a parameter, so a table partitioned by session is
        // pruned to its partition as the statement starts (see `per_key_in_session!`).
        let session = one_session(keys);
        let rows = session.map_or(TOKEN_USAGE_BY_KEY, |_| TOKEN_USAGE_IN_SESSION);
        let sql = token_usage_statement(scope, rows);
        let query = match session {
            Some(session) => sqlx::query_as(&sql).bind(ids).bind(session),
            None => sqlx::query_as(&sql).bind(ids).bind(sessions),
        };
        let rows: Vec<Row> = query.fetch_all(self.reader().await?.traced()).await?;
        let mut usage: HashMap<Key, TokenUsageRow> = keys
            .iter()
            .map(|key| (*key, TokenUsageRow::default()))
            .collect();
        for row in rows {
            if let Some(slot) = usage.get_mut(&Key::new(row.session_id, row.parent)) {
                *slot = row.usage;
            }
        }
        Ok(usage)
    }

    /// How many stages, executions, events, messages and interactions each session holds.
    pub async fn session_counts(&self, ids: &[Uuid]) -> Result<HashMap<Uuid, SessionCountsRow>> {
        #[derive(FromRow)]
        struct Row {
            id: Uuid,
            #[sqlx(flatten)]
            counts: SessionCountsRow,
        }
        let query = match ids {
            // One session, a parameter: pruned as the statement starts (see `per_key_in_session!`).
            [id] => sqlx::query_as(COUNTS_OF_ONE_SESSION).bind(*id),
            _ => sqlx::query_as(COUNTS_BY_SESSION).bind(ids),
        };
        let rows: Vec<Row> = query.fetch_all(self.reader().await?.traced()).await?;
        Ok(rows.into_iter().map(|r| (r.id, r.counts)).collect())
    }
}

/// The interactions under one parent (`{column}`, the scope's column, is filled in per
/// statement), in its session (`$session`: each key's `k.session_id`, or the one session bound as
/// `$2`).
macro_rules! usage_rows {
    ($session:literal) => {
        concat!(
            "SELECT session_id, {column} AS parent, input_tokens, output_tokens, total_tokens, \
                 thinking_tokens, cached_input_tokens, estimated_cost_usd, input_cost_usd, \
                 output_cost_usd, cost_source \
             FROM llm_interactions WHERE {column} = k.id AND session_id = ",
            $session
        )
    };
}

const TOKEN_USAGE_BY_KEY: &str = per_key!(usage_rows!("k.session_id"));
const TOKEN_USAGE_IN_SESSION: &str = per_key_in_session!(usage_rows!("$2"));

/// Token and cost totals per parent over `rows` (one of the two above) for `scope`.
fn token_usage_statement(scope: Scope, rows: &str) -> String {
    format!(
        "SELECT i.session_id, i.parent, \
            coalesce(sum(input_tokens), 0)::bigint AS input_tokens, \
            coalesce(sum(output_tokens), 0)::bigint AS output_tokens, \
            coalesce(sum(total_tokens), 0)::bigint AS total_tokens, \
            coalesce(sum(thinking_tokens), 0)::bigint AS thinking_tokens, \
            coalesce(sum(cached_input_tokens), 0)::bigint AS cached_input_tokens, \
            coalesce(sum(estimated_cost_usd), 0) AS estimated_cost_usd, \
            coalesce(sum(input_cost_usd), 0) AS input_cost_usd, \
            coalesce(sum(output_cost_usd), 0) AS output_cost_usd, \
            count(*) AS interaction_count, \
            count(*) FILTER (WHERE cost_source = 'no_price') AS unpriced_count \
         FROM {} i GROUP BY i.session_id, i.parent",
        rows.replace("{column}", scope.column())
    )
}

/// Each count of a session, from its own table's rows of that session (`$session`: a column of
/// the session's id, or the one session bound as `$1`).
macro_rules! counts_of {
    ($session:literal) => {
        concat!(
            "(SELECT count(*) FROM stages WHERE session_id = ",
            $session,
            ") AS stage_count, ",
            "(SELECT count(*) FROM agent_executions WHERE session_id = ",
            $session,
            ") AS execution_count, ",
            "(SELECT count(*) FROM timeline_events WHERE session_id = ",
            $session,
            ") AS timeline_event_count, ",
            "(SELECT count(*) FROM messages WHERE session_id = ",
            $session,
            ") AS message_count, ",
            "(SELECT count(*) FROM llm_interactions WHERE session_id = ",
            $session,
            ") AS llm_interaction_count, ",
            "(SELECT count(*) FROM mcp_interactions WHERE session_id = ",
            $session,
            ") AS mcp_interaction_count"
        )
    };
}

const COUNTS_BY_SESSION: &str = concat!(
    "SELECT s.id, ",
    counts_of!("s.id"),
    " FROM unnest($1::uuid[]) AS s(id)"
);
const COUNTS_OF_ONE_SESSION: &str = concat!("SELECT $1::uuid AS id, ", counts_of!("$1"));
