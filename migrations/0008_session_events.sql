-- One ordered event stream per session, and the agent hierarchy behind it.

-- The agent tree (seed 003's fork fields, seed 004's EventSource): what kind of agent an
-- execution is, its team, the task it was given and the summary it returned, and its depth.
-- Existing executions: a top-level one is a global supervisor; a sub-agent a worker of the team
-- named after its parent.
ALTER TABLE agent_executions
    ADD COLUMN agent_type     text,
    ADD COLUMN team_name      text,
    ADD COLUMN task           text,
    ADD COLUMN result_summary text,
    ADD COLUMN depth          integer;

ALTER TABLE agent_executions DISABLE TRIGGER live_change;
WITH RECURSIVE tree AS (
    SELECT id, 0 AS depth, NULL::text AS team FROM agent_executions WHERE parent_execution_id IS NULL
    UNION ALL
    SELECT c.id, t.depth + 1, p.agent_name
    FROM tree t
    JOIN agent_executions c ON c.parent_execution_id = t.id
    JOIN agent_executions p ON p.id = t.id
)
UPDATE agent_executions e
SET depth = least(tree.depth, 10),
    agent_type = CASE WHEN tree.depth = 0 THEN 'global_supervisor' ELSE 'worker' END,
    team_name = left(tree.team, 200)
FROM tree WHERE tree.id = e.id;
ALTER TABLE agent_executions ENABLE TRIGGER live_change;

ALTER TABLE agent_executions
    ALTER COLUMN agent_type SET NOT NULL,
    ALTER COLUMN depth SET NOT NULL,
    ADD CONSTRAINT agent_executions_agent_type_check
        CHECK (agent_type IN ('global_supervisor', 'team_supervisor', 'worker')),
    -- Seed 004: a team for team supervisors and workers, none for the global supervisor.
    ADD CONSTRAINT agent_executions_team_name_check
        CHECK ((agent_type = 'global_supervisor') = (team_name IS NULL)
               AND (team_name IS NULL OR length(team_name) BETWEEN 1 AND 200)),
    -- The global supervisor is the root of its tree.
    ADD CONSTRAINT agent_executions_global_supervisor_check
        CHECK (agent_type <> 'global_supervisor' OR parent_execution_id IS NULL),
    -- Seed 003: depth 0 is a root, and a tree is at most ten deep.
    ADD CONSTRAINT agent_executions_depth_check
        CHECK (depth BETWEEN 0 AND 10 AND (depth = 0) = (parent_execution_id IS NULL)),
    ADD CONSTRAINT agent_executions_task_check CHECK (char_length(task) <= 1000000),
    ADD CONSTRAINT agent_executions_result_summary_check
        CHECK (char_length(result_summary) <= 1000000);

