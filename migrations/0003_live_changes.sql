-- Live updates: every change is logged by triggers in the writing transaction and announced
-- with a small NOTIFY (just the log id). Each casefile process reads the log once per change
-- (never once per subscriber) and fans it out; after a lost LISTEN connection it catches up
-- from the last id it read. The log is UNLOGGED (no WAL): it only bridges the moment between a
-- commit and its delivery; subscribers resume from the real tables with their cursors.
CREATE UNLOGGED TABLE live_changes (
    id           bigserial PRIMARY KEY,
    session_id   uuid NOT NULL,
    kind         text NOT NULL,
    entity_id    uuid NOT NULL,
    stage_id     uuid,
    execution_id uuid,
    sequence_number bigint,
    start_offset integer,
    end_offset   integer,
    status       text,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE FUNCTION live_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    change_id bigint;
    ev record;
BEGIN
    IF TG_TABLE_NAME = 'timeline_event_chunks' THEN
        SELECT session_id, stage_id, execution_id, sequence_number INTO ev
        FROM timeline_events WHERE id = NEW.event_id;
        INSERT INTO live_changes (session_id, kind, entity_id, stage_id, execution_id,
                                  sequence_number, start_offset, end_offset)
        VALUES (ev.session_id, 'event_appended', NEW.event_id, ev.stage_id, ev.execution_id,
                ev.sequence_number, NEW.start_offset, NEW.start_offset + char_length(NEW.content))
        RETURNING id INTO change_id;
    ELSIF TG_TABLE_NAME = 'timeline_events' THEN
        IF TG_OP = 'UPDATE' AND OLD.status = NEW.status THEN
            RETURN NULL;
        END IF;
        INSERT INTO live_changes (session_id, kind, entity_id, stage_id, execution_id,
                                  sequence_number, status)
        VALUES (NEW.session_id, CASE WHEN TG_OP = 'INSERT' THEN 'event_created' ELSE 'event_finished' END,
                NEW.id, NEW.stage_id, NEW.execution_id, NEW.sequence_number, NEW.status)
        RETURNING id INTO change_id;
    ELSIF TG_TABLE_NAME = 'sessions' THEN
        INSERT INTO live_changes (session_id, kind, entity_id, status)
        VALUES (NEW.id, 'session', NEW.id, NEW.status)
        RETURNING id INTO change_id;
    ELSIF TG_TABLE_NAME = 'stages' THEN
        INSERT INTO live_changes (session_id, kind, entity_id, stage_id, status)
        VALUES (NEW.session_id, 'stage', NEW.id, NEW.id, NEW.status)
        RETURNING id INTO change_id;
    ELSIF TG_TABLE_NAME = 'agent_executions' THEN
        INSERT INTO live_changes (session_id, kind, entity_id, stage_id, execution_id, status)
        VALUES (NEW.session_id, 'execution', NEW.id, NEW.stage_id, NEW.id, NEW.status)
        RETURNING id INTO change_id;
    ELSIF TG_TABLE_NAME = 'chats' OR TG_TABLE_NAME = 'chat_user_messages' THEN
        INSERT INTO live_changes (session_id, kind, entity_id)
        VALUES (NEW.session_id, TG_TABLE_NAME, NEW.id)
        RETURNING id INTO change_id;
    ELSE -- messages, llm_interactions, mcp_interactions
        INSERT INTO live_changes (session_id, kind, entity_id, stage_id, execution_id)
        VALUES (NEW.session_id, TG_TABLE_NAME, NEW.id, NEW.stage_id, NEW.execution_id)
        RETURNING id INTO change_id;
    END IF;
    PERFORM pg_notify('casefile_live', change_id::text);
    RETURN NULL;
END $$;

CREATE TRIGGER live_change AFTER INSERT ON timeline_event_chunks FOR EACH ROW EXECUTE FUNCTION live_change();
CREATE TRIGGER live_change AFTER INSERT OR UPDATE OF status ON timeline_events FOR EACH ROW EXECUTE FUNCTION live_change();
CREATE TRIGGER live_change AFTER INSERT OR UPDATE ON sessions FOR EACH ROW EXECUTE FUNCTION live_change();
CREATE TRIGGER live_change AFTER INSERT OR UPDATE ON stages FOR EACH ROW EXECUTE FUNCTION live_change();
CREATE TRIGGER live_change AFTER INSERT OR UPDATE ON agent_executions FOR EACH ROW EXECUTE FUNCTION live_change();
CREATE TRIGGER live_change AFTER INSERT ON messages FOR EACH ROW EXECUTE FUNCTION live_change();
CREATE TRIGGER live_change AFTER INSERT ON llm_interactions FOR EACH ROW EXECUTE FUNCTION live_change();
CREATE TRIGGER live_change AFTER INSERT ON mcp_interactions FOR EACH ROW EXECUTE FUNCTION live_change();
CREATE TRIGGER live_change AFTER INSERT ON chats FOR EACH ROW EXECUTE FUNCTION live_change();
CREATE TRIGGER live_change AFTER INSERT ON chat_user_messages FOR EACH ROW EXECUTE FUNCTION live_change();
