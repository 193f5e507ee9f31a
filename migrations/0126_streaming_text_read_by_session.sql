-- A streaming event's text so far (and when it last grew) is read by functions whose session is a
-- parameter, where the live timeline view read it in sub-selects joined by the event row's
-- columns. On the partitioned layout (and on a distributed one) such a sub-select cannot be
-- pruned when its statement starts, only as each row is read, so every statement that read the
-- view set up a scan of every partition of five tables (chunks, the texts in the log, the log and
-- its runs), most never run: on a session page answered in one statement, two dozen partition
-- scans and their locks on every request. Inside the functions each statement is planned with
-- the session as a parameter and pruned to its partition as it starts; a completed event, the
-- common case, reads no function at all. The view's columns and values are unchanged.
SET LOCAL lock_timeout = '5s';

-- `stored` (the event's own content) followed by its pieces appended since: chunks, and texts
-- only its session's log holds, in offset order.
CREATE FUNCTION streaming_event_content(owner uuid, event uuid, stored text) RETURNS text
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN stored || coalesce(
        (SELECT string_agg(p.content, '' ORDER BY p.start_offset)
         FROM (SELECT c.start_offset, c.content
               FROM timeline_event_chunks c
               WHERE c.event_id = event AND c.session_id = owner
               UNION ALL
               SELECT l.start_offset, l.content
               FROM logged_event_text(owner, event) l) p), '');
END $$;

-- When the event last changed: `stored` (its row's time), or its last piece's, if later. The
-- log's last text of the event is recent while it streams: read backwards, the search stops
-- there (at its last fold when it has none since).
CREATE FUNCTION streaming_event_updated_at(owner uuid, event uuid, stored timestamptz)
RETURNS timestamptz LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN greatest(stored,
                    (SELECT max(c.created_at) FROM timeline_event_chunks c
                     WHERE c.event_id = event AND c.session_id = owner),
                    (SELECT l.created_at FROM logged_event_text(owner, event) l
                     ORDER BY l.position DESC LIMIT 1));
END $$;

CREATE OR REPLACE VIEW timeline_events_live AS
SELECT e.id, e.session_id, e.stage_id, e.execution_id, e.sequence_number, e.event_type, e.status,
       CASE WHEN e.status = 'streaming'
            THEN streaming_event_content(e.session_id, e.id, e.content)
            ELSE e.content END AS content,
       e.metadata, e.llm_interaction_id, e.mcp_interaction_id, e.created_at,
       CASE WHEN e.status = 'streaming'
            THEN streaming_event_updated_at(e.session_id, e.id, e.updated_at)
            ELSE e.updated_at END AS updated_at
FROM timeline_events e;
