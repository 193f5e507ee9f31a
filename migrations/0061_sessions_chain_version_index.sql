-- no-transaction
-- The sessions that ran a chain version (impact analysis), newest first, read along an index.
-- Partial: sessions without a registered version (all from before 0060) are not in it. Built
-- without blocking writes; after a failed build, drop the invalid index first:
--   DROP INDEX CONCURRENTLY sessions_chain_version_idx;
CREATE INDEX CONCURRENTLY IF NOT EXISTS sessions_chain_version_idx
    ON sessions (chain_id, chain_version, created_at, id) WHERE chain_version IS NOT NULL;
