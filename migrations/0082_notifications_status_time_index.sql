-- no-transaction
-- The root `notifications` list of one status, newest first (ties by id: it replaces
-- `notifications_status_created_idx`, which 0085 drops). Built without blocking writes; after a
-- failed build, drop the invalid index first:
--   DROP INDEX CONCURRENTLY notifications_status_time_idx;
CREATE INDEX CONCURRENTLY IF NOT EXISTS notifications_status_time_idx
    ON notifications (status, created_at, id);
