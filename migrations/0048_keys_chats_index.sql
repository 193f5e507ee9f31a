-- no-transaction
-- `chats` (id), keyed with its session: built without blocking writes, swapped in
-- by a later migration. A failed build leaves an invalid index; drop it before starting again:
--   DROP INDEX CONCURRENTLY chats_id_session_id_pkey;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS chats_id_session_id_pkey
    ON chats (id, session_id);
