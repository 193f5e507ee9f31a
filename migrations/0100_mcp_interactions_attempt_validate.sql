-- The check 0098 added NOT VALID was enforced on every row written since; this checks the rows
-- from before (each holds the default attempt 1, so they pass). Validation reads
-- `mcp_interactions` under SHARE UPDATE EXCLUSIVE, which lets reads and writes go on.
ALTER TABLE mcp_interactions VALIDATE CONSTRAINT mcp_interactions_attempt_check;
