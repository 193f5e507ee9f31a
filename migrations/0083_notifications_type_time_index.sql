-- no-transaction
-- The root `notifications` list of one type, newest first. Built without blocking writes;
-- after a failed build, drop the invalid index first:
--   DROP INDEX CONCURRENTLY notifications_type_time_idx;
CREATE INDEX CONCURRENTLY IF NOT EXISTS notifications_type_time_idx
    ON notifications (type, created_at, id);
