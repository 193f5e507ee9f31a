-- Costs are summed per session, stage and execution. As binary floating point those sums carry
-- noise (0.01 + 0.03 = 0.04000000000000001); as decimals they are exact. Ten decimal places
-- keep a ten-billionth of a dollar, far below any per-token price.
ALTER TABLE llm_interactions
    ALTER COLUMN estimated_cost_usd TYPE numeric(20, 10)
    USING estimated_cost_usd::numeric(20, 10);
