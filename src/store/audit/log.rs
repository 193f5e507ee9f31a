//! The audit trail as read: the admin's log across every record, and a session's own trail,
//! newest first, each filter along an index of its own (`migrations/0091`).

use chrono::{DateTime, Utc};
use sqlx::{FromRow, Postgres, QueryBuilder};
use uuid::Uuid;

use crate::error::Result;
use crate::store::page::{NewestFirst, Page, Slice};
use crate::store::{RawJson, Record, RecordKey, Store};

/// One audit record.
#[derive(Debug, Clone, FromRow, serde::Serialize, serde::Deserialize)]
pub struct AuditRecordRow {
    pub id: Uuid,
    pub at: DateTime<Utc>,
    pub actor: Option<String>,
    pub action: String,
    pub target_type: String,
    pub target_id: String,
    /// The session it belongs to (none: a chain, a price, a token, a claim, a purge).
    pub session_id: Option<Uuid>,
    pub request_id: Option<String>,
    pub client_address: Option<String>,
    pub user_agent: Option<String>,
    /// `[{field, before, after}]`.
    pub changes: RawJson,
}

/// Read as a session's children from its own table.
impl Record for AuditRecordRow {
    const TABLE: &'static str = "session_audit_records";
    const NAME: &'static str = "audit record";
    const COLUMNS: &'static str = COLUMNS;
    fn id(&self) -> Uuid {
        self.id
    }
    fn session(&self) -> Option<Uuid> {
        self.session_id
    }
}

const COLUMNS: &str = "id, at, actor, action, target_type, target_id, session_id, request_id, \
                       client_address, user_agent, changes";

/// Every record: the view over both tables, whose branches PostgreSQL reads along their
/// indexes and merges.
const EVERY_RECORD: NewestFirst = NewestFirst {
    table: "audit_log",
    columns: COLUMNS,
    at: "at",
};

/// A session's records: its own table, along `session_audit_records_session_at`.
const OF_SESSIONS: NewestFirst = NewestFirst {
    table: "session_audit_records",
    columns: COLUMNS,
    at: "at",
};

/// Which records the admin's log lists: those matching every condition given.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    pub actor: Option<String>,
    pub action: Option<String>,
    pub target_type: Option<String>,
    pub session_id: Option<Uuid>,
    /// Made at or after this instant.
    pub after: Option<DateTime<Utc>>,
    /// Made before this instant.
    pub before: Option<DateTime<Utc>>,
}

impl AuditFilter {
    /// The list it reads: a session's records are all in the session's table.
    fn list(&self) -> &'static NewestFirst {
        if self.session_id.is_some() {
            &OF_SESSIONS
        } else {
            &EVERY_RECORD
        }
    }
}

fn push_filter<'q>(qb: &mut QueryBuilder<'q, Postgres>, filter: &AuditFilter) {
    qb.push(" WHERE TRUE");
    if let Some(actor) = &filter.actor {
        qb.push(" AND actor = ").push_bind(actor.clone());
    }
    if let Some(action) = &filter.action {
        qb.push(" AND action = ").push_bind(action.clone());
    }
    if let Some(target_type) = &filter.target_type {
        qb.push(" AND target_type = ")
            .push_bind(target_type.clone());
    }
    if let Some(session) = filter.session_id {
        qb.push(" AND session_id = ").push_bind(session);
    }
    if let Some(after) = filter.after {
        qb.push(" AND at >= ").push_bind(after);
    }
    if let Some(before) = filter.before {
        qb.push(" AND at < ").push_bind(before);
    }
}

impl Store {
    /// A page of the records `filter` selects, newest first.
    pub async fn audit_log(
        &self,
        filter: &AuditFilter,
        slice: &Slice<RecordKey>,
    ) -> Result<Page<AuditRecordRow>> {
        filter
            .list()
            .fetch(self, &|qb| push_filter(qb, filter), slice)
            .await
    }

    /// How PostgreSQL reads that page (for the test that checks each filter's index).
    pub async fn explain_audit_log(
        &self,
        filter: &AuditFilter,
        slice: &Slice<RecordKey>,
    ) -> Result<String> {
        filter
            .list()
            .explain(self, &|qb| push_filter(qb, filter), slice)
            .await
    }
}
