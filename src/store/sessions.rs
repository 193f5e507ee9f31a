//! Listing sessions: filters, orderings and keyset (seek) pagination.

use chrono::{DateTime, Utc};
use sqlx::{FromRow, Postgres, QueryBuilder};
use uuid::Uuid;

use super::page::{Joined, Page, Slice};
use super::records::SESSION_COLUMNS;
use super::search_words::SearchWords;
use super::write::storable_time;
use super::{ChainKey, SessionRow, Store, search};
use crate::error::Result;
use crate::model::{SessionStatus, db_name};

/// Which sessions to list. Every field narrows the result; `None` means "any".
#[derive(Debug, Clone, Default)]
pub struct SessionFilter {
    pub statuses: Vec<SessionStatus>,
    pub alert_type: Option<String>,
    pub chain_id: Option<String>,
    /// Sessions that ran this registered chain version (by `sessions_chain_version_idx`).
    pub chain: Option<ChainKey>,
    pub author: Option<String>,
    pub created_after: Option<DateTime<Utc>>,
    pub created_before: Option<DateTime<Utc>>,
    /// Words searched for (web search syntax, checked) in the alert, its analysis and summary,
    /// and the text of its finished timeline events; see [`super::search`].
    pub search: Option<SearchWords>,
    /// The alert data contains this JSON (`@>`).
    pub alert_data_contains: Option<serde_json::Value>,
    pub include_deleted: bool,
    /// Created by this identity (`token:NAME` or a proxy user).
    pub created_by: Option<String>,
    /// Cancellation requested by this identity.
    pub cancelled_by: Option<String>,
    /// Deleted by this identity (implies deleted sessions are included).
    pub deleted_by: Option<String>,
}

/// Where sessions that have not completed sort by completion: before every real completion,
/// at the first instant of year 1, as in the index `sessions_completed_at_idx`.
fn never_completed() -> DateTime<Utc> {
    DateTime::from_timestamp(-62_135_596_800, 0).expect("0001-01-01T00:00:00Z")
}

/// A session in a list, with how well it matched the list's search (if it had one).
#[derive(Debug, Clone)]
pub struct ListedSession {
    pub session: SessionRow,
    pub search_rank: Option<f32>,
}

/// What sessions are ordered by; ties are always broken by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionSort {
    CreatedAt,
    Status,
    AlertType,
    Author,
    Duration,
    UpdatedAt,
    CompletedAt,
    /// How well the session matches the filter's search (only with one).
    Relevance,
}

/// The value of a session's sort key, as stored in a cursor.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum SortValue {
    #[serde(rename = "i")]
    Int(i64),
    #[serde(rename = "t")]
    Time(DateTime<Utc>),
    #[serde(rename = "s")]
    Text(String),
    #[serde(rename = "r")]
    Real(f32),
}

/// A position in an ordered list of sessions: the place of the session with this key.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionKey {
    pub value: SortValue,
    pub id: Uuid,
}

impl SessionSort {
    /// The SQL expression sorted on. Never null (nulls are folded to the low end), so keyset
    /// comparisons stay correct; each has a matching (expression, id) index.
    fn expression(self) -> &'static str {
        match self {
            Self::CreatedAt => "created_at",
            Self::Status => "status",
            Self::AlertType => "alert_type",
            Self::Author => "coalesce(author, '')",
            Self::Duration => "coalesce(duration_ms, -1)",
            Self::UpdatedAt => "updated_at",
            Self::CompletedAt => "coalesce(completed_at, '0001-01-01 00:00:00+00')",
            Self::Relevance => "search_rank",
        }
    }

    /// The sort key of a listed session, computed exactly as [`Self::expression`] does in SQL.
    pub fn key_of(self, listed: &ListedSession) -> SessionKey {
        let row = &listed.session;
        let value = match self {
            Self::CreatedAt => SortValue::Time(row.created_at),
            Self::Status => SortValue::Text(db_name(row.status)),
            Self::AlertType => SortValue::Text(row.alert_type.clone()),
            Self::Author => SortValue::Text(row.author.clone().unwrap_or_default()),
            Self::Duration => SortValue::Int(row.duration_ms.unwrap_or(-1)),
            Self::UpdatedAt => SortValue::Time(row.updated_at),
            Self::CompletedAt => SortValue::Time(row.completed_at.unwrap_or_else(never_completed)),
            Self::Relevance => SortValue::Real(listed.search_rank.unwrap_or_default()),
        };
        SessionKey { value, id: row.id }
    }

    /// Whether a cursor value has the type this ordering compares with, and a value the
    /// database can compare (a forged cursor may hold anything).
    pub fn accepts(self, value: &SortValue) -> bool {
        match (self, value) {
            (Self::CreatedAt | Self::UpdatedAt | Self::CompletedAt, SortValue::Time(t)) => {
                storable_time(*t)
            }
            (Self::Relevance, SortValue::Real(r)) => r.is_finite(),
            (Self::Status | Self::AlertType | Self::Author, SortValue::Text(s)) => {
                !s.contains('\0')
            }
            (Self::Duration, SortValue::Int(_)) => true,
            _ => false,
        }
    }
}

