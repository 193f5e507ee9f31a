//! Reads of notifications.

use std::collections::HashMap;
use std::sync::Arc;

use uuid::Uuid;

use super::{NotificationRow, Store, group_by};
use crate::error::Result;

impl Store {
    /// Notifications of each session, oldest first.
    pub async fn notifications_by_session(
        &self,
        ids: &[Uuid],
    ) -> Result<HashMap<Uuid, Vec<Arc<NotificationRow>>>> {
        let rows: Vec<NotificationRow> = sqlx::query_as(
            "SELECT * FROM notifications WHERE session_id = ANY($1) \
             ORDER BY session_id, created_at, id",
        )
        .bind(ids)
        .fetch_all(self.reader().await?.traced())
        .await?;
        Ok(group_by(ids, rows, |r| r.session_id))
    }
}
