-- An event's insert (`insert_timeline_event`, 0115, which every creation runs) as PL/pgSQL, so
-- its statement runs on the plan its connection keeps. As a SQL function it could not be inlined
-- (it writes), and PostgreSQL plans a SQL function's statements anew on every call: counted with
-- pg_stat_statements during the ingest benchmark, one plan per call, 0.2 ms each plain and 0.8
-- ms partitioned by 4 (planning prunes every partition of the session's look-up). Same rows,
-- same errors; the callers' `plan_cache_mode` (0126) holds for it. Measured in
-- docs/scale-out.md.
SET LOCAL lock_timeout = '5s';

CREATE OR REPLACE FUNCTION insert_timeline_event(owner uuid, stage uuid, execution uuid,
                                                 event uuid, kind text, initial_status text,
                                                 initial_content text, initial_metadata jsonb)
RETURNS SETOF timeline_events
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
    INSERT INTO timeline_events (id, session_id, stage_id, execution_id, sequence_number,
                                 event_type, status, content, metadata)
    VALUES (event, owner, stage, execution,
            (SELECT coalesce(max(e.sequence_number), 0) + 1 FROM timeline_events e
             WHERE e.session_id = owner),
            kind, initial_status, initial_content, initial_metadata)
    RETURNING *;
END $$;
