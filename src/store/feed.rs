//! The dashboard feed: every session's status changes (and creations, deletes, restores) in one
//! durable order, positions 1, 2, 3, … in commit order, kept in `session_feed` apart from the
//! sessions' own histories (see `migrations/0054_session_feed.sql` and `docs/scale-out.md`).

use super::{SessionStatusChangeRow, Store};
use crate::error::Result;

impl Store {
    /// Up to `limit` entries of the feed after `after`, in order.
    pub async fn feed_after(&self, after: i64, limit: i64) -> Result<Vec<SessionStatusChangeRow>> {
        Ok(sqlx::query_as(
            "SELECT c.id, c.session_id, c.action, c.from_status, c.to_status, c.actor, c.reason, \
                    c.changed_at, f.position AS feed_position \
             FROM session_feed f \
             JOIN session_status_changes c ON c.id = f.change_id AND c.session_id = f.session_id \
             WHERE f.position > $1 ORDER BY f.position LIMIT $2",
        )
        .bind(after)
        .bind(limit)
        .fetch_all(self.reader().await?.traced())
        .await?)
    }

    /// The feed's latest position (0 when it is empty).
    pub async fn last_feed_position(&self) -> Result<i64> {
        Ok(
            sqlx::query_scalar("SELECT coalesce(max(position), 0) FROM session_feed")
                .fetch_one(self.reader().await?.traced())
                .await?,
        )
    }
}
