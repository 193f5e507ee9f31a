-- A group's appends extend their session's run in place instead of inserting a row of the event
-- log per session per group (0117, 0119). With one stream per session every group holds one
-- append per session, so each append inserted a row and its index entry: about 330 WAL bytes,
-- over issue 35's 200, and near the floor of any row per append (216–251, docs/append-journal.md).
--
-- PostgreSQL logs an update that keeps its row on its page (HOT: no indexed column changes) as
-- only the bytes between the old and the new row's common prefix and suffix. So a session's run
-- (`session_event_runs`) is laid out for that: the columns that never change first, then the
-- run's events (which change only when an event joins the run), the count of its appends, and
-- last its log, the newest entry first (the older entries are then the common suffix), stored
-- uncompressed (`STORAGE EXTERNAL`: a compressed value changes whole) and extended only while
-- under `run_extension_limit()` bytes (toasted at 2 KB, a value is also logged whole); a low
-- fillfactor leaves each page the room its runs grow into. The log is one `bytea`, not an
-- array: an array's header (20 bytes between its length and its first element) would be logged
-- with every append.
--
-- A run holds consecutive positions of its session, `first_position` to
-- `first_position + appends - 1`; the newest entry is at the front of `log`. An entry is the
-- length of its text in bytes and the index of its event in `events` (each a varint: one byte
-- below 128, else four, big-endian, the top bit set), where its text starts (int4, characters),
-- microseconds since the run's `created_at` (int4) and its text (UTF-8): about 17 bytes for a
-- token. The event's stage, execution and sequence number are the event's own, read from it. A
-- group extends its session's latest run when nothing was numbered after it, the run stays
-- under the limit with them and its microseconds still fit; otherwise it starts a run. Every
-- other writer numbers after the session's last position across both tables
-- (`session_last_position`), so positions stay gapless. A session with many appends in one
-- group (more than half the limit's worth: one orchestrator's parallel agents) still gets a row
-- of `session_events` holding them as arrays (0117, 0119), which is already few bytes an append
-- and which readers expand at C speed, where walking a log takes about a microsecond an entry.

CREATE TABLE session_event_runs (
    session_id     uuid NOT NULL,
    first_position bigint NOT NULL,
    created_at     timestamptz NOT NULL,
    events         uuid[] NOT NULL,
    appends        integer NOT NULL,
    log            bytea NOT NULL,
    PRIMARY KEY (session_id, first_position),
    CONSTRAINT session_event_runs_positions_check
        CHECK (first_position >= 1 AND appends >= 1
               AND cardinality(events) BETWEEN 1 AND appends)
) WITH (fillfactor = 10);
ALTER TABLE session_event_runs ALTER COLUMN log SET STORAGE EXTERNAL;

-- How long (bytes) a run's log may grow by extension: runs of about a kilobyte, several to a
-- page at fillfactor 10, each with room for its next version, well below TOAST's 2 KB.
CREATE FUNCTION run_extension_limit() RETURNS integer LANGUAGE sql IMMUTABLE AS 'SELECT 800';

-- A length or an index in an entry: one byte below 128, else four (big-endian, top bit set).
CREATE FUNCTION run_varint(n integer) RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN n < 128 THEN set_byte('\x00'::bytea, 0, n) ELSE int4send(n | (1 << 31)) END
$$;

