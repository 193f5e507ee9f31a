-- Keys that distribute (0021 to 0057): every session-owned table's primary key, unique keys and
-- foreign keys between session-owned tables contain `session_id`, the column a distributed
-- PostgreSQL (Citus) shards by and PostgreSQL's own partitioning needs in every unique key
-- (docs/scale-out.md). New unique indexes are built concurrently, each in its own migration
-- (sqlx runs a file as one statement batch, and `CREATE INDEX CONCURRENTLY` must run alone);
-- each table's keys are then swapped in one short transaction that gives up after
-- `lock_timeout` rather than queue every reader behind it; the foreign keys re-added there are
-- validated last, without blocking writes.
--
-- First, the streamed chunks learn their session. Binaries from before this migration insert
-- chunks without it (a rolling upgrade): a trigger fills it in from the event, only then.
ALTER TABLE timeline_event_chunks ADD COLUMN session_id uuid;

CREATE FUNCTION timeline_event_chunk_session() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.session_id := (SELECT session_id FROM timeline_events WHERE id = NEW.event_id);
    RETURN NEW;
END $$;

CREATE TRIGGER timeline_event_chunk_session BEFORE INSERT ON timeline_event_chunks
    FOR EACH ROW WHEN (NEW.session_id IS NULL) EXECUTE FUNCTION timeline_event_chunk_session();

-- The one-statement append stores the chunk with its session (read with the event anyway).
CREATE OR REPLACE FUNCTION append_timeline_chunk(event uuid, start_at bigint, delta text,
                                                 max_length bigint)
RETURNS TABLE (status text, length bigint, stored boolean)
LANGUAGE plpgsql AS $$
DECLARE
    folded bigint;
    session uuid;
BEGIN
    PERFORM pg_advisory_xact_lock(stream_lock_key(event));
    SELECT e.status, char_length(e.content), e.session_id INTO status, folded, session
    FROM timeline_events e WHERE e.id = event;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    length := coalesce((SELECT c.start_offset + char_length(c.content)
                        FROM timeline_event_chunks c WHERE c.event_id = event
                        ORDER BY c.start_offset DESC LIMIT 1), folded);
    stored := status = 'streaming' AND start_at = length
              AND length + char_length(delta) <= max_length;
    IF stored THEN
        INSERT INTO timeline_event_chunks (event_id, start_offset, content, session_id)
        VALUES (event, length, delta, session);
    END IF;
    RETURN NEXT;
END $$;
