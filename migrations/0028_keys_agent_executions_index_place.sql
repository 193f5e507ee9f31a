-- no-transaction
-- `agent_executions` (stage_id, agent_index), keyed with its session: built without blocking writes, swapped in
-- by a later migration. A failed build leaves an invalid index; drop it before starting again:
--   DROP INDEX CONCURRENTLY agent_executions_stage_id_agent_index_session_id_key;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS agent_executions_stage_id_agent_index_session_id_key
    ON agent_executions (stage_id, agent_index, session_id);
