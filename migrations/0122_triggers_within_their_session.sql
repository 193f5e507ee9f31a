-- Triggers stay within their row's session, and work on a table partitioned (or sharded) by
-- session. On a distributed database a trigger runs where the row is, on the shard of its
-- session, and may only read and write rows of that session; PostgreSQL's declarative
-- partitioning by session (`casefile migrate --partition-by-session N`, docs/scale-out.md) puts
-- each row in the partition of its session the same way. Three things did not hold:
--
-- - `record_session_event` told its tables apart by TG_TABLE_NAME, which on a partitioned table
--   names the partition the row landed in (and on Citus the shard): each trigger now passes its
--   table's name as its argument.
-- - It read an appended chunk's event by the event's id alone (every session's rows); it now
--   names the chunk's session too, as `place_agent_execution` now does for an agent's parent.
-- - `timeline_event_chunk_session` filled in a chunk's session from its event, by id alone, for
--   binaries from before 0021, which wrote chunks without it; none is left (the column is NOT
--   NULL since 0023, and the partitioned layout could not route such a row), so it is dropped.

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
    SELECT coalesce(max(position), 0) + 1 INTO e.position
    FROM session_events WHERE session_id = e.session_id;
    e.created_at := clock_timestamp();
    INSERT INTO session_events VALUES (e.*);
    INSERT INTO live_changes (session_id, position) VALUES (e.session_id, e.position);
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION place_agent_execution() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    parent agent_executions%ROWTYPE;
BEGIN
    IF NEW.parent_execution_id IS NULL THEN
        NEW.depth := 0;
        NEW.agent_type := coalesce(NEW.agent_type, 'global_supervisor');
        RETURN NEW;
    END IF;
    SELECT * INTO parent FROM agent_executions
    WHERE id = NEW.parent_execution_id AND session_id = NEW.session_id;
    IF NOT FOUND THEN
        -- The foreign key refuses the row (a parent of another session included, which the
        -- look-up by id alone used to find): give it what the checks want until then.
        NEW.depth := 1;
        NEW.agent_type := coalesce(NEW.agent_type, 'worker');
        IF NEW.agent_type <> 'global_supervisor' THEN
            NEW.team_name := coalesce(NEW.team_name, left(NEW.agent_name, 200));
        END IF;
        RETURN NEW;
    END IF;
    NEW.depth := parent.depth + 1;
    NEW.agent_type := coalesce(NEW.agent_type, 'worker');
    IF NEW.agent_type <> 'global_supervisor' AND NEW.team_name IS NULL THEN
        NEW.team_name := left(coalesce(parent.team_name, parent.agent_name), 200);
    END IF;
    RETURN NEW;
END $$;

DROP TRIGGER timeline_event_chunk_session ON timeline_event_chunks;
DROP FUNCTION timeline_event_chunk_session();

-- Each of record_session_event's triggers, as it was, with its table's name as its argument.
DROP TRIGGER record_session_event ON chat_user_messages;
CREATE CONSTRAINT TRIGGER record_session_event AFTER INSERT ON chat_user_messages
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION record_session_event('chat_user_messages');
DROP TRIGGER record_session_event ON chats;
CREATE CONSTRAINT TRIGGER record_session_event AFTER INSERT ON chats
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION record_session_event('chats');
DROP TRIGGER record_session_event ON llm_interactions;
CREATE CONSTRAINT TRIGGER record_session_event AFTER INSERT ON llm_interactions
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION record_session_event('llm_interactions');
DROP TRIGGER record_session_event ON mcp_interactions;
CREATE CONSTRAINT TRIGGER record_session_event AFTER INSERT ON mcp_interactions
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION record_session_event('mcp_interactions');
DROP TRIGGER record_session_event ON messages;
CREATE CONSTRAINT TRIGGER record_session_event AFTER INSERT ON messages
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION record_session_event('messages');
DROP TRIGGER record_session_event ON timeline_event_chunks;
CREATE CONSTRAINT TRIGGER record_session_event AFTER INSERT ON timeline_event_chunks
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN ((current_setting('casefile.changes_recorded'::text, true) IS DISTINCT FROM 'on'::text))
    EXECUTE FUNCTION record_session_event('timeline_event_chunks');
DROP TRIGGER record_session_event ON timeline_events;
CREATE CONSTRAINT TRIGGER record_session_event AFTER INSERT OR UPDATE OF status ON timeline_events
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION record_session_event('timeline_events');
DROP TRIGGER record_session_event ON agent_executions;
CREATE CONSTRAINT TRIGGER record_session_event AFTER INSERT OR UPDATE ON agent_executions
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION record_session_event('agent_executions');
DROP TRIGGER record_session_event ON sessions;
CREATE CONSTRAINT TRIGGER record_session_event AFTER INSERT OR UPDATE ON sessions
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION record_session_event('sessions');
DROP TRIGGER record_session_event ON stages;
CREATE CONSTRAINT TRIGGER record_session_event AFTER INSERT OR UPDATE ON stages
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION record_session_event('stages');
