-- no-transaction
-- Chunks stored before 0021 get their session, 10,000 at a time, each batch committed on its
-- own (chunks live only while their event streams, so there are few). Safe to run again.
DO $$
DECLARE
    filled bigint;
BEGIN
    LOOP
        UPDATE timeline_event_chunks c SET session_id = e.session_id
        FROM timeline_events e
        WHERE e.id = c.event_id
          AND (c.event_id, c.start_offset) IN (SELECT event_id, start_offset
                                               FROM timeline_event_chunks
                                               WHERE session_id IS NULL LIMIT 10000);
        GET DIAGNOSTICS filled = ROW_COUNT;
        EXIT WHEN filled = 0;
        COMMIT;
    END LOOP;
END $$;
