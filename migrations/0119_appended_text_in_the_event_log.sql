-- A group of appends (0117) keeps each append's text in the session's event log row that
-- records it, and no longer writes a chunk per append: `delta` on a plain row, `run_deltas` on a
-- run (one per append, in the run's order). The chunk row, its index entry and its deletion when
-- the event finishes were most of what an append still wrote (docs/append-journal.md); a row of
-- the log was written per append or per run anyway. Chunks stay for the other writers (`ingest`
-- batches, overlapping retries, the step-by-step path), whose pieces are any length.
--
-- So a streaming event's text is its content, its chunks and the pieces of its session's log
-- rows after the position `event_texts_in_log` names for it (none when it has no row there), in
-- offset order; `timeline_events_live` reads it so, and the append functions find where it ends
-- from all three. The row is written by the event's first grouped append (the position before
-- it). The log's rows hold every event of their session, so reading an event's pieces reads what
-- its session logged since: a group whose session's log passes a multiple of 1,000 positions
-- first folds the pieces of the session's streaming events into a chunk each and moves their
-- rows up to the position folded through, which bounds every read. Where an event's text ends,
-- which every append checks, is kept as of its last append in `streaming_event_ends`, an
-- unlogged table written by the same statement. It holds nothing the logged tables do not (a
-- crash empties it, and the first append to miss a row reads the log instead), so acknowledged
-- data is never unlogged. The rows of both go when their event finishes or is deleted. A
-- finished event's pieces stay in the log, as its positions and offsets do: the change log's
-- follower reads an append's text from its row, without a look-up of the event.
--
-- Nullable columns change only the catalog; the check is enforced on new rows at once and
-- validated for the rows from before (none holds text) by 0120. Takes ACCESS EXCLUSIVE on
-- `session_events` for the catalog change only.
SET LOCAL lock_timeout = '5s';

ALTER TABLE session_events
    ADD COLUMN delta text,
    ADD COLUMN run_deltas text[],
    ADD CONSTRAINT session_events_delta_check CHECK (
        (delta IS NULL OR (kind = 'event_appended' AND run_events IS NULL
                           AND char_length(delta) = end_offset - start_offset))
        AND (run_deltas IS NULL OR cardinality(run_deltas) = cardinality(run_events))) NOT VALID;

CREATE UNLOGGED TABLE streaming_event_ends (
    session_id uuid NOT NULL,
    event_id   uuid NOT NULL,
    end_offset bigint NOT NULL,
    PRIMARY KEY (session_id, event_id)
);

-- The streaming events whose text is partly in their session's log: after `after_position`
-- (before it, in chunks: the log position of the event's first grouped append less one, or the
-- position its pieces were last folded through by `fold_logged_texts`).
CREATE TABLE event_texts_in_log (
    session_id     uuid NOT NULL,
    event_id       uuid NOT NULL,
    after_position bigint NOT NULL,
    PRIMARY KEY (session_id, event_id)
);

-- Each piece of a log row `v` (its event, the characters it covers, its text): its own, or one
-- per append of its run; none when the row's text is in a chunk.
CREATE FUNCTION logged_pieces(v session_events)
RETURNS TABLE (event uuid, start_offset integer, end_offset integer, content text)
LANGUAGE sql IMMUTABLE AS $$
    SELECT v.entity_id, v.start_offset, v.end_offset, v.delta WHERE v.delta IS NOT NULL
    UNION ALL
    SELECT r.event, r.start_offset, r.end_offset, r.content
    FROM unnest(v.run_events, v.run_starts, v.run_ends, v.run_deltas)
         AS r (event, start_offset, end_offset, content)
    WHERE v.run_deltas IS NOT NULL
$$;

