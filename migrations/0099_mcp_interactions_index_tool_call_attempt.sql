-- no-transaction
-- `mcp_interactions`: one interaction per attempt at a requested call (0098), keyed with its
-- session, the call's attempts in order. Built without blocking writes. A failed build leaves an
-- invalid index; drop it before starting again:
--   DROP INDEX CONCURRENTLY mcp_interactions_tool_call_attempt_key;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS mcp_interactions_tool_call_attempt_key
    ON mcp_interactions (execution_id, tool_call_id, session_id, attempt);
