-- no-transaction
-- `tool_calls` (message_id, position), keyed with its session: built without blocking writes, swapped in
-- by a later migration. A failed build leaves an invalid index; drop it before starting again:
--   DROP INDEX CONCURRENTLY tool_calls_message_id_position_session_id_key;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS tool_calls_message_id_position_session_id_key
    ON tool_calls (message_id, position, session_id);
