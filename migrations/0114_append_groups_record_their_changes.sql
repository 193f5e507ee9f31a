-- A group of appends (0112) records its changes in the session event log itself, in one
-- statement, instead of one deferred `record_session_event` call per chunk at commit: that
-- call looked the event up again, took its session's lock, found the session's last position
-- and inserted two rows and a notification, once per append (PostgreSQL's largest cost per
-- append after the group's statement, measured with pg_stat_statements at 2,000 appends/s).
--
-- The rows are the ones the trigger writes. Numbering stays gapless and in commit order: the
-- group takes its sessions' event-order locks (in key order, after its streams': the one lock
-- order, src/store/write/locks.rs) before the statement that numbers, which therefore reads
-- each session's last position after the previous holder committed; the locks are held to the
-- commit, which follows the statement at once (the driver runs it as a transaction of its own).
--
-- The trigger skips the chunks the group records, told by a setting local to the transaction
-- that the function turns on around its insert only. Every other writer of chunks (a single
-- append decided alone, `ingest` batches, binaries from before this migration) is recorded by
-- the trigger, as before.
DROP TRIGGER record_session_event ON timeline_event_chunks;
CREATE CONSTRAINT TRIGGER record_session_event AFTER INSERT ON timeline_event_chunks
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (current_setting('casefile.changes_recorded', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION record_session_event();

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
    ), recorded AS (
        INSERT INTO session_events (session_id, position, kind, entity_id, stage_id,
                                    execution_id, sequence_number, start_offset, end_offset)
        SELECT n.session_id, n.position, 'event_appended', n.event, n.stage_id, n.execution_id,
               n.sequence_number, n.length, n.length + char_length(n.delta)
        FROM numbered n
    ), logged AS (
        INSERT INTO live_changes (session_id, position)
        SELECT n.session_id, n.position FROM numbered n ORDER BY n.session_id, n.position
    )
    SELECT array_agg(coalesce(d.ok, false) ORDER BY d.ord) INTO answers FROM decided d;
    PERFORM set_config('casefile.changes_recorded', 'off', true);
    IF true = ANY (answers) THEN
        -- Constant payload, as the trigger's: the listeners read the log for what is new.
        PERFORM pg_notify('casefile_live', '');
    END IF;
    RETURN QUERY SELECT unnest(answers);
END $$;
