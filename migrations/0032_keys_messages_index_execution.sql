-- no-transaction
-- `messages` (id, execution_id), keyed with its session: built without blocking writes, swapped in
-- by a later migration. A failed build leaves an invalid index; drop it before starting again:
--   DROP INDEX CONCURRENTLY messages_id_execution_id_session_id_key;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS messages_id_execution_id_session_id_key
    ON messages (id, execution_id, session_id);
