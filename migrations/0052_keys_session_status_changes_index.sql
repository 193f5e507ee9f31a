-- no-transaction
-- `session_status_changes` (id), keyed with its session: built without blocking writes, swapped in
-- by a later migration. A failed build leaves an invalid index; drop it before starting again:
--   DROP INDEX CONCURRENTLY session_status_changes_id_session_id_pkey;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS session_status_changes_id_session_id_pkey
    ON session_status_changes (id, session_id);
