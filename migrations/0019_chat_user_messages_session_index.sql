-- no-transaction
-- A session's delete cascades to its chat questions by `session_id`; without an index leading
-- with it, each deleted session would scan the table. Built without blocking writes; after a
-- failed build, drop the invalid index before starting again.
CREATE INDEX CONCURRENTLY IF NOT EXISTS chat_user_messages_session_idx
    ON chat_user_messages (session_id);
