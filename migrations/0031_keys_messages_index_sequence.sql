-- no-transaction
-- `messages` (execution_id, sequence_number), keyed with its session: built without blocking writes, swapped in
-- by a later migration. A failed build leaves an invalid index; drop it before starting again:
--   DROP INDEX CONCURRENTLY messages_execution_id_sequence_number_session_id_key;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS messages_execution_id_sequence_number_session_id_key
    ON messages (execution_id, sequence_number, session_id);
