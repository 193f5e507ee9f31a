-- no-transaction
-- The feed's positions are unique in `session_feed` now; this global unique key would keep the
-- status history from being distributed by session.
DROP INDEX CONCURRENTLY IF EXISTS session_status_changes_feed_idx;
