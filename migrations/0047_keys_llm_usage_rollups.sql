-- `llm_usage_rollups` keyed by (execution_id, model_name, session_id), and the trigger that keeps
-- it upserts on that key (in the same transaction: an upsert needs its exact key).
SET LOCAL lock_timeout = '5s';
-- Adding a key on an index renames the index to the key's name, which is the point: no notice.
SET LOCAL client_min_messages = warning;
ALTER TABLE llm_usage_rollups
    DROP CONSTRAINT llm_usage_rollups_pkey,
    ADD CONSTRAINT llm_usage_rollups_pkey
        PRIMARY KEY USING INDEX llm_usage_rollups_execution_id_model_name_session_id_pkey;

CREATE OR REPLACE FUNCTION roll_up_llm_usage() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO llm_usage_rollups AS r
    SELECT a.execution_id, a.model_name, e.session_id, e.stage_id, e.agent_name, e.llm_provider,
           count(*), count(*) FILTER (WHERE a.error_message IS NOT NULL),
           coalesce(sum(a.input_tokens), 0), coalesce(sum(a.output_tokens), 0),
           coalesce(sum(a.total_tokens), 0), coalesce(sum(a.thinking_tokens), 0),
           coalesce(sum(a.estimated_cost_usd), 0)
    FROM added a JOIN agent_executions e ON e.id = a.execution_id AND e.session_id = a.session_id
    GROUP BY a.execution_id, a.model_name, e.session_id, e.stage_id, e.agent_name, e.llm_provider
    ON CONFLICT (execution_id, model_name, session_id) DO UPDATE SET
        calls = r.calls + excluded.calls,
        failed_calls = r.failed_calls + excluded.failed_calls,
        input_tokens = r.input_tokens + excluded.input_tokens,
        output_tokens = r.output_tokens + excluded.output_tokens,
        total_tokens = r.total_tokens + excluded.total_tokens,
        thinking_tokens = r.thinking_tokens + excluded.thinking_tokens,
        estimated_cost_usd = r.estimated_cost_usd + excluded.estimated_cost_usd;
    RETURN NULL;
END
$$;
