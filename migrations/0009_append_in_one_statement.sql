-- An append in one statement. Nearly every append is an agent's next tokens, landing where the
-- stored text ends; taking the stream's lock, reading where it ends and inserting the chunk in
-- one call saves a writer three round trips, and outside a transaction the call commits on its
-- own. Statements in a (volatile) function each see what committed before them, so the reads
-- after the lock see every earlier append to the stream.

-- The key a stream's appends are serialized under: the low 64 bits of the event's id, as
-- casefile's `stream_key` computes it (random in a UUIDv7; a rare collision only makes two
-- streams take turns).
CREATE FUNCTION stream_lock_key(event uuid) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ('x' || encode(substring(uuid_send(event) FROM 9 FOR 8), 'hex'))::bit(64)::bigint
$$;

-- Locks the event's stream (until the transaction ends) and stores `delta` when it starts where
-- the stored text ends, the event is streaming and its text stays within `max_length`
-- characters. Returns the event's status, where its text ended before this call, and whether
-- the chunk was stored; no row when the event does not exist. Whatever it did not store
-- (a retry, an overlap, a gap, a finished event) the caller decides on, still under the lock.
CREATE FUNCTION append_timeline_chunk(event uuid, start_at bigint, delta text, max_length bigint)
RETURNS TABLE (status text, length bigint, stored boolean)
LANGUAGE plpgsql AS $$
DECLARE
    folded bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(stream_lock_key(event));
    SELECT e.status, char_length(e.content) INTO status, folded
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
        INSERT INTO timeline_event_chunks (event_id, start_offset, content)
        VALUES (event, length, delta);
    END IF;
    RETURN NEXT;
END $$;
