-- Costs computed from the price list (0070), stored with each LLM interaction: the input and
-- output parts (their sum is `estimated_cost_usd`, the total), where the cost came from, and
-- the price used (a snapshot: later price changes never touch a stored cost).
--
-- `llm_interactions` is the largest table: every column is added nullable and without a
-- default, which changes only the catalog (no rewrite, no scan), and every CHECK is added
-- NOT VALID (enforced on new rows at once; 0072 validates the old rows without blocking
-- writes). Rows from before keep NULLs: their cost, if any, is the client's total.
SET LOCAL lock_timeout = '5s';

ALTER TABLE llm_interactions
    -- Part of `input_tokens` (read from a cache, billed at the cached-input price).
    ADD COLUMN cached_input_tokens integer,
    ADD COLUMN input_cost_usd numeric(20, 10),
    ADD COLUMN output_cost_usd numeric(20, 10),
    -- price_list: computed (split, with the snapshot); client: sent by the client, kept as
    -- sent; no_price: the model had no price in effect; no_tokens: nothing to price.
    ADD COLUMN cost_source text,
    ADD COLUMN pricing_snapshot jsonb;

ALTER TABLE llm_interactions
    ADD CONSTRAINT llm_interactions_cached_input_tokens_check
        CHECK (cached_input_tokens >= 0 AND cached_input_tokens <= input_tokens) NOT VALID,
    ADD CONSTRAINT llm_interactions_cost_source_check
        CHECK (cost_source IN ('price_list', 'client', 'no_price', 'no_tokens')) NOT VALID,
    ADD CONSTRAINT llm_interactions_priced_check
        CHECK (CASE cost_source
                 WHEN 'price_list' THEN pricing_snapshot IS NOT NULL
                                    AND input_cost_usd >= 0 AND output_cost_usd >= 0
                                    AND estimated_cost_usd = input_cost_usd + output_cost_usd
                 ELSE pricing_snapshot IS NULL AND input_cost_usd IS NULL
                      AND output_cost_usd IS NULL
               END) NOT VALID;

-- The roll-ups sum the parts too (a new column with a constant default is also catalog-only).
-- Rows from before have no split: their cost stays in `estimated_cost_usd` alone.
ALTER TABLE llm_usage_rollups
    ADD COLUMN cached_input_tokens bigint NOT NULL DEFAULT 0,
    ADD COLUMN input_cost_usd numeric(30, 10) NOT NULL DEFAULT 0,
    ADD COLUMN output_cost_usd numeric(30, 10) NOT NULL DEFAULT 0,
    -- Interactions whose model had no price in effect (and that the client did not cost).
    ADD COLUMN unpriced_calls bigint NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION roll_up_llm_usage() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO llm_usage_rollups AS r
        (execution_id, model_name, session_id, stage_id, agent_name, llm_provider, calls,
         failed_calls, input_tokens, output_tokens, total_tokens, thinking_tokens,
         estimated_cost_usd, cached_input_tokens, input_cost_usd, output_cost_usd,
         unpriced_calls)
    SELECT a.execution_id, a.model_name, e.session_id, e.stage_id, e.agent_name, e.llm_provider,
           count(*), count(*) FILTER (WHERE a.error_message IS NOT NULL),
           coalesce(sum(a.input_tokens), 0), coalesce(sum(a.output_tokens), 0),
           coalesce(sum(a.total_tokens), 0), coalesce(sum(a.thinking_tokens), 0),
           coalesce(sum(a.estimated_cost_usd), 0), coalesce(sum(a.cached_input_tokens), 0),
           coalesce(sum(a.input_cost_usd), 0), coalesce(sum(a.output_cost_usd), 0),
           count(*) FILTER (WHERE a.cost_source = 'no_price')
    FROM added a JOIN agent_executions e ON e.id = a.execution_id AND e.session_id = a.session_id
    GROUP BY a.execution_id, a.model_name, e.session_id, e.stage_id, e.agent_name, e.llm_provider
    ON CONFLICT (execution_id, model_name, session_id) DO UPDATE SET
        calls = r.calls + excluded.calls,
        failed_calls = r.failed_calls + excluded.failed_calls,
        input_tokens = r.input_tokens + excluded.input_tokens,
        output_tokens = r.output_tokens + excluded.output_tokens,
        total_tokens = r.total_tokens + excluded.total_tokens,
        thinking_tokens = r.thinking_tokens + excluded.thinking_tokens,
        estimated_cost_usd = r.estimated_cost_usd + excluded.estimated_cost_usd,
        cached_input_tokens = r.cached_input_tokens + excluded.cached_input_tokens,
        input_cost_usd = r.input_cost_usd + excluded.input_cost_usd,
        output_cost_usd = r.output_cost_usd + excluded.output_cost_usd,
        unpriced_calls = r.unpriced_calls + excluded.unpriced_calls;
    RETURN NULL;
END
$$;
