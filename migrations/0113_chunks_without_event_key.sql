-- A streamed chunk no longer refers to its event by a foreign key. The key's check locks the
-- event's row (FOR KEY SHARE) on every append, and locking a row writes to it: a WAL record
-- per append (80 bytes with its page images, one seventh of an append's WAL, measured with
-- pg_walinspect), and a MultiXact when two transactions hold it. What the key guaranteed holds
-- without it: an append stores a chunk only after finding its event under the event's stream
-- lock (`append_timeline_chunk`, `append_timeline_chunks`), and an event deleted (with its
-- session) while it streams takes that lock before its chunks go with it, so a chunk is never
-- left without its event, nor added after it is gone. (A finished event has no chunks: they
-- were folded into it.)
ALTER TABLE timeline_event_chunks DROP CONSTRAINT timeline_event_chunks_event_id_fkey;

CREATE FUNCTION forget_timeline_event_chunks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(stream_lock_key(OLD.id));
    DELETE FROM timeline_event_chunks WHERE event_id = OLD.id AND session_id = OLD.session_id;
    RETURN NULL;
END $$;

CREATE TRIGGER forget_timeline_event_chunks AFTER DELETE ON timeline_events
    FOR EACH ROW WHEN (OLD.status = 'streaming') EXECUTE FUNCTION forget_timeline_event_chunks();
