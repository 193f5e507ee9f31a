//! The dashboard feed: every session's status changes (and creations, deletes, restores) in one
//! durable order, `feed_position` 1, 2, 3, … in commit order (see
//! `migrations/0008_session_events.sql`).

use super::{SessionStatusChangeRow, Store};
use crate::error::Result;

impl Store {
    /// Up to `limit` entries of the feed after `after`, in order.
    pub async fn feed_after(&self, after: i64, limit: i64) -> Result<Vec<SessionStatusChangeRow>> {
        Ok(sqlx::query_as(
            "SELECT * FROM session_status_changes WHERE feed_position > $1 \
             ORDER BY feed_position LIMIT $2",
        )
        .bind(after)
        .bind(limit)
        .fetch_all(self.reader().await?.traced())
        .await?)
    }

    /// The feed's latest position (0 when it is empty).
    pub async fn last_feed_position(&self) -> Result<i64> {
        Ok(
            sqlx::query_scalar(
                "SELECT coalesce(max(feed_position), 0) FROM session_status_changes",
            )
            .fetch_one(self.reader().await?.traced())
            .await?,
        )
    }
}
