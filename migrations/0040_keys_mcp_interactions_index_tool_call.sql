-- no-transaction
-- `mcp_interactions` (execution_id, tool_call_id), keyed with its session: built without blocking writes, swapped in
-- by a later migration. A failed build leaves an invalid index; drop it before starting again:
--   DROP INDEX CONCURRENTLY mcp_interactions_tool_call_session_key;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS mcp_interactions_tool_call_session_key
    ON mcp_interactions (execution_id, tool_call_id, session_id);
