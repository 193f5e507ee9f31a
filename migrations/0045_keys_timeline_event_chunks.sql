-- `timeline_event_chunks` keyed by (event_id, start_offset, session_id).
SET LOCAL lock_timeout = '5s';
-- Adding a key on an index renames the index to the key's name, which is the point: no notice.
SET LOCAL client_min_messages = warning;
ALTER TABLE timeline_event_chunks
    DROP CONSTRAINT timeline_event_chunks_pkey,
    ADD CONSTRAINT timeline_event_chunks_pkey
        PRIMARY KEY USING INDEX timeline_event_chunks_event_id_start_offset_session_id_pkey;
