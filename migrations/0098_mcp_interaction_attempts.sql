-- Retried tool calls (seed 003's `retry_count`): a requested call may be executed more than
-- once, each attempt an MCP interaction of its own with its own result, numbered from 1 in the
-- order recorded. An interaction that executes no requested call is attempt 1.
--
-- A column with a constant default changes only the catalog (no rewrite): every row from before
-- is its call's first attempt. The CHECK is added NOT VALID (enforced on new rows at once; the
-- rows from before hold the default, which passes it). The key of one interaction per call goes;
-- 0099 builds the key of one interaction per attempt without blocking writes (until it is built,
-- the writer, which numbers attempts under the session's lock, keeps them apart). Takes ACCESS
-- EXCLUSIVE on `mcp_interactions` for the catalog change only.
SET LOCAL lock_timeout = '5s';

ALTER TABLE mcp_interactions
    ADD COLUMN attempt integer NOT NULL DEFAULT 1,
    ADD CONSTRAINT mcp_interactions_attempt_check
        CHECK (attempt = 1 OR (attempt > 1 AND tool_call_id IS NOT NULL)) NOT VALID,
    DROP CONSTRAINT mcp_interactions_tool_call_key;
