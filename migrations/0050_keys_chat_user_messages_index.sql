-- no-transaction
-- `chat_user_messages` (id), keyed with its session: built without blocking writes, swapped in
-- by a later migration. A failed build leaves an invalid index; drop it before starting again:
--   DROP INDEX CONCURRENTLY chat_user_messages_id_session_id_pkey;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS chat_user_messages_id_session_id_pkey
    ON chat_user_messages (id, session_id);
