-- no-transaction
-- `timeline_event_chunks` (event_id, start_offset), keyed with its session: built without blocking writes, swapped in
-- by a later migration. A failed build leaves an invalid index; drop it before starting again:
--   DROP INDEX CONCURRENTLY timeline_event_chunks_event_id_start_offset_session_id_pkey;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS timeline_event_chunks_event_id_start_offset_session_id_pkey
    ON timeline_event_chunks (event_id, start_offset, session_id);
