//! Aggregates computed in SQL, for many parents per statement.

use std::collections::HashMap;

use sqlx::FromRow;
use uuid::Uuid;

use super::{Key, Scope, SessionCountsRow, Store, TokenUsageRow, key_columns};
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
        let column = scope.column();
        let (ids, sessions) = key_columns(keys);
        let sql = format!(
            concat!(
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
                 FROM ",
                per_key!(
                    "SELECT session_id, {column} AS parent, input_tokens, output_tokens, total_tokens, \
                         thinking_tokens, cached_input_tokens, estimated_cost_usd, input_cost_usd, \
                         output_cost_usd, cost_source \
                     FROM llm_interactions WHERE {column} = k.id AND session_id = k.session_id"
                ),
                " i GROUP BY i.session_id, i.parent"
            ),
            column = column
        );
        let query = sqlx::query_as(&sql).bind(ids).bind(sessions);
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
