-- no-transaction
-- The root `notifications` list of one session, newest first. Built without blocking writes;
-- after a failed build, drop the invalid index first:
--   DROP INDEX CONCURRENTLY notifications_session_time_idx;
CREATE INDEX CONCURRENTLY IF NOT EXISTS notifications_session_time_idx
    ON notifications (session_id, created_at, id);