-- Every writer's executions take their place in the tree: the depth from the parent, and unless
-- given, the type (a root is the global supervisor, a sub-agent a worker) and a sub-agent's team
-- (its parent's, or the team named after its parent).
CREATE FUNCTION place_agent_execution() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    parent agent_executions%ROWTYPE;
BEGIN
    IF NEW.parent_execution_id IS NULL THEN
        NEW.depth := 0;
        NEW.agent_type := coalesce(NEW.agent_type, 'global_supervisor');
        RETURN NEW;
    END IF;
    SELECT * INTO parent FROM agent_executions WHERE id = NEW.parent_execution_id;
    IF NOT FOUND THEN
        NEW.depth := 1; -- the foreign key refuses the row
        NEW.agent_type := coalesce(NEW.agent_type, 'worker');
        RETURN NEW;
    END IF;
    NEW.depth := parent.depth + 1;
    NEW.agent_type := coalesce(NEW.agent_type, 'worker');
    IF NEW.agent_type <> 'global_supervisor' AND NEW.team_name IS NULL THEN
        NEW.team_name := left(coalesce(parent.team_name, parent.agent_name), 200);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER place_agent_execution BEFORE INSERT ON agent_executions
    FOR EACH ROW EXECUTE FUNCTION place_agent_execution();

-- System events: warnings and errors the orchestrator records (an MCP server unavailable, a
-- fallback model used), with a machine-readable code in their metadata.
ALTER TABLE timeline_events DROP CONSTRAINT timeline_events_event_type_check;
ALTER TABLE timeline_events ADD CONSTRAINT timeline_events_event_type_check CHECK (event_type IN
    ('llm_thinking', 'llm_response', 'llm_tool_call', 'mcp_tool_call', 'mcp_tool_summary',
     'user_question', 'executive_summary', 'final_analysis', 'system_warning', 'system_error'));

-- What a change in a session is about.
CREATE TYPE change_kind AS ENUM (
    'session', 'session_deleted', 'session_restored', 'stage', 'execution',
    'event_created', 'event_appended', 'event_finished',
    'message', 'llm_interaction', 'mcp_interaction', 'chat', 'chat_user_message'
);

-- Every change in a session, in one order: `position` 1, 2, 3, … without gaps, in commit order.
-- Changes are numbered as their transaction commits (by deferred triggers), under a per-session
-- lock held through the commit, so a reader that has read up to N sees N+1 next and never a
-- later one first, a rolled-back writer takes no number, and a long transaction holds the lock
-- only while it commits. Durable: replays and resumes read it; `live_changes` (unlogged) only
-- tells every process which sessions have news.
CREATE TABLE session_events (
    session_id      uuid NOT NULL,
    position        bigint NOT NULL CHECK (position >= 1),
    kind            change_kind NOT NULL,
    -- The record it is about (the session, stage, execution, timeline event, message, …).
    entity_id       uuid NOT NULL,
    stage_id        uuid,
    execution_id    uuid,
    -- For a timeline change: the event's sequence number; for an append, the characters it
    -- covers, and for a creation those it was created with.
    sequence_number bigint,
    start_offset    integer,
    end_offset      integer,
    -- For a session, stage or execution: its status after the change, and before it (none on
    -- creation).
    status          text,
    previous_status text,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (session_id, position)
);

-- Which executions existed at a position (the agent tree as of a point of the stream).
CREATE INDEX session_events_execution_created_idx ON session_events (entity_id)
    WHERE kind = 'execution' AND previous_status IS NULL;

-- The lock a writer numbers a session's changes under: the low 64 bits of its id (random in a
-- UUIDv7), the key casefile also takes for a batch that writes to several sessions.
CREATE FUNCTION session_events_lock_key(session uuid) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ('x' || encode(substring(uuid_send(session) FROM 9 FOR 8), 'hex'))::bit(64)::bigint
$$;

-- The log processes follow: which session's which position is new. Its old rows go.
TRUNCATE live_changes;
ALTER TABLE live_changes
    DROP COLUMN kind, DROP COLUMN entity_id, DROP COLUMN stage_id, DROP COLUMN execution_id,
    DROP COLUMN sequence_number, DROP COLUMN start_offset, DROP COLUMN end_offset,
    DROP COLUMN status, DROP COLUMN previous_status, DROP COLUMN created_at,
    ADD COLUMN position bigint NOT NULL;
-- Processes that were following the old log resume their subscribers.
TRUNCATE change_log_epoch;

CREATE FUNCTION record_session_event() RETURNS trigger LANGUAGE plpgsql AS $$
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
    -- Constant payload: PostgreSQL folds a transaction's identical notifications into one.
    PERFORM pg_notify('casefile_live', '');
    RETURN NULL;
END $$;

DROP TRIGGER live_change ON timeline_event_chunks;
DROP TRIGGER live_change ON timeline_events;
DROP TRIGGER live_change ON sessions;
DROP TRIGGER live_change ON stages;
DROP TRIGGER live_change ON agent_executions;
DROP TRIGGER live_change ON messages;
DROP TRIGGER live_change ON llm_interactions;
DROP TRIGGER live_change ON mcp_interactions;
DROP TRIGGER live_change ON chats;
DROP TRIGGER live_change ON chat_user_messages;
DROP FUNCTION live_change();

CREATE CONSTRAINT TRIGGER record_session_event AFTER INSERT ON timeline_event_chunks
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION record_session_event();
CREATE CONSTRAINT TRIGGER record_session_event AFTER INSERT OR UPDATE OF status ON timeline_events
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION record_session_event();
CREATE CONSTRAINT TRIGGER record_session_event AFTER INSERT OR UPDATE ON sessions
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION record_session_event();
CREATE CONSTRAINT TRIGGER record_session_event AFTER INSERT OR UPDATE ON stages
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION record_session_event();
CREATE CONSTRAINT TRIGGER record_session_event AFTER INSERT OR UPDATE ON agent_executions
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION record_session_event();
CREATE CONSTRAINT TRIGGER record_session_event AFTER INSERT ON messages
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION record_session_event();
CREATE CONSTRAINT TRIGGER record_session_event AFTER INSERT ON llm_interactions
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION record_session_event();
CREATE CONSTRAINT TRIGGER record_session_event AFTER INSERT ON mcp_interactions
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION record_session_event();
CREATE CONSTRAINT TRIGGER record_session_event AFTER INSERT ON chats
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION record_session_event();
CREATE CONSTRAINT TRIGGER record_session_event AFTER INSERT ON chat_user_messages
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION record_session_event();

