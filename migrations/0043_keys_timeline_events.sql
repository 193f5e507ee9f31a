-- `timeline_events` keyed by (id, session_id); its streamed chunks point at it with their
-- session.
SET LOCAL lock_timeout = '5s';
-- Adding a key on an index renames the index to the key's name, which is the point: no notice.
SET LOCAL client_min_messages = warning;
ALTER TABLE timeline_event_chunks DROP CONSTRAINT timeline_event_chunks_event_id_fkey;
ALTER TABLE timeline_events
    DROP CONSTRAINT timeline_events_pkey,
    ADD CONSTRAINT timeline_events_pkey PRIMARY KEY USING INDEX timeline_events_id_session_id_pkey;
ALTER TABLE timeline_event_chunks ADD CONSTRAINT timeline_event_chunks_event_id_fkey
    FOREIGN KEY (event_id, session_id) REFERENCES timeline_events (id, session_id)
    ON DELETE CASCADE NOT VALID;