/// ` AND (sort expression, id) <op> (key)`: a keyset bound, served by the (expression, id) index.
fn push_bound(qb: &mut QueryBuilder<'_, Postgres>, expr: &str, op: &str, key: &SessionKey) {
    qb.push(format_args!(" AND ({expr}, id) {op} ("));
    match &key.value {
        SortValue::Int(v) => qb.push_bind(*v),
        SortValue::Time(v) => qb.push_bind(*v),
        SortValue::Text(v) => qb.push_bind(v.clone()),
        SortValue::Real(v) => qb.push_bind(*v),
    };
    qb.push(", ").push_bind(key.id).push(")");
}

pub(super) fn push_filter(qb: &mut QueryBuilder<'_, Postgres>, filter: &SessionFilter) {
    qb.push(" WHERE TRUE");
    if !filter.include_deleted && filter.deleted_by.is_none() {
        qb.push(" AND deleted_at IS NULL");
    }
    if !filter.statuses.is_empty() {
        // One array parameter, however long the list (a parameter each would hit the limit).
        let names: Vec<String> = filter.statuses.iter().map(|s| db_name(*s)).collect();
        qb.push(" AND status = ANY(").push_bind(names).push(")");
    }
    if let Some(v) = &filter.alert_type {
        qb.push(" AND alert_type = ").push_bind(v.clone());
    }
    if let Some(v) = &filter.chain_id {
        qb.push(" AND chain_id = ").push_bind(v.clone());
    }
    if let Some(chain) = &filter.chain {
        qb.push(" AND chain_id = ")
            .push_bind(chain.name.clone())
            .push(" AND chain_version = ")
            .push_bind(chain.version.clone());
    }
    if let Some(v) = &filter.author {
        qb.push(" AND author = ").push_bind(v.clone());
    }
    if let Some(v) = filter.created_after {
        qb.push(" AND created_at > ").push_bind(v);
    }
    if let Some(v) = filter.created_before {
        qb.push(" AND created_at < ").push_bind(v);
    }
    if let Some(v) = &filter.created_by {
        qb.push(" AND created_by = ").push_bind(v.clone());
    }
    // From the status history: who moved the session to cancelling/cancelled, who deleted it.
    if let Some(v) = &filter.cancelled_by {
        qb.push(
            " AND EXISTS (SELECT 1 FROM session_status_changes h WHERE h.session_id = sessions.id \
               AND h.action = 'status_changed' AND h.to_status IN ('cancelling', 'cancelled') \
               AND h.actor = ",
        )
        .push_bind(v.clone())
        .push(")");
    }
    if let Some(v) = &filter.deleted_by {
        qb.push(
            " AND EXISTS (SELECT 1 FROM session_status_changes h WHERE h.session_id = sessions.id \
               AND h.action = 'deleted' AND h.actor = ",
        )
        .push_bind(v.clone())
        .push(")");
    }
    if let Some(json) = &filter.alert_data_contains {
        qb.push(" AND alert_data @> ").push_bind(json.clone());
    }
}

