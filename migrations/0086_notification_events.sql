-- The session event stream's `notification` category: a notification's creation and each
-- outcome a worker reports (sent, delivered, a failed attempt, failed for good) take a place
-- in its session's order, as every other change does (0008). A claim (to `sending`) takes
-- none: it is a worker's bookkeeping, and a claim spans sessions, so numbering it would take
-- every claimed session's lock in one transaction. Notifications written before this
-- migration keep no history. Creating the type value, function and trigger locks
-- `notifications` (SHARE ROW EXCLUSIVE) for the catalog change only.
SET LOCAL lock_timeout = '5s';

ALTER TYPE change_kind ADD VALUE IF NOT EXISTS 'notification';

CREATE FUNCTION record_notification_event() RETURNS trigger LANGUAGE plpgsql AS $$
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
    PERFORM pg_notify('casefile_live', '');
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER record_session_event AFTER INSERT OR UPDATE OF status ON notifications
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION record_notification_event();