-- A session's events go with it (no foreign key: checking one would lock the session's row on
-- every append).
CREATE FUNCTION forget_session_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM session_events WHERE session_id = OLD.id;
    RETURN NULL;
END $$;
CREATE TRIGGER forget_session_events AFTER DELETE ON sessions
    FOR EACH ROW EXECUTE FUNCTION forget_session_events();

-- The sessions recorded before this migration get their history as far as the data tells it,
-- in time order: status changes, stages and executions created and ended, timeline events
-- created, their content (one append per chunk, or one for all of a finished event's), ended,
-- messages, interactions and chats.
INSERT INTO session_events (session_id, position, kind, entity_id, stage_id, execution_id,
                            sequence_number, start_offset, end_offset, status, previous_status,
                            created_at)
SELECT session_id,
       row_number() OVER (PARTITION BY session_id ORDER BY at, rank, sequence_number, start_offset, entity_id),
       kind, entity_id, stage_id, execution_id, sequence_number, start_offset, end_offset,
       status, previous_status, at
FROM (
    SELECT c.session_id, CASE c.action WHEN 'deleted' THEN 'session_deleted'
                                       WHEN 'restored' THEN 'session_restored'
                                       ELSE 'session' END::change_kind AS kind,
           c.session_id AS entity_id, NULL::uuid AS stage_id, NULL::uuid AS execution_id,
           NULL::bigint AS sequence_number, NULL::int AS start_offset, NULL::int AS end_offset,
           c.to_status AS status, c.from_status AS previous_status, c.changed_at AS at, 0 AS rank
    FROM session_status_changes c
    UNION ALL
    SELECT session_id, 'stage', id, id, NULL, NULL, NULL, NULL, 'pending', NULL, created_at, 1
    FROM stages
    UNION ALL
    SELECT session_id, 'stage', id, id, NULL, NULL, NULL, NULL, 'active', 'pending', started_at, 1
    FROM stages WHERE started_at IS NOT NULL
    UNION ALL
    SELECT session_id, 'stage', id, id, NULL, NULL, NULL, NULL, status,
           CASE WHEN started_at IS NULL THEN 'pending' ELSE 'active' END, completed_at, 1
    FROM stages WHERE completed_at IS NOT NULL
    UNION ALL
    SELECT session_id, 'execution', id, stage_id, id, NULL, NULL, NULL, 'pending', NULL, created_at, 2
    FROM agent_executions
    UNION ALL
    SELECT session_id, 'execution', id, stage_id, id, NULL, NULL, NULL, 'active', 'pending', started_at, 2
    FROM agent_executions WHERE started_at IS NOT NULL
    UNION ALL
    SELECT session_id, 'execution', id, stage_id, id, NULL, NULL, NULL, status,
           CASE WHEN started_at IS NULL THEN 'pending' ELSE 'active' END, completed_at, 2
    FROM agent_executions WHERE completed_at IS NOT NULL
    UNION ALL
    SELECT session_id, 'event_created', id, stage_id, execution_id, sequence_number, 0,
           CASE WHEN status = 'streaming' THEN char_length(content) ELSE 0 END,
           'streaming', NULL, created_at, 3
    FROM timeline_events
    UNION ALL
    SELECT e.session_id, 'event_appended', e.id, e.stage_id, e.execution_id, e.sequence_number,
           c.start_offset, c.start_offset + char_length(c.content), NULL, NULL, c.created_at, 4
    FROM timeline_event_chunks c JOIN timeline_events e ON e.id = c.event_id
    UNION ALL
    SELECT session_id, 'event_appended', id, stage_id, execution_id, sequence_number,
           0, char_length(content), NULL, NULL, updated_at, 4
    FROM timeline_events WHERE status <> 'streaming' AND content <> ''
    UNION ALL
    SELECT session_id, 'event_finished', id, stage_id, execution_id, sequence_number, NULL, NULL,
           status, NULL, updated_at, 5
    FROM timeline_events WHERE status <> 'streaming'
    UNION ALL
    SELECT session_id, 'message', id, stage_id, execution_id, NULL, NULL, NULL, NULL, NULL, created_at, 6
    FROM messages
    UNION ALL
    SELECT session_id, 'llm_interaction', id, stage_id, execution_id, NULL, NULL, NULL, NULL, NULL, created_at, 7
    FROM llm_interactions
    UNION ALL
    SELECT session_id, 'mcp_interaction', id, stage_id, execution_id, NULL, NULL, NULL, NULL, NULL, created_at, 8
    FROM mcp_interactions
    UNION ALL
    SELECT session_id, 'chat', id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, created_at, 9
    FROM chats
    UNION ALL
    SELECT session_id, 'chat_user_message', id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, created_at, 10
    FROM chat_user_messages
) history;

-- The dashboard feed's durable order: every status change (and creation, delete, restore) of
-- any session gets a feed position, 1, 2, 3, … in commit order. The change is recorded as its
-- transaction commits (a deferred trigger), under one lock held through the commit only.
ALTER TABLE session_status_changes ADD COLUMN feed_position bigint;
UPDATE session_status_changes c SET feed_position = n.position
FROM (SELECT id, row_number() OVER (ORDER BY id) AS position FROM session_status_changes) n
WHERE n.id = c.id;
ALTER TABLE session_status_changes ALTER COLUMN feed_position SET NOT NULL;
CREATE UNIQUE INDEX session_status_changes_feed_idx ON session_status_changes (feed_position);

CREATE OR REPLACE FUNCTION session_status_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    actor  text := nullif(current_setting('casefile.actor', true), '');
    reason text := nullif(current_setting('casefile.reason', true), '');
BEGIN
    -- 'casefile' in ASCII: the feed's lock, held through the commit.
    PERFORM pg_advisory_xact_lock(7161131761842875493);
    IF TG_OP = 'INSERT' THEN
        INSERT INTO session_status_changes (session_id, action, from_status, to_status, actor,
                                            reason, feed_position)
        VALUES (NEW.id, 'created', NULL, NEW.status, actor, reason,
                (SELECT coalesce(max(feed_position), 0) + 1 FROM session_status_changes));
        RETURN NULL;
    END IF;
    IF OLD.status IS DISTINCT FROM NEW.status THEN
        INSERT INTO session_status_changes (session_id, action, from_status, to_status, actor,
                                            reason, feed_position)
        VALUES (NEW.id, 'status_changed', OLD.status, NEW.status, actor, reason,
                (SELECT coalesce(max(feed_position), 0) + 1 FROM session_status_changes));
    END IF;
    IF OLD.deleted_at IS NULL AND NEW.deleted_at IS NOT NULL THEN
        INSERT INTO session_status_changes (session_id, action, from_status, to_status, actor,
                                            reason, feed_position)
        VALUES (NEW.id, 'deleted', NEW.status, NEW.status, actor, reason,
                (SELECT coalesce(max(feed_position), 0) + 1 FROM session_status_changes));
    ELSIF OLD.deleted_at IS NOT NULL AND NEW.deleted_at IS NULL THEN
        INSERT INTO session_status_changes (session_id, action, from_status, to_status, actor,
                                            reason, feed_position)
        VALUES (NEW.id, 'restored', NEW.status, NEW.status, actor, reason,
                (SELECT coalesce(max(feed_position), 0) + 1 FROM session_status_changes));
    END IF;
    RETURN NULL;
END $$;

DROP TRIGGER session_status_change ON sessions;
CREATE CONSTRAINT TRIGGER session_status_change AFTER INSERT OR UPDATE OF status, deleted_at
    ON sessions DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION session_status_change();

-- Short-lived tickets to one session's plain event stream (`GET /sessions/{id}/events`), for
-- clients that cannot send headers (a browser's EventSource): minted by an authenticated
-- mutation, carrying the minter's identity, kept only as a hash.
CREATE TABLE event_stream_tickets (
    ticket_hash bytea PRIMARY KEY CHECK (length(ticket_hash) = 32),
    session_id  uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    actor       text,
    role        text NOT NULL CHECK (role IN ('reader', 'operator', 'writer', 'admin')),
    -- The API token it was minted with (its revocation ends the ticket), if any.
    token_hash  bytea,
    from_proxy  boolean NOT NULL DEFAULT FALSE,
    expires_at  timestamptz NOT NULL
);
CREATE INDEX event_stream_tickets_expires_idx ON event_stream_tickets (expires_at);
