-- Changes are announced after their commit, not in it. Every change's transaction sent
-- NOTIFY casefile_live (0004, 0008, 0086, 0110, 0114), and a transaction that notifies holds
-- PostgreSQL's one database-wide notification lock from just before its commit until the
-- commit's WAL is flushed: with many writers, commits that notify wait for one another's
-- flush, one at a time (pgbench, 50 clients of one insert each on this machine: 4,042
-- transactions/s with the notification, 11,182 without).
--
-- The functions below are the ones those migrations created, without the notification. The
-- process that committed announces instead, when another process follows the change log
-- (src/live/listen.rs): one NOTIFY of its own after its commits, at most one in flight, the
-- ones owed meanwhile folded into the next. A writer that does not announce (a binary from
-- before this migration, SQL by hand) is still read by every process within its follower's
-- periodic read (a second).

CREATE OR REPLACE FUNCTION record_session_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    e session_events%ROWTYPE;
    ev record;
BEGIN
    IF TG_TABLE_NAME = 'timeline_event_chunks' THEN
        SELECT session_id, stage_id, execution_id, sequence_number INTO ev
        FROM timeline_events WHERE id = NEW.event_id;
        e.session_id := ev.session_id;
        e.kind := 'event_appended';
        e.entity_id := NEW.event_id;
        e.stage_id := ev.stage_id;
        e.execution_id := ev.execution_id;
        e.sequence_number := ev.sequence_number;
        e.start_offset := NEW.start_offset;
        e.end_offset := NEW.start_offset + char_length(NEW.content);
    ELSIF TG_TABLE_NAME = 'timeline_events' THEN
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
    ELSIF TG_TABLE_NAME = 'sessions' THEN
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
    ELSIF TG_TABLE_NAME = 'stages' THEN
        e.session_id := NEW.session_id;
        e.kind := 'stage';
        e.entity_id := NEW.id;
        e.stage_id := NEW.id;
        e.status := NEW.status;
        IF TG_OP = 'UPDATE' THEN
            e.previous_status := OLD.status;
        END IF;
    ELSIF TG_TABLE_NAME = 'agent_executions' THEN
        e.session_id := NEW.session_id;
        e.kind := 'execution';
        e.entity_id := NEW.id;
        e.stage_id := NEW.stage_id;
        e.execution_id := NEW.id;
        e.status := NEW.status;
        IF TG_OP = 'UPDATE' THEN
            e.previous_status := OLD.status;
        END IF;
    ELSIF TG_TABLE_NAME = 'chats' THEN
        e.session_id := NEW.session_id;
        e.kind := 'chat';
        e.entity_id := NEW.id;
    ELSIF TG_TABLE_NAME = 'chat_user_messages' THEN
        e.session_id := NEW.session_id;
        e.kind := 'chat_user_message';
        e.entity_id := NEW.id;
    ELSE -- messages, llm_interactions, mcp_interactions
        e.session_id := NEW.session_id;
        e.kind := CASE TG_TABLE_NAME WHEN 'messages' THEN 'message'
                                     WHEN 'llm_interactions' THEN 'llm_interaction'
                                     ELSE 'mcp_interaction' END;
        e.entity_id := NEW.id;
        e.stage_id := NEW.stage_id;
        e.execution_id := NEW.execution_id;
    END IF;
    -- Runs as the transaction commits; the lock is held through the commit: the next writer to
    -- this session numbers after this one has committed.
    PERFORM pg_advisory_xact_lock(session_events_lock_key(e.session_id));
    SELECT coalesce(max(position), 0) + 1 INTO e.position
    FROM session_events WHERE session_id = e.session_id;
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
    -- Numbered as record_session_event (0008) numbers every change: at commit, under the
    -- session's lock.
    PERFORM pg_advisory_xact_lock(session_events_lock_key(e.session_id));
    SELECT coalesce(max(position), 0) + 1 INTO e.position
    FROM session_events WHERE session_id = e.session_id;
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
    SELECT coalesce(max(position), 0) + 1 INTO e.position
    FROM session_events WHERE session_id = e.session_id;
    e.created_at := clock_timestamp();
    INSERT INTO session_events VALUES (e.*);
    INSERT INTO live_changes (session_id, position) VALUES (e.session_id, e.position);
    RETURN NULL;
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
    RETURN QUERY SELECT unnest(answers);
END $$;
