-- Live updates, made dependable.
--
-- PostgreSQL 15+ makes the sequence of an UNLOGGED table unlogged too: after a crash it would
-- restart at 1 while running processes still expect ids above the last one they read. A logged
-- sequence keeps counting up (the table is still emptied, which the hub notices).
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 150000 THEN
        EXECUTE 'ALTER SEQUENCE live_changes_id_seq SET LOGGED';
    END IF;
END $$;

-- The status before an update, so that the dashboard feed can skip updates that did not change
-- it (sessions are updated for timestamps and analyses far more often than for status).
ALTER TABLE live_changes ADD COLUMN previous_status text;

-- As in 0003, but the NOTIFY payload is constant: PostgreSQL folds identical notifications of
-- one transaction into one, so a batch of a thousand changes wakes listeners once, not a thousand
-- times. Readers never needed the id (they read every change after the last one they read).
CREATE OR REPLACE FUNCTION live_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ev record;
    old_status text;
BEGIN
    IF TG_OP = 'UPDATE' AND TG_TABLE_NAME IN ('sessions', 'stages', 'agent_executions') THEN
        old_status := OLD.status;
    END IF;
    IF TG_TABLE_NAME = 'timeline_event_chunks' THEN
        SELECT session_id, stage_id, execution_id, sequence_number INTO ev
        FROM timeline_events WHERE id = NEW.event_id;
        INSERT INTO live_changes (session_id, kind, entity_id, stage_id, execution_id,
                                  sequence_number, start_offset, end_offset)
        VALUES (ev.session_id, 'event_appended', NEW.event_id, ev.stage_id, ev.execution_id,
                ev.sequence_number, NEW.start_offset, NEW.start_offset + char_length(NEW.content));
    ELSIF TG_TABLE_NAME = 'timeline_events' THEN
        IF TG_OP = 'UPDATE' AND OLD.status = NEW.status THEN
            RETURN NULL;
        END IF;
        INSERT INTO live_changes (session_id, kind, entity_id, stage_id, execution_id,
                                  sequence_number, status)
        VALUES (NEW.session_id, CASE WHEN TG_OP = 'INSERT' THEN 'event_created' ELSE 'event_finished' END,
                NEW.id, NEW.stage_id, NEW.execution_id, NEW.sequence_number, NEW.status);
    ELSIF TG_TABLE_NAME = 'sessions' THEN
        INSERT INTO live_changes (session_id, kind, entity_id, status, previous_status)
        VALUES (NEW.id, 'session', NEW.id, NEW.status, old_status);
    ELSIF TG_TABLE_NAME = 'stages' THEN
        INSERT INTO live_changes (session_id, kind, entity_id, stage_id, status, previous_status)
        VALUES (NEW.session_id, 'stage', NEW.id, NEW.id, NEW.status, old_status);
    ELSIF TG_TABLE_NAME = 'agent_executions' THEN
        INSERT INTO live_changes (session_id, kind, entity_id, stage_id, execution_id, status,
                                  previous_status)
        VALUES (NEW.session_id, 'execution', NEW.id, NEW.stage_id, NEW.id, NEW.status, old_status);
    ELSIF TG_TABLE_NAME = 'chats' OR TG_TABLE_NAME = 'chat_user_messages' THEN
        INSERT INTO live_changes (session_id, kind, entity_id)
        VALUES (NEW.session_id, TG_TABLE_NAME, NEW.id);
    ELSE -- messages, llm_interactions, mcp_interactions
        INSERT INTO live_changes (session_id, kind, entity_id, stage_id, execution_id)
        VALUES (NEW.session_id, TG_TABLE_NAME, NEW.id, NEW.stage_id, NEW.execution_id);
    END IF;
    PERFORM pg_notify('casefile_live', '');
    RETURN NULL;
END $$;
