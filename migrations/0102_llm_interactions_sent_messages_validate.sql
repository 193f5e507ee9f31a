-- The check 0101 added NOT VALID was enforced on every row written since; the rows from before
-- hold NULL there and pass it. Validation reads `llm_interactions` under SHARE UPDATE EXCLUSIVE,
-- which lets reads and writes go on.
ALTER TABLE llm_interactions VALIDATE CONSTRAINT llm_interactions_sent_message_ids_check;
