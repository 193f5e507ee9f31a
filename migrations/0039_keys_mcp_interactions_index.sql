-- no-transaction
-- `mcp_interactions` (id), keyed with its session: built without blocking writes, swapped in
-- by a later migration. A failed build leaves an invalid index; drop it before starting again:
--   DROP INDEX CONCURRENTLY mcp_interactions_id_session_id_pkey;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS mcp_interactions_id_session_id_pkey
    ON mcp_interactions (id, session_id);
