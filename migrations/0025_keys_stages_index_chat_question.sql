-- no-transaction
-- `stages` (chat_user_message_id), keyed with its session: built without blocking writes, swapped in
-- by a later migration. A failed build leaves an invalid index; drop it before starting again:
--   DROP INDEX CONCURRENTLY stages_chat_user_message_session_idx;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS stages_chat_user_message_session_idx
    ON stages (chat_user_message_id, session_id) WHERE chat_user_message_id IS NOT NULL;