/// ` AND` the row's session (`{table}.session_id`) is not soft-deleted: a list of a table of
/// session records hides a deleted session's records with this. An anti-join probing each
/// listed row's session by primary key, so a list read along its own index stays on it.
pub(super) fn push_session_not_deleted(qb: &mut QueryBuilder<'_, Postgres>, table: &'static str) {
    qb.push(format_args!(
        " AND NOT EXISTS (SELECT 1 FROM sessions s \
           WHERE s.id = {table}.session_id AND s.deleted_at IS NOT NULL)"
    ));
}

/// With a search, `WITH ranked AS (…)`: every session it matches with its `search_rank` (see
/// [`super::search::push_ranked`]), a statement's first words. A page statement reads it up to
/// three times (the page and both of its ends), so it is written once and computed once.
pub(super) fn push_ranked_sessions(qb: &mut QueryBuilder<'_, Postgres>, filter: &SessionFilter) {
    if let Some(words) = &filter.search {
        qb.push("WITH ranked AS (");
        search::push_ranked(qb, words);
        qb.push(") ");
    }
}

/// `FROM` the sessions listed: the table, or with a search only the sessions it matches (from
/// [`push_ranked_sessions`]), each with its `search_rank`. Named `sessions` either way, so
/// filters and orders read the same.
pub(super) fn push_source(qb: &mut QueryBuilder<'_, Postgres>, filter: &SessionFilter) {
    qb.push(match filter.search {
        None => " FROM sessions",
        Some(_) => {
            " FROM (SELECT s.*, r.search_rank FROM sessions s \
               JOIN ranked r ON r.session_id = s.id) sessions"
        }
    });
}

/// How a stage and an execution relate to a session.
pub struct Membership {
    pub session_exists: bool,
    /// The stage, if one was named, is the session's.
    pub stage_in_session: bool,
    /// The stage of the execution named, if that execution is the session's.
    pub execution_stage: Option<Uuid>,
}

impl Store {
    /// Whether `session` exists, and how `stage` and `execution` relate to it.
    pub async fn membership(
        &self,
        session: Uuid,
        stage: Option<Uuid>,
        execution: Option<Uuid>,
    ) -> Result<Membership> {
        let (session_exists, stage_in_session, execution_stage) = sqlx::query_as(
            "SELECT EXISTS (SELECT 1 FROM sessions WHERE id = $1), \
                    $2::uuid IS NULL OR EXISTS (SELECT 1 FROM stages WHERE id = $2 AND session_id = $1), \
                    (SELECT stage_id FROM agent_executions WHERE id = $3 AND session_id = $1)",
        )
        .bind(session)
        .bind(stage)
        .bind(execution)
        .fetch_one(self.reader().await?.traced())
        .await?;
        Ok(Membership {
            session_exists,
            stage_in_session,
            execution_stage,
        })
    }

    /// One page of the sessions the filter matches, in the given order, in one statement: the
    /// page's rows (one more at its far end, see [`Slice::read`]) outer-joined to whether
    /// sessions lie at or before `after` and at or after `before`.
    pub async fn list_sessions(
        &self,
        filter: &SessionFilter,
        sort: SessionSort,
        descending: bool,
        slice: &Slice<SessionKey>,
    ) -> Result<Page<ListedSession>> {
        #[derive(FromRow)]
        struct Row {
            earlier: bool,
            later: bool,
            search_rank: Option<f32>,
            #[sqlx(flatten)]
            session: Joined<SessionRow>,
        }
        let mut qb = page_statement("", filter, sort, descending, slice);
        let rows: Vec<Row> = qb
            .build_query_as()
            .fetch_all(self.reader().await?.traced())
            .await?;
        let (earlier, later) = rows
            .first()
            .map_or((false, false), |r| (r.earlier, r.later));
        let sessions = rows
            .into_iter()
            .filter_map(|r| {
                let search_rank = r.search_rank;
                r.session.0.map(|session| ListedSession {
                    session,
                    search_rank,
                })
            })
            .collect();
        Ok(Page::new(sessions, slice, earlier, later))
    }

