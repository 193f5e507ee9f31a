-- A group of appends (`append_timeline_chunks`, last 0119) decides its appends before it takes
-- its sessions' event orders, not after. It held a session's event order for the whole
-- statement (deciding each append: its event, where its text ends, writing that end) though the
-- order only has to cover numbering the appends and recording them; meanwhile every other writer
-- of the session waited for it, and each event created or finished in a session with many
-- streams waited for a group at its commit. Deciding needs only the streams, which the group
-- takes first as before: an event's status, where its text ends and whether its text is in the
-- log change only under its stream. So the function now runs two statements: the first, under
-- the streams, decides and writes the ends; the second, under the event orders, folds when due,
-- numbers and records. Each session's last position is found once (it was found twice, for the
-- fold and for numbering), and the record of an event's first grouped append is written only for
-- an event that has none (it probed for one on every append). The lock order is unchanged:
-- streams, then event orders, each by key.

CREATE OR REPLACE FUNCTION append_timeline_chunks(events uuid[], starts bigint[], deltas text[],
                                                  max_length bigint)
RETURNS TABLE (stored boolean)
LANGUAGE plpgsql AS $$
DECLARE
    answers boolean[];
    k_events uuid[]; k_sessions uuid[]; k_stages uuid[]; k_executions uuid[];
    k_sequences bigint[]; k_lengths bigint[]; k_deltas text[]; k_fresh boolean[];
    owners uuid[]; lasts bigint[];
BEGIN
    -- Each lock in one statement: the subquery yields its keys sorted, and each is locked as it
    -- comes (a statement per key cost more than the lock).
    PERFORM pg_advisory_xact_lock(s.k)
    FROM (SELECT DISTINCT stream_lock_key(e) AS k FROM unnest(events) AS e ORDER BY 1) s;
    -- Decided under the streams alone: what an append is checked against (its event's status
    -- and where its text ends, whether its text is in the log yet) changes only under its
    -- stream. The answers and the kept appends' columns go to the second statement as arrays.
    WITH input AS (
        SELECT i.event, i.start_at, i.delta, i.ord
        FROM unnest(events, starts, deltas) WITH ORDINALITY AS i (event, start_at, delta, ord)
    ), decided AS (
        SELECT i.ord, i.event, i.delta, s.session_id, s.stage_id, s.execution_id,
               s.sequence_number, s.length, s.fresh,
               s.status = 'streaming' AND i.start_at = s.length
                   AND s.length + char_length(i.delta) <= max_length AS ok
        FROM input i
        LEFT JOIN LATERAL (
            SELECT e.session_id, e.stage_id, e.execution_id, e.sequence_number, e.status,
                   (SELECT n.length
                    FROM streaming_event_length(e.session_id, e.id, e.content) n) AS length,
                   NOT EXISTS (SELECT FROM event_texts_in_log f
                               WHERE f.session_id = e.session_id AND f.event_id = e.id) AS fresh
            FROM timeline_events e WHERE e.id = i.event
            -- One row by its key; the limit also keeps this a look-up per append: planned
            -- while the table was small, a join would scan every event and find each one's end.
            LIMIT 1
        ) s ON true
    ), ended AS (
        -- A group holds one append per event, so no row is written twice.
        INSERT INTO streaming_event_ends (session_id, event_id, end_offset)
        SELECT d.session_id, d.event, d.length + char_length(d.delta) FROM decided d WHERE d.ok
        ON CONFLICT (session_id, event_id) DO UPDATE SET end_offset = excluded.end_offset
    )
    SELECT array_agg(coalesce(d.ok, false) ORDER BY d.ord),
           array_agg(d.event ORDER BY d.ord) FILTER (WHERE d.ok),
           array_agg(d.session_id ORDER BY d.ord) FILTER (WHERE d.ok),
           array_agg(d.stage_id ORDER BY d.ord) FILTER (WHERE d.ok),
           array_agg(d.execution_id ORDER BY d.ord) FILTER (WHERE d.ok),
           array_agg(d.sequence_number ORDER BY d.ord) FILTER (WHERE d.ok),
           array_agg(d.length ORDER BY d.ord) FILTER (WHERE d.ok),
           array_agg(d.delta ORDER BY d.ord) FILTER (WHERE d.ok),
           array_agg(d.fresh ORDER BY d.ord) FILTER (WHERE d.ok)
    INTO answers, k_events, k_sessions, k_stages, k_executions, k_sequences, k_lengths,
         k_deltas, k_fresh
    FROM decided d;
    IF k_events IS NOT NULL THEN
        -- Then the sessions' event orders, held to the commit: numbering and recording only.
        PERFORM pg_advisory_xact_lock(s.k)
        FROM (SELECT DISTINCT session_events_lock_key(o) AS k FROM unnest(k_sessions) AS o
              ORDER BY 1) s;
        -- Each session's last position, found once: a fold adds no row to the log.
        SELECT array_agg(o.session_id), array_agg(last.position)
        INTO owners, lasts
        FROM (SELECT DISTINCT o AS session_id FROM unnest(k_sessions) AS o) o
        CROSS JOIN LATERAL (SELECT coalesce(max(v.position), 0) AS position
                            FROM session_events v WHERE v.session_id = o.session_id) last;
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
            SELECT k.*, l.position + row_number() OVER (PARTITION BY k.session_id ORDER BY k.ord)
                            AS position
            FROM kept k JOIN unnest(owners, lasts) AS l (session_id, position)
              ON l.session_id = k.session_id
        ), in_log AS (
            -- An event's first grouped append: its text is in the log from here on.
            INSERT INTO event_texts_in_log (session_id, event_id, after_position)
            SELECT n.session_id, n.event, n.position - 1 FROM numbered n WHERE n.fresh
            ON CONFLICT (session_id, event_id) DO NOTHING
        ), per_session AS (
            SELECT n.session_id, max(n.position) AS position, count(*) AS appends,
                   array_agg(n.event ORDER BY n.position) AS events,
                   array_agg(n.stage_id ORDER BY n.position) AS stages,
                   array_agg(n.execution_id ORDER BY n.position) AS executions,
                   array_agg(n.sequence_number ORDER BY n.position) AS sequences,
                   array_agg(n.length::integer ORDER BY n.position) AS starts,
                   array_agg((n.length + char_length(n.delta))::integer ORDER BY n.position) AS ends,
                   array_agg(n.delta ORDER BY n.position) AS texts
            FROM numbered n GROUP BY n.session_id
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
            FROM per_session p
        )
        INSERT INTO live_changes (session_id, position)
        SELECT n.session_id, n.position FROM numbered n ORDER BY n.session_id, n.position;
        PERFORM set_config('casefile.changes_recorded', 'off', true);
    END IF;
    RETURN QUERY SELECT unnest(answers);
END $$;
