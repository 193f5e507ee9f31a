-- no-transaction
-- `agent_executions` (id), keyed with its session: built without blocking writes, swapped in
-- by a later migration. A failed build leaves an invalid index; drop it before starting again:
--   DROP INDEX CONCURRENTLY agent_executions_id_session_id_pkey;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS agent_executions_id_session_id_pkey
    ON agent_executions (id, session_id);
