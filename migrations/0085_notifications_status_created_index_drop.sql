-- no-transaction
-- `notifications_status_time_idx` (0082) serves what this index served, in the list's order.
-- Dropped without blocking reads or writes.
DROP INDEX CONCURRENTLY IF EXISTS notifications_status_created_idx;
