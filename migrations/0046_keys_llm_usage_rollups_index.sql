-- no-transaction
-- `llm_usage_rollups` (execution_id, model_name), keyed with its session: built without blocking writes, swapped in
-- by a later migration. A failed build leaves an invalid index; drop it before starting again:
--   DROP INDEX CONCURRENTLY llm_usage_rollups_execution_id_model_name_session_id_pkey;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS llm_usage_rollups_execution_id_model_name_session_id_pkey
    ON llm_usage_rollups (execution_id, model_name, session_id);
