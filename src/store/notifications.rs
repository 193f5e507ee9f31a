//! Reads of notifications: a session's, and the list across sessions.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use sqlx::{Postgres, QueryBuilder};
use uuid::Uuid;

use super::page::{NewestFirst, Page, Slice};
use super::sessions::push_session_not_deleted;
use super::{NotificationRow, RecordKey, Store, group_by};
use crate::error::Result;
use crate::model::{NotificationStatus, NotificationType};

impl Store {
    /// Notifications of each session, oldest first.
    pub async fn notifications_by_session(
        &self,
        ids: &[Uuid],
    ) -> Result<HashMap<Uuid, Vec<Arc<NotificationRow>>>> {
        let rows: Vec<NotificationRow> = sqlx::query_as(concat!(
            "SELECT n.* FROM ",
            per_session!("SELECT * FROM notifications WHERE session_id = k.session_id"),
            " n ORDER BY n.session_id, n.created_at, n.id"
        ))
        .bind(ids)
        .fetch_all(self.reader().await?.traced())
        .await?;
        Ok(group_by(ids, rows, |r| r.session_id))
    }
}

/// Which notifications to list across sessions; all given conditions hold. Each single filter
/// reads its own index in list order (`migrations/0081`–`0084`); together, the session's
/// index, then the status's.
#[derive(Debug, Clone, Default)]
pub struct NotificationFilter {
    pub status: Option<NotificationStatus>,
    pub notification_type: Option<NotificationType>,
    pub session_id: Option<Uuid>,
    pub created_after: Option<DateTime<Utc>>,
    pub created_before: Option<DateTime<Utc>>,
    /// Include the notifications of soft-deleted sessions.
    pub include_deleted: bool,
}

impl Store {
    /// A page of the notifications matching `filter`, newest first (ties by id, descending).
    pub async fn list_notifications(
        &self,
        filter: &NotificationFilter,
        slice: &Slice<RecordKey>,
    ) -> Result<Page<NotificationRow>> {
        NEWEST_FIRST
            .fetch(self, &|qb| push_filter(qb, filter), slice)
            .await
    }

    /// How many notifications match `filter`.
    pub async fn count_notifications(&self, filter: &NotificationFilter) -> Result<i64> {
        NEWEST_FIRST
            .count(self, &|qb| push_filter(qb, filter))
            .await
    }

    /// How PostgreSQL reads a page: `EXPLAIN` of the very statement, for checking that an
    /// index serves each filter.
    pub async fn explain_notifications(
        &self,
        filter: &NotificationFilter,
        slice: &Slice<RecordKey>,
    ) -> Result<String> {
        NEWEST_FIRST
            .explain(self, &|qb| push_filter(qb, filter), slice)
            .await
    }
}

/// The list's order: newest first.
const NEWEST_FIRST: NewestFirst = NewestFirst {
    table: "notifications",
    columns: "*",
    at: "created_at",
};

/// The filter's conditions (a deleted session's notifications are left out by its key).
fn push_filter(qb: &mut QueryBuilder<'_, Postgres>, filter: &NotificationFilter) {
    qb.push(" WHERE TRUE");
    if let Some(status) = filter.status {
        qb.push(" AND status = ").push_bind(status);
    }
    if let Some(notification_type) = filter.notification_type {
        qb.push(" AND type = ").push_bind(notification_type);
    }
    if let Some(session) = filter.session_id {
        qb.push(" AND session_id = ").push_bind(session);
    }
    if let Some(after) = filter.created_after {
        qb.push(" AND created_at > ").push_bind(after);
    }
    if let Some(before) = filter.created_before {
        qb.push(" AND created_at < ").push_bind(before);
    }
    if !filter.include_deleted {
        push_session_not_deleted(qb, "notifications");
    }
}
