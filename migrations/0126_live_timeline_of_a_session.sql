-- The live timeline (0119's view: a streaming event's text so far and when it last changed) is
-- defined once, as a function of its session: `timeline_events_live_of(owner)`. Its sub-selects
-- for a streaming event's text (chunks, the texts in the log, the log itself) name the session
-- by the argument where the view named it by each row's column. A reader that passes its
-- statement's parameter (`timeline_events_live_of($1)`) has every one of them pruned to the
-- session's partition (or shard) as the statement starts; through the view, each was prunable
-- only per row, so every statement set up a scan of every partition of five tables.
--
-- It is `LANGUAGE sql`, one SELECT, STABLE and not STRICT, so PostgreSQL inlines it into the
-- caller's plan: no statement of its own, which on a distributed database would be a query
-- issued from a shard (docs/scale-out.md).
--
-- The view stays, for readers with no session at hand and for binaries before this migration
-- (a rolling upgrade), and is now that function over each session: the same rows, the text
-- still defined once. Catalog only, instant.
SET LOCAL lock_timeout = '5s';

-- 0123's, with each table read named by `owner` itself rather than by the session of a row
-- already read: the first run read was found by a lateral sub-select that named
-- `f.session_id`, a value of the outer row, and so set up a scan of every partition of
-- `session_event_runs` (pruned only as it ran).
CREATE OR REPLACE FUNCTION logged_event_text(owner uuid, event uuid)
RETURNS TABLE (start_offset integer, end_offset integer, content text, "position" bigint,
               created_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT p.start_offset, p.end_offset, p.content, v.position, v.created_at
    FROM event_texts_in_log f
    JOIN session_events v ON v.session_id = owner AND v.position > f.after_position
    CROSS JOIN LATERAL logged_pieces(v) p
    WHERE f.session_id = owner AND f.event_id = logged_event_text.event
      AND v.kind = 'event_appended'
      AND ((v.delta IS NOT NULL AND v.entity_id = logged_event_text.event)
           OR (v.run_deltas IS NOT NULL AND logged_event_text.event = ANY (v.run_events)))
      AND p.event = logged_event_text.event
    UNION ALL
    SELECT a.start_offset, a.end_offset, a.delta, a.position, a.created_at
    FROM event_texts_in_log f
    -- The first run read, found by one probe; a lateral value, so that the runs after it are a
    -- range of the key (as a sub-select in the join's condition it was a filter on all the
    -- session's runs).
    CROSS JOIN LATERAL (SELECT coalesce(max(q.first_position), 0) AS first_position
                        FROM session_event_runs q
                        WHERE q.session_id = owner
                          AND q.first_position <= f.after_position + 1) b
    JOIN session_event_runs r
      ON r.session_id = owner AND r.first_position >= b.first_position
     -- Only the runs it is in are walked.
     AND logged_event_text.event = ANY (r.events)
    CROSS JOIN LATERAL run_appends(r.first_position, r.appends, r.created_at, r.events, r.log,
                                   r.appends) a
    WHERE f.session_id = owner AND f.event_id = logged_event_text.event
      AND a.event = logged_event_text.event AND a.position > f.after_position
$$;

CREATE FUNCTION timeline_events_live_of(owner uuid)
RETURNS TABLE (id uuid, session_id uuid, stage_id uuid, execution_id uuid, sequence_number bigint,
               event_type text, status text, content text, metadata jsonb,
               llm_interaction_id uuid, mcp_interaction_id uuid, created_at timestamptz,
               updated_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT e.id, e.session_id, e.stage_id, e.execution_id, e.sequence_number, e.event_type,
           e.status,
           CASE WHEN e.status = 'streaming'
                THEN e.content || coalesce(
                    (SELECT string_agg(p.content, '' ORDER BY p.start_offset)
                     FROM (SELECT c.start_offset, c.content
                           FROM timeline_event_chunks c
                           WHERE c.event_id = e.id AND c.session_id = owner
                           UNION ALL
                           SELECT l.start_offset, l.content
                           FROM logged_event_text(owner, e.id) l) p), '')
                ELSE e.content END,
           e.metadata, e.llm_interaction_id, e.mcp_interaction_id, e.created_at,
           -- The log's last text of the event is recent while it streams: read backwards, the
           -- search stops there (at its last fold when it has none since).
           CASE WHEN e.status = 'streaming'
                THEN greatest(e.updated_at,
                              (SELECT max(c.created_at) FROM timeline_event_chunks c
                               WHERE c.event_id = e.id AND c.session_id = owner),
                              (SELECT l.created_at FROM logged_event_text(owner, e.id) l
                               ORDER BY l.position DESC LIMIT 1))
                ELSE e.updated_at END
    FROM timeline_events e
    WHERE e.session_id = owner
$$;

CREATE OR REPLACE VIEW timeline_events_live AS
SELECT l.id, l.session_id, l.stage_id, l.execution_id, l.sequence_number, l.event_type,
       l.status, l.content, l.metadata, l.llm_interaction_id, l.mcp_interaction_id,
       l.created_at, l.updated_at
FROM sessions s
CROSS JOIN LATERAL timeline_events_live_of(s.id) l;

-- 0119's, reading the text it folds through the function of its session.
CREATE OR REPLACE FUNCTION finish_timeline_event(owner uuid, event uuid, final_status text,
                                                 final_content text, final_metadata jsonb,
                                                 llm uuid, mcp uuid)
RETURNS SETOF timeline_events
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM FROM sessions s WHERE s.id = owner FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- Before reading the text: no append lands between what is read and what is written.
    PERFORM pg_advisory_xact_lock(stream_lock_key(event));
    IF NOT EXISTS (SELECT FROM timeline_events e
                   WHERE e.id = event AND e.session_id = owner AND e.status = 'streaming')
       OR (llm IS NOT NULL AND NOT EXISTS (SELECT FROM llm_interactions i
                                           WHERE i.id = llm AND i.session_id = owner))
       OR (mcp IS NOT NULL AND NOT EXISTS (SELECT FROM mcp_interactions i
                                           WHERE i.id = mcp AND i.session_id = owner)) THEN
        RETURN;
    END IF;
    IF final_content IS NULL THEN
        SELECT l.content INTO final_content FROM timeline_events_live_of(owner) l
        WHERE l.id = event;
    END IF;
    DELETE FROM timeline_event_chunks c WHERE c.event_id = event AND c.session_id = owner;
    DELETE FROM streaming_event_ends x WHERE x.session_id = owner AND x.event_id = event;
    DELETE FROM event_texts_in_log f WHERE f.session_id = owner AND f.event_id = event;
    RETURN QUERY
    UPDATE timeline_events e
    SET status = final_status, content = final_content,
        metadata = coalesce(final_metadata, e.metadata),
        llm_interaction_id = coalesce(llm, e.llm_interaction_id),
        mcp_interaction_id = coalesce(mcp, e.mcp_interaction_id), updated_at = now()
    WHERE e.id = event AND e.session_id = owner
    RETURNING e.*;
END $$;
