-- no-transaction
-- `timeline_events` (id), keyed with its session: built without blocking writes, swapped in
-- by a later migration. A failed build leaves an invalid index; drop it before starting again:
--   DROP INDEX CONCURRENTLY timeline_events_id_session_id_pkey;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS timeline_events_id_session_id_pkey
    ON timeline_events (id, session_id);
