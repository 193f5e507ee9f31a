-- What readers see of a streaming event (0002), with its chunks found by the event's key: the
-- event's id and its session (on a database distributed by session, the chunks of the event's
-- own node).
CREATE OR REPLACE VIEW timeline_events_live AS
SELECT e.id, e.session_id, e.stage_id, e.execution_id, e.sequence_number, e.event_type, e.status,
       CASE WHEN e.status = 'streaming'
            THEN e.content || coalesce(
                (SELECT string_agg(c.content, '' ORDER BY c.start_offset)
                 FROM timeline_event_chunks c
                 WHERE c.event_id = e.id AND c.session_id = e.session_id), '')
            ELSE e.content END AS content,
       e.metadata, e.llm_interaction_id, e.mcp_interaction_id, e.created_at,
       CASE WHEN e.status = 'streaming'
            THEN greatest(e.updated_at, (SELECT max(c.created_at)
                                         FROM timeline_event_chunks c
                                         WHERE c.event_id = e.id AND c.session_id = e.session_id))
            ELSE e.updated_at END AS updated_at
FROM timeline_events e;
