-- no-transaction
-- Notifications across sessions, newest first (an operator's "what failed to deliver" view,
-- the root `notifications` list). Built without blocking writes; after a failed build, drop the
-- invalid index first:
--   DROP INDEX CONCURRENTLY notifications_time_idx;
CREATE INDEX CONCURRENTLY IF NOT EXISTS notifications_time_idx
    ON notifications (created_at, id);
