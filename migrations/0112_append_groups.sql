-- Single appends stored in groups (src/store/write/append_groups.rs): one statement, one
-- commit for the appends that arrive together, each stored when it lands where its event's
-- text ends, as `append_timeline_chunk` (0009, 0021) decides one. Answers, for each append in
-- the order given, whether it was stored; an append not stored is decided alone by the caller.
-- The caller sends at most one append per event.
--
-- Locks: the group's streams in key order first (held to commit), then its chunks go in in the
-- order of their sessions' event-order keys, the order the deferred `record_session_event`
-- triggers then take those locks in at commit: groups in flight together lock in one order.
CREATE FUNCTION append_timeline_chunks(events uuid[], starts bigint[], deltas text[],
                                       max_length bigint)
RETURNS TABLE (stored boolean)
LANGUAGE plpgsql AS $$
DECLARE
    stream bigint;
BEGIN
    FOREACH stream IN ARRAY (SELECT array_agg(DISTINCT stream_lock_key(e) ORDER BY stream_lock_key(e))
                             FROM unnest(events) AS e)
    LOOP
        PERFORM pg_advisory_xact_lock(stream);
    END LOOP;
    RETURN QUERY
    WITH input AS (
        SELECT i.event, i.start_at, i.delta, i.ord
        FROM unnest(events, starts, deltas) WITH ORDINALITY AS i (event, start_at, delta, ord)
    ), decided AS (
        SELECT i.ord, i.event, i.delta, s.session_id, s.length,
               s.status = 'streaming' AND i.start_at = s.length
                   AND s.length + char_length(i.delta) <= max_length AS ok
        FROM input i
        LEFT JOIN LATERAL (
            SELECT e.session_id, e.status,
                   coalesce((SELECT c.start_offset + char_length(c.content)
                             FROM timeline_event_chunks c
                             WHERE c.event_id = e.id AND c.session_id = e.session_id
                             ORDER BY c.start_offset DESC LIMIT 1),
                            char_length(e.content))::bigint AS length
            FROM timeline_events e WHERE e.id = i.event
        ) s ON true
    ), inserted AS (
        INSERT INTO timeline_event_chunks (event_id, start_offset, content, session_id)
        SELECT d.event, d.length, d.delta, d.session_id FROM decided d WHERE d.ok
        ORDER BY session_events_lock_key(d.session_id), d.session_id
    )
    SELECT coalesce(d.ok, false) FROM decided d ORDER BY d.ord;
END $$;
