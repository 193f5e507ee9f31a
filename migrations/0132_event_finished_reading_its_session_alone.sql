-- Finishing a streaming event reads its text (when the caller sends none) naming its session
-- as the statement's parameter, as the live timeline's reads do (0059, stop 69), rather than
-- through the view `timeline_events_live`, whose look-ups name the session of the event's row:
-- on the partitioned layout those are pruned only as they run, so every finish set up a scan of
-- every partition of the chunks, the log's records, its rows and its runs, and locked each.
-- `pg_stat_statements` over the ingest benchmark put the read at 1.9 ms a finish partitioned
-- by 4 against 0.9 ms plain. The same text: the event streams (checked just before, under its
-- stream), so the view's content is its content and its pieces in offset order, as here.
-- Otherwise as 0119.
SET LOCAL lock_timeout = '5s';

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
        SELECT e.content || coalesce((SELECT string_agg(p.content, '' ORDER BY p.start_offset)
                                      FROM (SELECT c.start_offset, c.content
                                            FROM timeline_event_chunks c
                                            WHERE c.event_id = event AND c.session_id = owner
                                            UNION ALL
                                            SELECT l.start_offset, l.content
                                            FROM logged_event_text(owner, event) l) p), '')
        INTO final_content
        FROM timeline_events e WHERE e.id = event AND e.session_id = owner;
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

-- Replacing a function resets its settings: the kept plans of 0126, again.
ALTER FUNCTION finish_timeline_event(uuid, uuid, text, text, jsonb, uuid, uuid)
    SET plan_cache_mode = force_generic_plan;