-- The pieces of `event`'s text that only its session's log holds, with where and when each was
-- logged.
-- (`event` is also a column of the pieces: the parameter is named with the function's name.)
-- A set, not a scalar, so that PostgreSQL inlines it into its caller's plan.
CREATE FUNCTION logged_event_text(owner uuid, event uuid)
RETURNS TABLE (start_offset integer, end_offset integer, content text, "position" bigint,
               created_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT p.start_offset, p.end_offset, p.content, v.position, v.created_at
    FROM event_texts_in_log f
    JOIN session_events v ON v.session_id = f.session_id AND v.position > f.after_position
    CROSS JOIN LATERAL logged_pieces(v) p
    WHERE f.session_id = owner AND f.event_id = logged_event_text.event
      AND v.kind = 'event_appended'
      AND ((v.delta IS NOT NULL AND v.entity_id = logged_event_text.event)
           OR (v.run_deltas IS NOT NULL AND logged_event_text.event = ANY (v.run_events)))
      AND p.event = logged_event_text.event
$$;

-- How far apart (in positions of its session's log) a session's pieces are folded.
CREATE FUNCTION logged_text_fold_span() RETURNS bigint LANGUAGE sql IMMUTABLE AS 'SELECT 1000';

-- Folds the pieces `owner`'s log holds for its streaming events into one chunk per event, and
-- records how far. `held`: the streams the caller holds. The session's other events are folded
-- only when their streams are free: waiting for a stream while holding the session's event
-- order would break the lock order (streams first); one skipped is folded next time.
CREATE FUNCTION fold_logged_texts(owner uuid, held uuid[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    top bigint;
    folding uuid[];
BEGIN
    SELECT coalesce(max(v.position), 0) INTO top FROM session_events v WHERE v.session_id = owner;
    WITH logging AS MATERIALIZED (
        SELECT f.event_id FROM event_texts_in_log f WHERE f.session_id = owner
    )
    SELECT array_agg(l.event_id) INTO folding FROM logging l
    WHERE l.event_id = ANY (held) OR pg_try_advisory_xact_lock(stream_lock_key(l.event_id));
    -- A statement of its own, with a snapshot taken under those locks: an event finished
    -- meanwhile (which takes its row with it) is not folded.
    WITH marks AS MATERIALIZED (
        SELECT f.event_id AS event, f.after_position AS since
        FROM event_texts_in_log f
        WHERE f.session_id = owner AND f.event_id = ANY (folding) AND f.after_position < top
    ), logged AS MATERIALIZED (
        -- Each row's pieces once, then matched to the events (expanding a run per event that
        -- might be in it would expand it as many times).
        SELECT p.event, p.start_offset, p.content, v.created_at, v.position
        FROM session_events v
        CROSS JOIN LATERAL logged_pieces(v) p
        WHERE v.session_id = owner AND v.position > (SELECT min(m.since) FROM marks m)
          AND v.position <= top AND v.kind = 'event_appended'
          AND (v.delta IS NOT NULL OR v.run_deltas IS NOT NULL)
    ), pieces AS (
        SELECT l.event, l.start_offset, l.content, l.created_at
        FROM logged l JOIN marks m ON m.event = l.event AND l.position > m.since
    ), folded AS (
        INSERT INTO timeline_event_chunks (event_id, start_offset, content, session_id, created_at)
        SELECT p.event, min(p.start_offset), string_agg(p.content, '' ORDER BY p.start_offset),
               owner, max(p.created_at)
        FROM pieces p GROUP BY p.event
    )
    UPDATE event_texts_in_log f SET after_position = top
    FROM marks m
    WHERE f.session_id = owner AND f.event_id = m.event;
END $$;

-- How long a streaming event's text is, with `folded` its row's content: the end of its last chunk,
-- its last append as kept (or, missing, as logged), or its content, whichever is
-- furthest (each writer appends where the text ends, so the furthest is the end). A row, to be
-- inlined (above).
CREATE FUNCTION streaming_event_length(owner uuid, event uuid, folded text)
RETURNS TABLE (length bigint)
LANGUAGE sql STABLE AS $$
    SELECT greatest(char_length(folded)::bigint,
                    (SELECT c.start_offset + char_length(c.content)
                     FROM timeline_event_chunks c
                     WHERE c.event_id = event AND c.session_id = owner
                     ORDER BY c.start_offset DESC LIMIT 1),
                    coalesce((SELECT x.end_offset FROM streaming_event_ends x
                              WHERE x.session_id = owner AND x.event_id = event),
                             (SELECT max(l.end_offset) FROM logged_event_text(owner, event) l)))
$$;

CREATE OR REPLACE VIEW timeline_events_live AS
SELECT e.id, e.session_id, e.stage_id, e.execution_id, e.sequence_number, e.event_type, e.status,
       CASE WHEN e.status = 'streaming'
            THEN e.content || coalesce(
                (SELECT string_agg(p.content, '' ORDER BY p.start_offset)
                 FROM (SELECT c.start_offset, c.content
                       FROM timeline_event_chunks c
                       WHERE c.event_id = e.id AND c.session_id = e.session_id
                       UNION ALL
                       SELECT l.start_offset, l.content
                       FROM logged_event_text(e.session_id, e.id) l) p), '')
            ELSE e.content END AS content,
       e.metadata, e.llm_interaction_id, e.mcp_interaction_id, e.created_at,
       -- The log's last text of the event is recent while it streams: read backwards, the
       -- search stops there (at its last fold when it has none since).
       CASE WHEN e.status = 'streaming'
            THEN greatest(e.updated_at,
                          (SELECT max(c.created_at) FROM timeline_event_chunks c
                           WHERE c.event_id = e.id AND c.session_id = e.session_id),
                          (SELECT l.created_at FROM logged_event_text(e.session_id, e.id) l
                           ORDER BY l.position DESC LIMIT 1))
            ELSE e.updated_at END AS updated_at
FROM timeline_events e;

CREATE OR REPLACE FUNCTION append_timeline_chunk(event uuid, start_at bigint, delta text,
                                                 max_length bigint)
RETURNS TABLE (status text, length bigint, stored boolean)
LANGUAGE plpgsql AS $$
DECLARE
    session uuid;
BEGIN
    PERFORM pg_advisory_xact_lock(stream_lock_key(event));
    SELECT e.status, n.length, e.session_id INTO status, length, session
    FROM timeline_events e
    CROSS JOIN LATERAL streaming_event_length(e.session_id, e.id, e.content) n
    WHERE e.id = event;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    stored := status = 'streaming' AND start_at = length
              AND length + char_length(delta) <= max_length;
    IF stored THEN
        INSERT INTO timeline_event_chunks (event_id, start_offset, content, session_id)
        VALUES (event, length, delta, session);
        -- Kept here too, or an event written this way would read its log on every append.
        INSERT INTO streaming_event_ends (session_id, event_id, end_offset)
        VALUES (session, event, length + char_length(delta))
        ON CONFLICT (session_id, event_id) DO UPDATE SET end_offset = excluded.end_offset;
    END IF;
    RETURN NEXT;
END $$;

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
    -- A session whose log this group takes past a multiple of the fold span first folds its
    -- pieces (its appends are numbered after what it folds, so the fold sees all below them).
    PERFORM fold_logged_texts(d.session_id, events)
    FROM (SELECT t.session_id, count(*) AS appends
          FROM timeline_events t WHERE t.id = ANY (events) GROUP BY t.session_id) d
    CROSS JOIN LATERAL (SELECT coalesce(max(v.position), 0) AS position
                        FROM session_events v WHERE v.session_id = d.session_id) last
    WHERE (last.position + d.appends) / logged_text_fold_span()
          > last.position / logged_text_fold_span();
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
                   (SELECT n.length
                    FROM streaming_event_length(e.session_id, e.id, e.content) n) AS length
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
    ), numbered AS (
        SELECT d.*, last.position + row_number() OVER (PARTITION BY d.session_id ORDER BY d.ord)
                        AS position
        FROM decided d
        CROSS JOIN LATERAL (SELECT coalesce(max(v.position), 0) AS position
                            FROM session_events v WHERE v.session_id = d.session_id) last
        WHERE d.ok
    ), in_log AS (
        -- An event's first grouped append: its text is in the log from here on. (The look-up of
        -- an existing row writes nothing.)
        INSERT INTO event_texts_in_log (session_id, event_id, after_position)
        SELECT n.session_id, n.event, n.position - 1 FROM numbered n
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
    ), logged AS (
        INSERT INTO live_changes (session_id, position)
        SELECT n.session_id, n.position FROM numbered n ORDER BY n.session_id, n.position
    )
    SELECT array_agg(coalesce(d.ok, false) ORDER BY d.ord) INTO answers FROM decided d;
    PERFORM set_config('casefile.changes_recorded', 'off', true);
    RETURN QUERY SELECT unnest(answers);
END $$;

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
        SELECT l.content INTO final_content FROM timeline_events_live l
        WHERE l.id = event AND l.session_id = owner;
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

CREATE OR REPLACE FUNCTION forget_timeline_event_chunks() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(stream_lock_key(OLD.id));
    DELETE FROM timeline_event_chunks WHERE event_id = OLD.id AND session_id = OLD.session_id;
    DELETE FROM streaming_event_ends WHERE event_id = OLD.id AND session_id = OLD.session_id;
    DELETE FROM event_texts_in_log WHERE event_id = OLD.id AND session_id = OLD.session_id;
    RETURN NULL;
END $$;
