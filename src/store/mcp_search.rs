//! MCP interactions across sessions, newest first: seed 002's audit of failed tool calls. Each
//! combination of filters reads an index in list order (`migrations/0013_tool_call_links.sql`),
//! so a page costs its own rows, not the table's.

use chrono::{DateTime, Utc};
use sqlx::{FromRow, Postgres, QueryBuilder};

use super::page::{Joined, NewestFirst, Page, Slice};
use super::{McpInteractionRow, Record as _, RecordKey, Store};
use crate::error::Result;

/// Which MCP interactions to list; all given conditions hold.
#[derive(Debug, Clone, Default)]
pub struct McpSearchFilter {
    pub server_name: Option<String>,
    pub tool_name: Option<String>,
    /// Only succeeded (no error message) or only failed ones.
    pub success: Option<bool>,
    pub created_after: Option<DateTime<Utc>>,
    pub created_before: Option<DateTime<Utc>>,
}

impl Store {
    /// A page of the interactions matching `filter`, newest first (ties by id, descending).
    pub async fn search_mcp_interactions(
        &self,
        filter: &McpSearchFilter,
        slice: &Slice<RecordKey>,
    ) -> Result<Page<McpInteractionRow>> {
        #[derive(FromRow)]
        struct Row {
            earlier: bool,
            later: bool,
            #[sqlx(flatten)]
            interaction: Joined<McpInteractionRow>,
        }
        let mut qb = QueryBuilder::new("");
        push_page(&mut qb, filter, slice);
        let rows: Vec<Row> = qb
            .build_query_as()
            .fetch_all(self.reader().await?.traced())
            .await?;
        let (earlier, later) = rows
            .first()
            .map_or((false, false), |r| (r.earlier, r.later));
        let interactions = rows.into_iter().filter_map(|r| r.interaction.0).collect();
        Ok(Page::new(interactions, slice, earlier, later))
    }

    /// How many interactions match `filter`.
    pub async fn count_mcp_interactions(&self, filter: &McpSearchFilter) -> Result<i64> {
        let mut qb = QueryBuilder::new("SELECT count(*) FROM mcp_interactions");
        push_filter(&mut qb, filter);
        Ok(qb
            .build_query_scalar()
            .fetch_one(self.reader().await?.traced())
            .await?)
    }

    /// How PostgreSQL reads a page: `EXPLAIN` of the very statement, for checking that an
    /// index serves each filter.
    pub async fn explain_mcp_search(
        &self,
        filter: &McpSearchFilter,
        slice: &Slice<RecordKey>,
    ) -> Result<String> {
        let mut qb = QueryBuilder::new("EXPLAIN ");
        push_page(&mut qb, filter, slice);
        self.explain(qb).await
    }
}

/// The page statement: the interactions matching `filter`, newest first.
fn push_page(
    qb: &mut QueryBuilder<'_, Postgres>,
    filter: &McpSearchFilter,
    slice: &Slice<RecordKey>,
) {
    let newest_first = NewestFirst {
        table: "mcp_interactions",
        columns: McpInteractionRow::COLUMNS,
        at: "created_at",
    };
    newest_first.push_page(qb, &|qb| push_filter(qb, filter), slice);
}

/// The filter's conditions, written as the partial indexes' predicates so they can be used.
fn push_filter(qb: &mut QueryBuilder<'_, Postgres>, filter: &McpSearchFilter) {
    qb.push(" WHERE TRUE");
    if let Some(server) = &filter.server_name {
        qb.push(" AND server_name = ").push_bind(server.clone());
    }
    if let Some(tool) = &filter.tool_name {
        qb.push(" AND tool_name = ").push_bind(tool.clone());
    }
    match filter.success {
        Some(true) => qb.push(" AND error_message IS NULL"),
        Some(false) => qb.push(" AND error_message IS NOT NULL"),
        None => qb,
    };
    if let Some(after) = filter.created_after {
        qb.push(" AND created_at > ").push_bind(after);
    }
    if let Some(before) = filter.created_before {
        qb.push(" AND created_at < ").push_bind(before);
    }
}
