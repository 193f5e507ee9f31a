-- no-transaction
-- Binaries from before 0054 read the feed by `session_status_changes.feed_position` during a
-- rolling upgrade; a plain index serves them once the unique one goes (0056). A failed build
-- leaves an invalid index; drop it before starting again:
--   DROP INDEX CONCURRENTLY session_status_changes_feed_position_idx;
CREATE INDEX CONCURRENTLY IF NOT EXISTS session_status_changes_feed_position_idx
    ON session_status_changes (feed_position);
