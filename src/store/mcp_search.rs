//! MCP interactions across sessions, newest first: seed 002's audit of failed tool calls. Each
//! combination of filters reads an index in list order (`migrations/0013_tool_call_links.sql`),
//! so a page costs its own rows, not the table's.

use chrono::{DateTime, Utc};
use sqlx::{Postgres, QueryBuilder};

use super::page::{NewestFirst, Page, Slice};
use super::sessions::push_session_not_deleted;
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
    /// Include the interactions of soft-deleted sessions.
    pub include_deleted: bool,
}

impl Store {
    /// A page of the interactions matching `filter`, newest first (ties by id, descending).
    pub async fn search_mcp_interactions(
        &self,
        filter: &McpSearchFilter,
        slice: &Slice<RecordKey>,
    ) -> Result<Page<McpInteractionRow>> {
        NEWEST_FIRST
            .fetch(self, &|qb| push_filter(qb, filter), slice)
            .await
    }

    /// How many interactions match `filter`.
    pub async fn count_mcp_interactions(&self, filter: &McpSearchFilter) -> Result<i64> {
        NEWEST_FIRST
            .count(self, &|qb| push_filter(qb, filter))
            .await
    }

    /// How PostgreSQL reads a page: `EXPLAIN` of the very statement, for checking that an
    /// index serves each filter.
    pub async fn explain_mcp_search(
        &self,
        filter: &McpSearchFilter,
        slice: &Slice<RecordKey>,
    ) -> Result<String> {
        NEWEST_FIRST
            .explain(self, &|qb| push_filter(qb, filter), slice)
            .await
    }
}

/// The list's order: newest first, along the indexes of each combination of filters.
const NEWEST_FIRST: NewestFirst = NewestFirst {
    table: "mcp_interactions",
    columns: McpInteractionRow::COLUMNS,
    at: "created_at",
};

/// The filter's conditions, written as the partial indexes' predicates so they can be used
/// (a deleted session's interactions are left out as the list's index is read).
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
    if !filter.include_deleted {
        push_session_not_deleted(qb, "mcp_interactions");
    }
}
