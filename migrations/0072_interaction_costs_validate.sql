-- The checks 0071 added NOT VALID were enforced on every row written since; this checks the rows
-- from before (all NULL in the new columns, so they pass). Validation reads `llm_interactions`
-- under SHARE UPDATE EXCLUSIVE, which lets reads and writes go on.
ALTER TABLE llm_interactions VALIDATE CONSTRAINT llm_interactions_cached_input_tokens_check;
ALTER TABLE llm_interactions VALIDATE CONSTRAINT llm_interactions_cost_source_check;
ALTER TABLE llm_interactions VALIDATE CONSTRAINT llm_interactions_priced_check;
