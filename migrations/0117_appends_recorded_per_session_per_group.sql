-- A group of appends (0112, 0114) records its appends in each session's event log as one row
-- per session, not one per append: the row at the position of the session's last append in the
-- group, holding every append of the group to that session (each one's event, with its stage,
-- execution and sequence number, and the characters it covers) in position order, ending at the
-- row's position. A group numbers a session's appends consecutively under the session's
-- event-order lock, so those positions are exactly the row's run, and no other row falls
-- inside it.
--
-- With many agents streaming into one session, a group holds many appends of that session:
-- their log rows and index entries, about half of the WAL an append wrote (the other half is
-- its chunk, which the event's text is read by), become one row. A session with one append in
-- the group keeps the plain row (an array of one costs more than the columns it replaces).
-- Nothing else changes: every other writer still numbers from the session's highest position
-- (the highest row's), and readers see each append of a run as the change it is
-- (src/store/session_events.rs expands runs where the log is read, with no look-up: a run holds
-- what a plain row holds).
--
-- Adding nullable columns changes only the catalog; the check is enforced on new rows at once
-- and validated for the rows from before (all without a run) by 0118. Takes ACCESS EXCLUSIVE on
-- `session_events` for the catalog change only.
SET LOCAL lock_timeout = '5s';

ALTER TABLE session_events
    ADD COLUMN run_events uuid[],
    ADD COLUMN run_stages uuid[],
    ADD COLUMN run_executions uuid[],
    ADD COLUMN run_sequences bigint[],
    ADD COLUMN run_starts integer[],
    ADD COLUMN run_ends integer[],
    -- A run is never longer than a group (src/store/write/mod.rs, `limits::BATCH`), which lets
    -- a reader find the run holding a position among the rows at most that far above it.
    ADD CONSTRAINT session_events_run_check CHECK (
        (run_events IS NULL AND run_stages IS NULL AND run_executions IS NULL
         AND run_sequences IS NULL AND run_starts IS NULL AND run_ends IS NULL)
        OR (kind = 'event_appended'
            AND cardinality(run_events) BETWEEN 2 AND 1000
            AND position >= cardinality(run_events)
            AND cardinality(run_stages) = cardinality(run_events)
            AND cardinality(run_executions) = cardinality(run_events)
            AND cardinality(run_sequences) = cardinality(run_events)
            AND cardinality(run_starts) = cardinality(run_events)
            AND cardinality(run_ends) = cardinality(run_events))) NOT VALID;

CREATE OR REPLACE FUNCTION append_timeline_chunks(events uuid[], starts bigint[], deltas text[],
                                                  max_length bigint)
RETURNS TABLE (stored boolean)
LANGUAGE plpgsql AS $$
DECLARE
    answers boolean[];
BEGIN
    -- Each lock in one statement: the subquery yields its keys sorted, and each is locked as it
    -- comes (a statement per key cost more than the lock).
    PERFORM pg_advisory_xact_lock(s.k)
    FROM (SELECT DISTINCT stream_lock_key(e) AS k FROM unnest(events) AS e ORDER BY 1) s;
    PERFORM pg_advisory_xact_lock(s.k)
    FROM (SELECT DISTINCT session_events_lock_key(t.session_id) AS k
          FROM timeline_events t WHERE t.id = ANY (events) ORDER BY 1) s;
    PERFORM set_config('casefile.changes_recorded', 'on', true);
    WITH input AS (
        SELECT i.event, i.start_at, i.delta, i.ord
        FROM unnest(events, starts, deltas) WITH ORDINALITY AS i (event, start_at, delta, ord)
    ), decided AS (
        SELECT i.ord, i.event, i.delta, s.session_id, s.stage_id, s.execution_id,
               s.sequence_number, s.length,
               s.status = 'streaming' AND i.start_at = s.length
                   AND s.length + char_length(i.delta) <= max_length AS ok
        FROM input i
        LEFT JOIN LATERAL (
            SELECT e.session_id, e.stage_id, e.execution_id, e.sequence_number, e.status,
                   coalesce((SELECT c.start_offset + char_length(c.content)
                             FROM timeline_event_chunks c
                             WHERE c.event_id = e.id AND c.session_id = e.session_id
                             ORDER BY c.start_offset DESC LIMIT 1),
                            char_length(e.content))::bigint AS length
            FROM timeline_events e WHERE e.id = i.event
            -- One row by its key; the limit also keeps this a look-up per append: planned
            -- while the table was small, a join would scan every event and find each one's end.
            LIMIT 1
        ) s ON true
    ), inserted AS (
        INSERT INTO timeline_event_chunks (event_id, start_offset, content, session_id)
        SELECT d.event, d.length, d.delta, d.session_id FROM decided d WHERE d.ok
    ), numbered AS (
        SELECT d.*, last.position + row_number() OVER (PARTITION BY d.session_id ORDER BY d.ord)
                        AS position
        FROM decided d
        CROSS JOIN LATERAL (SELECT coalesce(max(v.position), 0) AS position
                            FROM session_events v WHERE v.session_id = d.session_id) last
        WHERE d.ok
    ), per_session AS (
        SELECT n.session_id, max(n.position) AS position, count(*) AS appends,
               array_agg(n.event ORDER BY n.position) AS events,
               array_agg(n.stage_id ORDER BY n.position) AS stages,
               array_agg(n.execution_id ORDER BY n.position) AS executions,
               array_agg(n.sequence_number ORDER BY n.position) AS sequences,
               array_agg(n.length::integer ORDER BY n.position) AS starts,
               array_agg((n.length + char_length(n.delta))::integer ORDER BY n.position) AS ends
        FROM numbered n GROUP BY n.session_id
    ), recorded AS (
        INSERT INTO session_events (session_id, position, kind, entity_id, stage_id,
                                    execution_id, sequence_number, start_offset, end_offset,
                                    run_events, run_stages, run_executions, run_sequences,
                                    run_starts, run_ends)
        SELECT p.session_id, p.position, 'event_appended', p.events[1],
               CASE WHEN p.appends = 1 THEN p.stages[1] END,
               CASE WHEN p.appends = 1 THEN p.executions[1] END,
               CASE WHEN p.appends = 1 THEN p.sequences[1] END,
               CASE WHEN p.appends = 1 THEN p.starts[1] END,
               CASE WHEN p.appends = 1 THEN p.ends[1] END,
               CASE WHEN p.appends > 1 THEN p.events END,
               CASE WHEN p.appends > 1 THEN p.stages END,
               CASE WHEN p.appends > 1 THEN p.executions END,
               CASE WHEN p.appends > 1 THEN p.sequences END,
               CASE WHEN p.appends > 1 THEN p.starts END,
               CASE WHEN p.appends > 1 THEN p.ends END
        FROM per_session p
    ), logged AS (
        INSERT INTO live_changes (session_id, position)
        SELECT n.session_id, n.position FROM numbered n ORDER BY n.session_id, n.position
    )
    SELECT array_agg(coalesce(d.ok, false) ORDER BY d.ord) INTO answers FROM decided d;
    PERFORM set_config('casefile.changes_recorded', 'off', true);
    RETURN QUERY SELECT unnest(answers);
END $$;
