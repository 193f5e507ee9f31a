-- A group's check of an append reads one row, its event's kept end (`streaming_event_ends`),
-- and nothing else where it has one. The kept end now also holds what the group records of
-- its event (stage, agent, sequence number: none of them ever changes) and whether the event's
-- text is in its session's log; the group's first statement read the event's row and probed
-- `event_texts_in_log` for them on every append. An event has a kept end only while it streams
-- (finishing or deleting it deletes the end, under its stream, which the check holds), so a kept
-- end is all the check needs. Without one (an event's first append, or after a crash empties
-- that unlogged table) the check reads the event, its chunks, its log and its record as before,
-- through a PL/pgSQL function whose statements start only when it is called. The events of a
-- run a group extends are read once, with the run, rather than looked up again by its key.
--
-- `logged` is true only where the text is in the log: the group function writes it with the
-- appends it records there, in the transaction that writes the event's `event_texts_in_log`
-- row when it has none, and the two rows are deleted together. Other writers of a kept end
-- (a single append's chunk, an overlap's) leave it as it is or write false, which the check
-- reads as unknown and answers by probing the record.
--
-- On the partitioned layout each look-up in that statement, pruned per append as it runs, set
-- up a scan of every partition on every call, and its locks (the table, each partition and
-- each partition's index) took the group's transaction past the 16 that PostgreSQL keeps
-- without its shared lock table. Measured in docs/scale-out.md.
--
-- The kept ends from before are filled in from their events (an end without a streaming event
-- would be wrong, and none is kept: such a row is dropped). The table is held exclusively to
-- the commit, so no writer of an end runs meanwhile.
SET LOCAL lock_timeout = '5s';

ALTER TABLE streaming_event_ends
    ADD COLUMN stage_id uuid,
    ADD COLUMN execution_id uuid,
    ADD COLUMN sequence_number bigint,
    ADD COLUMN logged boolean NOT NULL DEFAULT false;

DELETE FROM streaming_event_ends x
WHERE NOT EXISTS (SELECT FROM timeline_events e
                  WHERE e.id = x.event_id AND e.session_id = x.session_id
                    AND e.status = 'streaming');

UPDATE streaming_event_ends x
SET stage_id = e.stage_id, execution_id = e.execution_id, sequence_number = e.sequence_number,
    logged = EXISTS (SELECT FROM event_texts_in_log f
                     WHERE f.session_id = x.session_id AND f.event_id = x.event_id)
FROM timeline_events e
WHERE e.id = x.event_id AND e.session_id = x.session_id;

ALTER TABLE streaming_event_ends
    ALTER COLUMN stage_id SET NOT NULL,
    ALTER COLUMN execution_id SET NOT NULL,
    ALTER COLUMN sequence_number SET NOT NULL;

-- Whether `event`'s text is partly in its session's log (its first grouped append wrote it).
CREATE FUNCTION event_text_in_log(owner uuid, event uuid) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (SELECT FROM event_texts_in_log f
                   WHERE f.session_id = owner AND f.event_id = event);
END $$;

-- What a group checks an append to `event` against when it has no kept end: the event's row,
-- where its text ends in its chunks and log, and whether the log has its record. Nothing when
-- the event is not in `owner`.
CREATE FUNCTION unkept_streaming_event(owner uuid, event uuid)
RETURNS TABLE (session_id uuid, stage_id uuid, execution_id uuid, sequence_number bigint,
               status text, length bigint, fresh boolean)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT e.session_id, e.stage_id, e.execution_id, e.sequence_number, e.status,
           greatest(char_length(e.content)::bigint, stored_event_text_end(owner, event)),
           NOT event_text_in_log(owner, event)
    FROM timeline_events e WHERE e.id = event AND e.session_id = owner;
END $$;

CREATE OR REPLACE FUNCTION append_timeline_chunks(events uuid[], sessions uuid[], starts bigint[],
                                       deltas text[], max_length bigint)
RETURNS TABLE (stored boolean, event_session uuid)
LANGUAGE plpgsql AS $$
DECLARE
    answers boolean[];
    sessions_found uuid[];
    k_events uuid[]; k_sessions uuid[]; k_stages uuid[]; k_executions uuid[];
    k_sequences bigint[]; k_lengths bigint[]; k_deltas text[]; k_fresh boolean[];
    owners uuid[]; lasts bigint[]; extending bigint[]; run_rows tid[]; since timestamptz[];
    in_runs boolean[]; run_events text[];
    at timestamptz := clock_timestamp();
BEGIN
    -- An event whose session the caller does not know is found by its id (in every partition),
    -- in a statement of its own: in the one that decides, the look-up's scan of every partition
    -- was set up on every call, needed or not.
    IF sessions IS NULL OR array_position(sessions, NULL) IS NOT NULL THEN
        SELECT array_agg(coalesce(i.session, (SELECT x.session_id FROM timeline_events x
                                              WHERE x.id = i.event LIMIT 1)) ORDER BY i.ord)
        INTO sessions
        FROM unnest(events, sessions) WITH ORDINALITY AS i (event, session, ord);
    END IF;
    -- Each lock in one statement: the subquery yields its keys sorted, and each is locked as it
    -- comes (a statement per key cost more than the lock).
    PERFORM pg_advisory_xact_lock(s.k)
    FROM (SELECT DISTINCT stream_lock_key(e) AS k FROM unnest(events) AS e ORDER BY 1) s;
    -- Decided under the streams alone: what an append is checked against (its event's status
    -- and where its text ends, whether its text is in the log yet) changes only under its
    -- stream. The answers and the kept appends' columns go to the second statement as arrays.
    WITH input AS MATERIALIZED (
        SELECT i.event, i.session, i.start_at, i.delta, i.ord
        FROM unnest(events, sessions, starts, deltas) WITH ORDINALITY
            AS i (event, session, start_at, delta, ord)
    ), decided AS (
        SELECT i.ord, i.event, i.delta, s.session_id, s.stage_id, s.execution_id,
               s.sequence_number, s.length, s.fresh,
               s.status = 'streaming' AND i.start_at = s.length
                   AND s.length + char_length(i.delta) <= max_length AS ok
        FROM input i
        LEFT JOIN LATERAL (
            -- Its kept end, by its key, in its session's partition alone; only without one is
            -- the event read (the second branch starts only when the first finds no row).
            (SELECT x.session_id, x.stage_id, x.execution_id, x.sequence_number,
                    'streaming'::text AS status, x.end_offset AS length,
                    CASE WHEN x.logged THEN false
                         ELSE NOT event_text_in_log(x.session_id, x.event_id) END AS fresh
             FROM streaming_event_ends x
             WHERE x.session_id = i.session AND x.event_id = i.event)
            UNION ALL
            SELECT u.* FROM unkept_streaming_event(i.session, i.event) u
            LIMIT 1
        ) s ON true
    ), ended AS (
        -- A group holds one append per event, so no row is written twice. Its text is in the
        -- log from this transaction on (its record is written below when it is fresh).
        INSERT INTO streaming_event_ends (session_id, event_id, end_offset, stage_id,
                                          execution_id, sequence_number, logged)
        SELECT d.session_id, d.event, d.length + char_length(d.delta), d.stage_id,
               d.execution_id, d.sequence_number, true
        FROM decided d WHERE d.ok
        ON CONFLICT (session_id, event_id)
        DO UPDATE SET end_offset = excluded.end_offset, logged = true
    )
    SELECT array_agg(coalesce(d.ok, false) ORDER BY d.ord),
           array_agg(d.session_id ORDER BY d.ord),
           array_agg(d.event ORDER BY d.ord) FILTER (WHERE d.ok),
           array_agg(d.session_id ORDER BY d.ord) FILTER (WHERE d.ok),
           array_agg(d.stage_id ORDER BY d.ord) FILTER (WHERE d.ok),
           array_agg(d.execution_id ORDER BY d.ord) FILTER (WHERE d.ok),
           array_agg(d.sequence_number ORDER BY d.ord) FILTER (WHERE d.ok),
           array_agg(d.length ORDER BY d.ord) FILTER (WHERE d.ok),
           array_agg(d.delta ORDER BY d.ord) FILTER (WHERE d.ok),
           array_agg(d.fresh ORDER BY d.ord) FILTER (WHERE d.ok)
    INTO answers, sessions_found, k_events, k_sessions, k_stages, k_executions, k_sequences,
         k_lengths, k_deltas, k_fresh
    FROM decided d;
    IF k_events IS NOT NULL THEN
        -- Then the sessions' event orders, held to the commit: numbering and recording only.
        PERFORM pg_advisory_xact_lock(s.k)
        FROM (SELECT DISTINCT session_events_lock_key(o) AS k FROM unnest(k_sessions) AS o
              ORDER BY 1) s;
        -- Each session's last position, found once (a fold adds no change to the log), and
        -- where its appends go: into its latest run, when nothing was numbered after it, its log
        -- stays under the limit with them and their microseconds since it started fit its
        -- entries; into a run of their own when their entries are at most half the limit (so no
        -- log passes the limit, and none is ever toasted, which would log and read it whole);
        -- else into a row of `session_events` holding them as arrays (0117, 0119), which its
        -- readers expand at C speed: a session with many appends in one group (one
        -- orchestrator's parallel agents) writes a row per group anyway.
        SELECT array_agg(o.session_id),
               array_agg(greatest(last.position, run.first_position + run.appends - 1)),
               array_agg(CASE WHEN x.extends THEN run.first_position END),
               array_agg(CASE WHEN x.extends THEN run.ctid END),
               array_agg(CASE WHEN x.extends THEN run.created_at ELSE at END),
               array_agg(x.extends OR o.size <= run_extension_limit() / 2),
               -- The run's events, as text: an array of arrays of any lengths in one variable.
               array_agg(CASE WHEN x.extends THEN run.events::text END)
        INTO owners, lasts, extending, run_rows, since, in_runs, run_events
        -- (An entry's size is its text's and 10 bytes, 3 or 6 more for a text of 128 bytes or
        -- more or an event past its run's 128th: the limit is far enough below TOAST's for them.)
        FROM (SELECT k.session_id, sum(octet_length(k.delta) + 10) AS size
              FROM unnest(k_sessions, k_deltas) AS k (session_id, delta)
              GROUP BY k.session_id) o
        CROSS JOIN LATERAL (SELECT coalesce(max(v.position), 0) AS position
                            FROM session_events v WHERE v.session_id = o.session_id) last
        LEFT JOIN LATERAL (SELECT r.ctid, r.first_position, r.appends, r.created_at, r.events,
                                  octet_length(r.log) AS size
                           FROM session_event_runs r WHERE r.session_id = o.session_id
                           ORDER BY r.first_position DESC LIMIT 1) run ON true
        CROSS JOIN LATERAL (SELECT coalesce(run.first_position + run.appends - 1 > last.position
                                            AND run.size + o.size <= run_extension_limit()
                                            AND at - run.created_at < interval '30 minutes',
                                            false) AS extends) x;
        PERFORM set_config('casefile.changes_recorded', 'on', true);
        -- A session whose log this group takes past a multiple of the fold span first folds its
        -- pieces (its appends are numbered after what it folds, so the fold sees all below them).
        PERFORM fold_logged_texts(l.session_id, events)
        FROM unnest(owners, lasts) AS l (session_id, position)
        JOIN (SELECT o AS session_id, count(*) AS appends FROM unnest(k_sessions) AS o GROUP BY o) d
          ON d.session_id = l.session_id
        WHERE (l.position + d.appends) / logged_text_fold_span()
              > l.position / logged_text_fold_span();
        WITH kept AS (
            SELECT * FROM unnest(k_events, k_sessions, k_stages, k_executions, k_sequences,
                                 k_lengths, k_deltas, k_fresh) WITH ORDINALITY
                AS k (event, session_id, stage_id, execution_id, sequence_number, length, delta,
                      fresh, ord)
        ), numbered AS (
            SELECT k.*, l.extending, l.run_row, l.since, l.in_runs,
                   l.position + row_number() OVER (PARTITION BY k.session_id ORDER BY k.ord)
                       AS position
            FROM kept k JOIN unnest(owners, lasts, extending, run_rows, since, in_runs)
                AS l (session_id, position, extending, run_row, since, in_runs)
              ON l.session_id = k.session_id
        ), in_log AS (
            -- An event's first grouped append: its text is in the log from here on.
            INSERT INTO event_texts_in_log (session_id, event_id, after_position)
            SELECT n.session_id, n.event, n.position - 1 FROM numbered n WHERE n.fresh
            ON CONFLICT (session_id, event_id) DO NOTHING
        ), runs AS MATERIALIZED (
            -- The events of each run extended, as read with it above (under the session's event
            -- order, which every writer of its runs holds), each parsed once.
            SELECT r.session_id, r.events::uuid[] AS events
            FROM unnest(owners, run_events) AS r (session_id, events) WHERE r.events IS NOT NULL
        ), per_run AS (
            -- The run's events after this group: those it had, then those joining it (a group
            -- holds one append per event). The run itself is found by its row's address.
            SELECT n.session_id, n.extending, n.run_row, n.since, min(n.position) AS first_position,
                   count(*)::integer AS appends,
                   coalesce(r.events, '{}')
                       || coalesce(array_agg(n.event ORDER BY n.position)
                                       FILTER (WHERE r.events IS NULL
                                                  OR n.event <> ALL (r.events)), '{}')
                       AS events
            FROM numbered n LEFT JOIN runs r ON r.session_id = n.session_id
            WHERE n.in_runs
            GROUP BY n.session_id, n.extending, n.run_row, n.since, r.events
        ), logged AS (
            SELECT p.session_id, p.extending, p.run_row, p.first_position, p.appends, p.events,
                   string_agg(run_entry(array_position(p.events, n.event) - 1, n.length,
                                        at - p.since, n.delta),
                              ''::bytea ORDER BY n.position DESC) AS log
            FROM per_run p JOIN numbered n ON n.session_id = p.session_id
            GROUP BY p.session_id, p.extending, p.run_row, p.first_position, p.appends,
                     p.events
        ), extended AS (
            UPDATE session_event_runs r
            SET events = l.events, appends = r.appends + l.appends, log = l.log || r.log
            FROM logged l
            -- Its address was read under the session's event order, which every writer of
            -- its runs holds, so it is the run's current version.
            WHERE l.extending IS NOT NULL AND r.ctid = l.run_row
              AND r.session_id = l.session_id AND r.first_position = l.extending
        ), started AS (
            INSERT INTO session_event_runs (session_id, first_position, created_at, events,
                                            appends, log)
            SELECT l.session_id, l.first_position, at, l.events, l.appends, l.log
            FROM logged l WHERE l.extending IS NULL
        ), per_row AS (
            SELECT n.session_id, max(n.position) AS position, count(*) AS appends,
                   array_agg(n.event ORDER BY n.position) AS events,
                   array_agg(n.stage_id ORDER BY n.position) AS stages,
                   array_agg(n.execution_id ORDER BY n.position) AS executions,
                   array_agg(n.sequence_number ORDER BY n.position) AS sequences,
                   array_agg(n.length::integer ORDER BY n.position) AS starts,
                   array_agg((n.length + char_length(n.delta))::integer ORDER BY n.position) AS ends,
                   array_agg(n.delta ORDER BY n.position) AS texts
            FROM numbered n WHERE NOT n.in_runs GROUP BY n.session_id
        ), recorded AS (
            INSERT INTO session_events (session_id, position, kind, entity_id, stage_id,
                                        execution_id, sequence_number, start_offset, end_offset,
                                        delta, run_events, run_stages, run_executions,
                                        run_sequences, run_starts, run_ends, run_deltas)
            SELECT p.session_id, p.position, 'event_appended', p.events[1],
                   CASE WHEN p.appends = 1 THEN p.stages[1] END,
                   CASE WHEN p.appends = 1 THEN p.executions[1] END,
                   CASE WHEN p.appends = 1 THEN p.sequences[1] END,
                   CASE WHEN p.appends = 1 THEN p.starts[1] END,
                   CASE WHEN p.appends = 1 THEN p.ends[1] END,
                   CASE WHEN p.appends = 1 THEN p.texts[1] END,
                   CASE WHEN p.appends > 1 THEN p.events END,
                   CASE WHEN p.appends > 1 THEN p.stages END,
                   CASE WHEN p.appends > 1 THEN p.executions END,
                   CASE WHEN p.appends > 1 THEN p.sequences END,
                   CASE WHEN p.appends > 1 THEN p.starts END,
                   CASE WHEN p.appends > 1 THEN p.ends END,
                   CASE WHEN p.appends > 1 THEN p.texts END
            FROM per_row p
        )
        INSERT INTO live_changes (session_id, position)
        SELECT n.session_id, n.position FROM numbered n ORDER BY n.session_id, n.position;
        PERFORM set_config('casefile.changes_recorded', 'off', true);
    END IF;
    RETURN QUERY SELECT a.stored, a.event_session
                 FROM unnest(answers, sessions_found) AS a (stored, event_session);
END $$;

-- A single append keeps its event's end whole too (the columns a group reads with it).
CREATE OR REPLACE FUNCTION append_timeline_chunk(event uuid, start_at bigint, delta text,
                                                 max_length bigint)
RETURNS TABLE (status text, length bigint, stored boolean)
LANGUAGE plpgsql AS $$
DECLARE
    session uuid;
    stage uuid;
    execution uuid;
    sequence bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(stream_lock_key(event));
    SELECT e.status, n.length, e.session_id, e.stage_id, e.execution_id, e.sequence_number
    INTO status, length, session, stage, execution, sequence
    FROM timeline_events e
    CROSS JOIN LATERAL streaming_event_length(e.session_id, e.id, e.content) n
    WHERE e.id = event;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    stored := status = 'streaming' AND start_at = length
              AND length + char_length(delta) <= max_length;
    IF stored THEN
        -- Kept here too, or an event written this way would read its log on every append.
        INSERT INTO streaming_event_ends (session_id, event_id, end_offset, stage_id,
                                          execution_id, sequence_number)
        VALUES (session, event, length + char_length(delta), stage, execution, sequence)
        ON CONFLICT (session_id, event_id) DO UPDATE SET end_offset = excluded.end_offset;
        INSERT INTO timeline_event_chunks (event_id, start_offset, content, session_id)
        VALUES (event, length, delta, session);
    END IF;
    RETURN NEXT;
END $$;

-- Replacing a function resets its settings: the kept plans of 0126, again.
ALTER FUNCTION append_timeline_chunks(uuid[], uuid[], bigint[], text[], bigint)
    SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION append_timeline_chunk(uuid, bigint, text, bigint)
    SET plan_cache_mode = force_generic_plan;
