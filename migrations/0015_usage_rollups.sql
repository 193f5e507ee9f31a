-- Usage roll-ups for analytics: the LLM interactions of each agent execution, summed per model.
--
-- A dashboard's usage figures (tokens, cost, calls, failures by model, provider or agent over a
-- month of sessions) would otherwise read every interaction of every session it covers; an
-- agent makes many calls, each row wide with its request and response. One row per execution
-- and model is what those figures need; it carries the execution's agent and provider (which
-- an execution never changes), so grouping by them reads this table and the sessions alone.
-- It is kept in the transaction that records the interaction (a statement trigger over the
-- rows inserted), so it is never behind them, and it goes with its execution.
CREATE TABLE llm_usage_rollups (
    execution_id       uuid NOT NULL,
    model_name         text NOT NULL,
    session_id         uuid NOT NULL,
    stage_id           uuid NOT NULL,
    agent_name         text NOT NULL,
    llm_provider       text,
    calls              bigint NOT NULL,
    -- Interactions that recorded an error.
    failed_calls       bigint NOT NULL,
    input_tokens       bigint NOT NULL,
    output_tokens      bigint NOT NULL,
    total_tokens       bigint NOT NULL,
    thinking_tokens    bigint NOT NULL,
    estimated_cost_usd numeric(30, 10) NOT NULL,
    PRIMARY KEY (execution_id, model_name),
    FOREIGN KEY (execution_id, stage_id, session_id)
        REFERENCES agent_executions (id, stage_id, session_id) ON DELETE CASCADE
);
CREATE INDEX llm_usage_rollups_session_idx ON llm_usage_rollups (session_id);

-- Interactions are only ever inserted (never updated, deleted only with their session), so
-- adding each statement's rows, grouped, keeps the sums exact. Grouped first, because one
-- upsert may not touch a row twice.
CREATE FUNCTION roll_up_llm_usage() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO llm_usage_rollups AS r
    SELECT a.execution_id, a.model_name, e.session_id, e.stage_id, e.agent_name, e.llm_provider,
           count(*), count(*) FILTER (WHERE a.error_message IS NOT NULL),
           coalesce(sum(a.input_tokens), 0), coalesce(sum(a.output_tokens), 0),
           coalesce(sum(a.total_tokens), 0), coalesce(sum(a.thinking_tokens), 0),
           coalesce(sum(a.estimated_cost_usd), 0)
    FROM added a JOIN agent_executions e ON e.id = a.execution_id
    GROUP BY a.execution_id, a.model_name, e.session_id, e.stage_id, e.agent_name, e.llm_provider
    ON CONFLICT (execution_id, model_name) DO UPDATE SET
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

-- ALWAYS, as the search documents: a roll-up is part of the rows it sums, bulk loads included.
CREATE TRIGGER roll_up_llm_usage AFTER INSERT ON llm_interactions
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION roll_up_llm_usage();
ALTER TABLE llm_interactions ENABLE ALWAYS TRIGGER roll_up_llm_usage;

INSERT INTO llm_usage_rollups
SELECT a.execution_id, a.model_name, e.session_id, e.stage_id, e.agent_name, e.llm_provider,
       count(*), count(*) FILTER (WHERE a.error_message IS NOT NULL),
       coalesce(sum(a.input_tokens), 0), coalesce(sum(a.output_tokens), 0),
       coalesce(sum(a.total_tokens), 0), coalesce(sum(a.thinking_tokens), 0),
       coalesce(sum(a.estimated_cost_usd), 0)
FROM llm_interactions a JOIN agent_executions e ON e.id = a.execution_id
GROUP BY a.execution_id, a.model_name, e.session_id, e.stage_id, e.agent_name, e.llm_provider;
