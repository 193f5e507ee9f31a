-- Every chunk now has its session. A validated check lets `SET NOT NULL` skip its scan, so the
-- table is locked exclusively only for the catalog change; the check goes once it has served.
SET LOCAL lock_timeout = '5s';
ALTER TABLE timeline_event_chunks
    ADD CONSTRAINT timeline_event_chunks_session_id_not_null CHECK (session_id IS NOT NULL) NOT VALID;
ALTER TABLE timeline_event_chunks VALIDATE CONSTRAINT timeline_event_chunks_session_id_not_null;
ALTER TABLE timeline_event_chunks ALTER COLUMN session_id SET NOT NULL;
ALTER TABLE timeline_event_chunks DROP CONSTRAINT timeline_event_chunks_session_id_not_null;
