-- Chats are soft-deleted by their owner or an admin (`deleteChat`, `restoreChat`): when and by
-- whom, cleared again by a restore. The nullable columns rewrite nothing; the check is added
-- NOT VALID (0111 validates it without blocking writes). Each delete and restore takes a place
-- in its session's event order as a `chat` event (`deleted`, `restored`), numbered as
-- record_session_event (0008) numbers every change. Takes ACCESS EXCLUSIVE on `chats` for the
-- catalog change only.
SET LOCAL lock_timeout = '5s';

ALTER TABLE chats
    ADD COLUMN deleted_at timestamptz,
    ADD COLUMN deleted_by text;
ALTER TABLE chats ADD CONSTRAINT chats_deleted_by_check
    CHECK (deleted_by IS NULL OR (deleted_at IS NOT NULL AND char_length(deleted_by) <= 200))
    NOT VALID;

ALTER TYPE change_kind ADD VALUE IF NOT EXISTS 'chat_deleted';
ALTER TYPE change_kind ADD VALUE IF NOT EXISTS 'chat_restored';

CREATE FUNCTION record_chat_deletion_event() RETURNS trigger LANGUAGE plpgsql AS $$
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
    PERFORM pg_notify('casefile_live', '');
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER record_chat_deletion_event AFTER UPDATE OF deleted_at ON chats
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION record_chat_deletion_event();
