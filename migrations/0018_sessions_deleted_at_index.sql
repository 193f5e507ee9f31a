-- no-transaction
-- Retention selects soft-deleted sessions by when they were deleted (finished ones go by
-- `sessions_completed_at_idx`). Built without blocking writes; after a failed build, drop the
-- invalid index (`DROP INDEX CONCURRENTLY sessions_deleted_at_idx`) before starting again.
CREATE INDEX CONCURRENTLY IF NOT EXISTS sessions_deleted_at_idx ON sessions (deleted_at)
    WHERE deleted_at IS NOT NULL;