    /// How PostgreSQL reads a page of sessions: `EXPLAIN` of the very statement, for checking
    /// that indexes serve the filter and order.
    pub async fn explain_list_sessions(
        &self,
        filter: &SessionFilter,
        sort: SessionSort,
        descending: bool,
        slice: &Slice<SessionKey>,
    ) -> Result<String> {
        self.explain(page_statement("EXPLAIN ", filter, sort, descending, slice))
            .await
    }

    /// How many sessions match the filter.
    pub async fn count_sessions(&self, filter: &SessionFilter) -> Result<i64> {
        let mut qb = QueryBuilder::<Postgres>::new("");
        push_ranked_sessions(&mut qb, filter);
        qb.push("SELECT count(*)");
        push_source(&mut qb, filter);
        push_filter(&mut qb, filter);
        Ok(qb
            .build_query_scalar()
            .fetch_one(self.reader().await?.traced())
            .await?)
    }
}

/// The statement of [`Store::list_sessions`], after `prefix`.
fn page_statement<'a>(
    prefix: &str,
    filter: &'a SessionFilter,
    sort: SessionSort,
    descending: bool,
    slice: &'a Slice<SessionKey>,
) -> QueryBuilder<'a, Postgres> {
    let expr = sort.expression();
    // Comparisons in list order ("precedes", "follows"), and the directions along it and
    // against it. A page from the end is read against it, so LIMIT takes the rows next to
    // `before`.
    let (precedes, follows, along, against) = if descending {
        (">", "<", "DESC", "ASC")
    } else {
        ("<", ">", "ASC", "DESC")
    };
    let read = if slice.from_end { against } else { along };
    let mut qb = QueryBuilder::<Postgres>::new(prefix);
    push_ranked_sessions(&mut qb, filter);
    qb.push("SELECT ");
    // Whether a session lies on either side: the nearest one, read along the index.
    // Uncorrelated, so each is read once per statement, not once per row. (Not EXISTS: the
    // planner drops its ORDER BY and LIMIT, and may then scan the whole table for a row
    // that is not there.)
    for (key, op, towards, name) in [
        (&slice.after, precedes, against, "earlier"),
        (&slice.before, follows, along, "later"),
    ] {
        match key {
            Some(key) => {
                qb.push("(SELECT TRUE");
                push_source(&mut qb, filter);
                push_filter(&mut qb, filter);
                push_bound(&mut qb, expr, &format!("{op}="), key);
                qb.push(format_args!(
                    " ORDER BY {expr} {towards}, id {towards} LIMIT 1) IS NOT NULL"
                ));
            }
            None => {
                qb.push("FALSE");
            }
        }
        qb.push(format_args!(" AS {name}, "));
    }
    let rank = if filter.search.is_some() {
        "search_rank"
    } else {
        "NULL::real AS search_rank"
    };
    qb.push(format_args!(
        "p.* FROM (VALUES (1)) AS one LEFT JOIN (SELECT {SESSION_COLUMNS}, {rank}"
    ));
    push_source(&mut qb, filter);
    push_filter(&mut qb, filter);
    if let Some(key) = &slice.after {
        push_bound(&mut qb, expr, follows, key);
    }
    if let Some(key) = &slice.before {
        push_bound(&mut qb, expr, precedes, key);
    }
    qb.push(format_args!(" ORDER BY {expr} {read}, id {read} LIMIT "))
        .push_bind(slice.read())
        .push(format_args!(
            ") p ON TRUE ORDER BY {expr} {along}, id {along}"
        ));
    qb
}

#[cfg(test)]
mod tests {
    use super::{SessionSort, SortValue};

    #[test]
    fn cursor_values_the_database_cannot_compare_are_not_accepted() {
        let value = |json: &str| serde_json::from_str::<SortValue>(json).unwrap();
        let ancient = value(r#"{"t": "-200000-01-01T00:00:00Z"}"#);
        assert!(!SessionSort::CreatedAt.accepts(&ancient));
        assert!(SessionSort::CreatedAt.accepts(&value(r#"{"t": "-4713-11-24T00:00:00Z"}"#)));
        assert!(!SessionSort::Author.accepts(&value(r#"{"s": "a\u0000"}"#)));
        assert!(SessionSort::Duration.accepts(&value(&format!(r#"{{"i": {}}}"#, i64::MIN))));
    }
}
