-- no-transaction
-- `tool_calls` (execution_id, call_id), keyed with its session: built without blocking writes, swapped in
-- by a later migration. A failed build leaves an invalid index; drop it before starting again:
--   DROP INDEX CONCURRENTLY tool_calls_execution_id_call_id_session_id_pkey;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS tool_calls_execution_id_call_id_session_id_pkey
    ON tool_calls (execution_id, call_id, session_id);
