-- The dashboard feed's order moves out of the per-session status history into a table of its
-- own: one gapless order across all sessions is cross-session state, which cannot live in a
-- table distributed by session (docs/scale-out.md: it stays on the coordinator). An entry
-- names the status change it orders. Positions are still taken under the feed's lock, held
-- through the commit, so they appear in commit order.
--
-- `session_status_changes.feed_position` is still written, the same number, for binaries from
-- before this migration during a rolling upgrade; a later release drops it.
SET LOCAL lock_timeout = '5s';

CREATE TABLE session_feed (
    position   bigint PRIMARY KEY CHECK (position >= 1),
    session_id uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    change_id  bigint NOT NULL
);
-- A session's delete cascades to its entries by `session_id`.
CREATE INDEX session_feed_session_idx ON session_feed (session_id);

-- 'casefile' in ASCII: the feed's lock. Held from here to the commit, no status change commits
-- between the copy and the new trigger.
SELECT pg_advisory_xact_lock(7161131761842875493);

INSERT INTO session_feed (position, session_id, change_id)
SELECT feed_position, session_id, id FROM session_status_changes;

-- One status change of a session: recorded in its history and given the feed's next position.
-- The caller holds the feed's lock.
CREATE FUNCTION record_session_status_change(session uuid, action text, from_status text,
                                             to_status text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    next_position bigint := (SELECT coalesce(max(position), 0) + 1 FROM session_feed);
    change bigint;
BEGIN
    INSERT INTO session_status_changes (session_id, action, from_status, to_status, actor, reason,
                                        feed_position)
    VALUES (session, action, from_status, to_status,
            nullif(current_setting('casefile.actor', true), ''),
            nullif(current_setting('casefile.reason', true), ''), next_position)
    RETURNING id INTO change;
    INSERT INTO session_feed (position, session_id, change_id) VALUES (next_position, session, change);
END $$;

CREATE OR REPLACE FUNCTION session_status_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(7161131761842875493);
    IF TG_OP = 'INSERT' THEN
        PERFORM record_session_status_change(NEW.id, 'created', NULL, NEW.status);
        RETURN NULL;
    END IF;
    IF OLD.status IS DISTINCT FROM NEW.status THEN
        PERFORM record_session_status_change(NEW.id, 'status_changed', OLD.status, NEW.status);
    END IF;
    IF OLD.deleted_at IS NULL AND NEW.deleted_at IS NOT NULL THEN
        PERFORM record_session_status_change(NEW.id, 'deleted', NEW.status, NEW.status);
    ELSIF OLD.deleted_at IS NOT NULL AND NEW.deleted_at IS NULL THEN
        PERFORM record_session_status_change(NEW.id, 'restored', NEW.status, NEW.status);
    END IF;
    RETURN NULL;
END $$;