CREATE FUNCTION run_varint_at(log bytea, at integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN get_byte(log, at) < 128 THEN get_byte(log, at)
                ELSE ((get_byte(log, at) & 127) << 24) | (get_byte(log, at + 1) << 16)
                     | (get_byte(log, at + 2) << 8) | get_byte(log, at + 3) END
$$;

CREATE FUNCTION run_varint_width(log bytea, at integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN get_byte(log, at) < 128 THEN 1 ELSE 4 END
$$;

CREATE FUNCTION run_int4_at(log bytea, at integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (get_byte(log, at) << 24) | (get_byte(log, at + 1) << 16) | (get_byte(log, at + 2) << 8)
           | get_byte(log, at + 3)
$$;

-- One entry of a run: `event` the index of its event in the run's `events`. (Stable, as
-- `convert_to` is: declared immutable, it would not be inlined, and each entry would be a call.)
CREATE FUNCTION run_entry(event integer, start_offset bigint, since interval, delta text)
RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT run_varint(octet_length(convert_to(delta, 'UTF8'))) || run_varint(event)
           || int4send(start_offset::integer)
           || int4send((extract(epoch FROM since) * 1000000)::integer)
           || convert_to(delta, 'UTF8')
$$;

-- The newest `upto` appends of a run, newest first, each at its position: the log walked from
-- its front, entry by entry (a recursive query, which PostgreSQL inlines into its caller's plan:
-- about a microsecond an entry).
CREATE FUNCTION run_appends(first_position bigint, appends integer, created_at timestamptz,
                            events uuid[], log bytea, upto integer)
RETURNS TABLE ("position" bigint, event uuid, start_offset integer, end_offset integer,
               delta text, created_at timestamptz)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    WITH RECURSIVE walk (i, at, length, header) AS (
        -- `header`: where the entry's start offset is (after its length and its event's index).
        SELECT 1, 0, run_varint_at(log, 0),
               run_varint_width(log, 0) + run_varint_width(log, run_varint_width(log, 0))
        WHERE upto >= 1 AND octet_length(log) > 0
        UNION ALL
        SELECT w.i + 1, n.at, run_varint_at(log, n.at),
               run_varint_width(log, n.at)
                   + run_varint_width(log, n.at + run_varint_width(log, n.at))
        FROM walk w
        CROSS JOIN LATERAL (SELECT w.at + w.header + 8 + w.length AS at) n
        WHERE w.i < upto AND n.at < octet_length(log)
    )
    SELECT first_position + appends - w.i,
           events[run_varint_at(log, w.at + run_varint_width(log, w.at)) + 1],
           run_int4_at(log, w.at + w.header),
           run_int4_at(log, w.at + w.header) + char_length(t.delta),
           t.delta,
           run_appends.created_at + run_int4_at(log, w.at + w.header + 4) * interval '1 microsecond'
    FROM walk w
    CROSS JOIN LATERAL (SELECT convert_from(substr(log, w.at + w.header + 9, w.length), 'UTF8')
                            AS delta) t
$$;

-- The position of a session's last change: its last row of the log or the end of its last run.
-- PL/pgSQL, whose plans each connection keeps: a scalar SQL function holding sub-selects is
-- never inlined, and is planned again on every call.
CREATE FUNCTION session_last_position(owner uuid) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN greatest(
        (SELECT coalesce(max(v.position), 0) FROM session_events v WHERE v.session_id = owner),
        (SELECT coalesce(max(r.first_position + r.appends - 1), 0)
         FROM (SELECT r.first_position, r.appends FROM session_event_runs r
               WHERE r.session_id = owner ORDER BY r.first_position DESC LIMIT 1) r));
END $$;

-- The texts of `event` that only its session's log holds, with where and when each was logged:
-- as before (0119), and in runs. A run may span the position after which they are read (a fold
-- lands anywhere in a run), so its appends are filtered one by one; the runs read start at the
-- last one starting at or before that position.
CREATE OR REPLACE FUNCTION logged_event_text(owner uuid, event uuid)
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
    UNION ALL
    SELECT a.start_offset, a.end_offset, a.delta, a.position, a.created_at
    FROM event_texts_in_log f
    -- The first run read, found by one probe; a lateral value, so that the runs after it are a
    -- range of the key (as a sub-select in the join's condition it was a filter on all the
    -- session's runs).
    CROSS JOIN LATERAL (SELECT coalesce(max(q.first_position), 0) AS first_position
                        FROM session_event_runs q
                        WHERE q.session_id = f.session_id
                          AND q.first_position <= f.after_position + 1) b
    JOIN session_event_runs r
      ON r.session_id = f.session_id AND r.first_position >= b.first_position
     -- Only the runs it is in are walked.
     AND logged_event_text.event = ANY (r.events)
    CROSS JOIN LATERAL run_appends(r.first_position, r.appends, r.created_at, r.events, r.log,
                                   r.appends) a
    WHERE f.session_id = owner AND f.event_id = logged_event_text.event
      AND a.event = logged_event_text.event AND a.position > f.after_position
$$;

-- As before (0119), with the texts of runs folded too, and the session's last position from
-- both tables.
CREATE OR REPLACE FUNCTION fold_logged_texts(owner uuid, held uuid[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    top bigint;
    folding uuid[];
BEGIN
    top := session_last_position(owner);
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
        UNION ALL
        SELECT a.event, a.start_offset, a.delta, a.created_at, a.position
        FROM session_event_runs r
        CROSS JOIN LATERAL run_appends(r.first_position, r.appends, r.created_at, r.events,
                                       r.log, r.appends) a
        WHERE r.session_id = owner
          AND r.first_position >= coalesce(
                  (SELECT max(q.first_position) FROM session_event_runs q
                   WHERE q.session_id = owner
                     AND q.first_position <= (SELECT min(m.since) FROM marks m) + 1), 0)
          AND a.position > (SELECT min(m.since) FROM marks m) AND a.position <= top
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

CREATE OR REPLACE FUNCTION append_timeline_chunks(events uuid[], starts bigint[], deltas text[],
                                                  max_length bigint)
RETURNS TABLE (stored boolean)
LANGUAGE plpgsql AS $$
DECLARE
    answers boolean[];
    k_events uuid[]; k_sessions uuid[]; k_stages uuid[]; k_executions uuid[];
    k_sequences bigint[]; k_lengths bigint[]; k_deltas text[]; k_fresh boolean[];
    owners uuid[]; lasts bigint[]; extending bigint[]; run_rows tid[]; since timestamptz[];
    in_runs boolean[];
    at timestamptz := clock_timestamp();
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
               array_agg(x.extends OR o.size <= run_extension_limit() / 2)
        INTO owners, lasts, extending, run_rows, since, in_runs
        -- (An entry's size is its text's and 10 bytes, 3 or 6 more for a text of 128 bytes or
        -- more or an event past its run's 128th: the limit is far enough below TOAST's for them.)
        FROM (SELECT k.session_id, sum(octet_length(k.delta) + 10) AS size
              FROM unnest(k_sessions, k_deltas) AS k (session_id, delta)
              GROUP BY k.session_id) o
        CROSS JOIN LATERAL (SELECT coalesce(max(v.position), 0) AS position
                            FROM session_events v WHERE v.session_id = o.session_id) last
        LEFT JOIN LATERAL (SELECT r.ctid, r.first_position, r.appends, r.created_at,
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
        ), per_run AS (
            -- The run's events after this group: those it had, then those joining it (a group
            -- holds one append per event). The run is found by its row's address, and its
            -- events by its key with a limit: as joins, the plans each connection keeps (made
            -- while the table was small) scanned the whole table, which its fillfactor makes
            -- ten times its rows' size, on every group.
            SELECT n.session_id, n.extending, n.run_row, n.since, min(n.position) AS first_position,
                   count(*)::integer AS appends,
                   coalesce(r.events, '{}')
                       || coalesce(array_agg(n.event ORDER BY n.position)
                                       FILTER (WHERE r.events IS NULL
                                                  OR n.event <> ALL (r.events)), '{}')
                       AS events
            FROM numbered n
            LEFT JOIN LATERAL (SELECT q.events FROM session_event_runs q
                               WHERE q.session_id = n.session_id
                                 AND q.first_position = n.extending LIMIT 1) r ON true
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
    RETURN QUERY SELECT unnest(answers);
END $$;

-- Every other writer of a position numbers after the session's last, across both tables.
CREATE OR REPLACE FUNCTION record_session_event() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    -- The table the row is in: the trigger's argument, not TG_TABLE_NAME, which names the
    -- partition (or on Citus the shard) the row landed in.
    source text := TG_ARGV[0];
    e session_events%ROWTYPE;
    ev record;
BEGIN
    IF source = 'timeline_event_chunks' THEN
        SELECT session_id, stage_id, execution_id, sequence_number INTO ev
        FROM timeline_events WHERE id = NEW.event_id AND session_id = NEW.session_id;
        e.session_id := ev.session_id;
        e.kind := 'event_appended';
        e.entity_id := NEW.event_id;
        e.stage_id := ev.stage_id;
        e.execution_id := ev.execution_id;
        e.sequence_number := ev.sequence_number;
        e.start_offset := NEW.start_offset;
        e.end_offset := NEW.start_offset + char_length(NEW.content);
    ELSIF source = 'timeline_events' THEN
        IF TG_OP = 'UPDATE' AND OLD.status = NEW.status THEN
            RETURN NULL;
        END IF;
        e.session_id := NEW.session_id;
        e.kind := CASE WHEN TG_OP = 'INSERT' THEN 'event_created' ELSE 'event_finished' END;
        e.entity_id := NEW.id;
        e.stage_id := NEW.stage_id;
        e.execution_id := NEW.execution_id;
        e.sequence_number := NEW.sequence_number;
        e.status := NEW.status;
        IF TG_OP = 'INSERT' THEN
            -- The content it was created with (the rest comes in appends).
            e.start_offset := 0;
            e.end_offset := char_length(NEW.content);
        END IF;
    ELSIF source = 'sessions' THEN
        e.session_id := NEW.id;
        e.entity_id := NEW.id;
        e.status := NEW.status;
        e.kind := 'session';
        IF TG_OP = 'UPDATE' THEN
            e.previous_status := OLD.status;
            IF OLD.deleted_at IS NULL AND NEW.deleted_at IS NOT NULL THEN
                e.kind := 'session_deleted';
            ELSIF OLD.deleted_at IS NOT NULL AND NEW.deleted_at IS NULL THEN
                e.kind := 'session_restored';
            END IF;
        END IF;
    ELSIF source = 'stages' THEN
        e.session_id := NEW.session_id;
        e.kind := 'stage';
        e.entity_id := NEW.id;
        e.stage_id := NEW.id;
        e.status := NEW.status;
        IF TG_OP = 'UPDATE' THEN
            e.previous_status := OLD.status;
        END IF;
    ELSIF source = 'agent_executions' THEN
        e.session_id := NEW.session_id;
        e.kind := 'execution';
        e.entity_id := NEW.id;
        e.stage_id := NEW.stage_id;
        e.execution_id := NEW.id;
        e.status := NEW.status;
        IF TG_OP = 'UPDATE' THEN
            e.previous_status := OLD.status;
        END IF;
    ELSIF source = 'chats' THEN
        e.session_id := NEW.session_id;
        e.kind := 'chat';
        e.entity_id := NEW.id;
    ELSIF source = 'chat_user_messages' THEN
        e.session_id := NEW.session_id;
        e.kind := 'chat_user_message';
        e.entity_id := NEW.id;
    ELSE -- messages, llm_interactions, mcp_interactions
        e.session_id := NEW.session_id;
        e.kind := CASE source WHEN 'messages' THEN 'message'
                                     WHEN 'llm_interactions' THEN 'llm_interaction'
                                     ELSE 'mcp_interaction' END;
        e.entity_id := NEW.id;
        e.stage_id := NEW.stage_id;
        e.execution_id := NEW.execution_id;
    END IF;
    -- Runs as the transaction commits; the lock is held through the commit: the next writer to
    -- this session numbers after this one has committed.
    PERFORM pg_advisory_xact_lock(session_events_lock_key(e.session_id));
    e.position := session_last_position(e.session_id) + 1;
    e.created_at := clock_timestamp();
    INSERT INTO session_events VALUES (e.*);
    INSERT INTO live_changes (session_id, position) VALUES (e.session_id, e.position);
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION record_notification_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    e session_events%ROWTYPE;
BEGIN
    IF TG_OP = 'UPDATE' AND (OLD.status = NEW.status OR NEW.status = 'sending') THEN
        RETURN NULL;
    END IF;
    e.session_id := NEW.session_id;
    e.kind := 'notification';
    e.entity_id := NEW.id;
    e.status := NEW.status;
    IF TG_OP = 'UPDATE' THEN
        e.previous_status := OLD.status;
    END IF;
    -- Numbered as record_session_event numbers every change: at commit, under the session's lock.
    PERFORM pg_advisory_xact_lock(session_events_lock_key(e.session_id));
    e.position := session_last_position(e.session_id) + 1;
    e.created_at := clock_timestamp();
    INSERT INTO session_events VALUES (e.*);
    INSERT INTO live_changes (session_id, position) VALUES (e.session_id, e.position);
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION record_chat_deletion_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    e session_events%ROWTYPE;
BEGIN
    IF (OLD.deleted_at IS NULL) = (NEW.deleted_at IS NULL) THEN
        RETURN NULL;
    END IF;
    e.session_id := NEW.session_id;
    e.kind := CASE WHEN NEW.deleted_at IS NULL THEN 'chat_restored' ELSE 'chat_deleted' END;
    e.entity_id := NEW.id;
    PERFORM pg_advisory_xact_lock(session_events_lock_key(e.session_id));
    e.position := session_last_position(e.session_id) + 1;
    e.created_at := clock_timestamp();
    INSERT INTO session_events VALUES (e.*);
    INSERT INTO live_changes (session_id, position) VALUES (e.session_id, e.position);
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION forget_session_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM session_events WHERE session_id = OLD.id;
    DELETE FROM session_event_runs WHERE session_id = OLD.id;
    RETURN NULL;
END $$;
