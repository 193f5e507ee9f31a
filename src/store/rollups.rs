//! Aggregates computed in SQL, for many parents per statement.

use std::collections::HashMap;

use sqlx::FromRow;
use uuid::Uuid;

use super::{Scope, SessionCountsRow, Store, TokenUsageRow};
use crate::error::Result;

impl Store {
    /// Token and cost totals of the LLM interactions under each parent (zero when it has none).
    pub async fn token_usage_by(
        &self,
        scope: Scope,
        ids: &[Uuid],
    ) -> Result<HashMap<Uuid, TokenUsageRow>> {
        #[derive(FromRow)]
        struct Row {
            parent: Uuid,
            #[sqlx(flatten)]
            usage: TokenUsageRow,
        }
        let column = scope.column();
        let sql = format!(
            "SELECT {column} AS parent, \
                    coalesce(sum(input_tokens), 0)::bigint AS input_tokens, \
                    coalesce(sum(output_tokens), 0)::bigint AS output_tokens, \
                    coalesce(sum(total_tokens), 0)::bigint AS total_tokens, \
                    coalesce(sum(thinking_tokens), 0)::bigint AS thinking_tokens, \
                    coalesce(sum(estimated_cost_usd), 0)::float8 AS estimated_cost_usd, \
                    count(*) AS interaction_count \
             FROM llm_interactions WHERE {column} = ANY($1) GROUP BY {column}"
        );
        let rows: Vec<Row> = sqlx::query_as(&sql)
            .bind(ids)
            .fetch_all(self.reader().await?.traced())
            .await?;
        let mut usage: HashMap<Uuid, TokenUsageRow> = ids
            .iter()
            .map(|id| (*id, TokenUsageRow::default()))
            .collect();
        usage.extend(rows.into_iter().map(|r| (r.parent, r.usage)));
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
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT s.id, \
                (SELECT count(*) FROM stages WHERE session_id = s.id) AS stage_count, \
                (SELECT count(*) FROM agent_executions WHERE session_id = s.id) AS execution_count, \
                (SELECT count(*) FROM timeline_events WHERE session_id = s.id) AS timeline_event_count, \
                (SELECT count(*) FROM messages WHERE session_id = s.id) AS message_count, \
                (SELECT count(*) FROM llm_interactions WHERE session_id = s.id) AS llm_interaction_count, \
                (SELECT count(*) FROM mcp_interactions WHERE session_id = s.id) AS mcp_interaction_count \
             FROM unnest($1::uuid[]) AS s(id)",
        )
        .bind(ids)
        .fetch_all(self.reader().await?.traced())
        .await?;
        Ok(rows.into_iter().map(|r| (r.id, r.counts)).collect())
    }
}
