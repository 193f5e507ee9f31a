-- The sessions feed (`session_feed`: every session's status changes in one gapless order, kept
-- apart from the distributed tables: docs/scale-out.md) is written by the transaction that
-- changes a status, no longer by the trigger on `sessions`. On a distributed database that
-- trigger runs on the node of its session, where it may read and write that session's rows
-- only. It keeps recording the session's status history (rows of the same session); the
-- writer then gives the changes it recorded their feed positions as it ends
-- (`feed_status_changes`), under the feed's lock held to the commit, so the feed keeps its
-- order, gapless and in commit order.
--
-- A transaction says it feeds its own changes with `SET LOCAL casefile.feeds_status_changes =
-- 'on'` (every transaction casefile begins, from this release). Without it (an older binary
-- during a rolling upgrade, a change made by hand) the trigger feeds them as before. A change
-- is still recorded as its transaction commits (the trigger is deferred), unless the writer has
-- it recorded earlier to feed it.
SET LOCAL lock_timeout = '5s';

-- A change is recorded before it has its position; the writer gives it one before committing.
-- (Binaries from before 0054 read it; from 0054 on, `session_feed` is the feed.)
ALTER TABLE session_status_changes ALTER COLUMN feed_position DROP NOT NULL;

-- One status change of a session, recorded in its history: given the feed's next position when
-- `fed` (the caller holds the feed's lock), left for the writer to feed otherwise.
CREATE FUNCTION record_session_status_change(session uuid, action text, from_status text,
                                             to_status text, fed boolean)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    next_position bigint;
    change bigint;
BEGIN
    IF fed THEN
        next_position := (SELECT coalesce(max(position), 0) + 1 FROM session_feed);
    END IF;
    INSERT INTO session_status_changes (session_id, action, from_status, to_status, actor, reason,
                                        feed_position)
    VALUES (session, action, from_status, to_status,
            nullif(current_setting('casefile.actor', true), ''),
            nullif(current_setting('casefile.reason', true), ''), next_position)
    RETURNING id INTO change;
    IF fed THEN
        INSERT INTO session_feed (position, session_id, change_id)
        VALUES (next_position, session, change);
    END IF;
END $$;

CREATE OR REPLACE FUNCTION session_status_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    fed boolean := coalesce(current_setting('casefile.feeds_status_changes', true), '') <> 'on';
BEGIN
    IF fed THEN
        PERFORM pg_advisory_xact_lock(7161131761842875493);
    END IF;
    IF TG_OP = 'INSERT' THEN
        PERFORM record_session_status_change(NEW.id, 'created', NULL, NEW.status, fed);
        RETURN NULL;
    END IF;
    IF OLD.status IS DISTINCT FROM NEW.status THEN
        PERFORM record_session_status_change(NEW.id, 'status_changed', OLD.status, NEW.status,
                                             fed);
    END IF;
    IF OLD.deleted_at IS NULL AND NEW.deleted_at IS NOT NULL THEN
        PERFORM record_session_status_change(NEW.id, 'deleted', NEW.status, NEW.status, fed);
    ELSIF OLD.deleted_at IS NOT NULL AND NEW.deleted_at IS NULL THEN
        PERFORM record_session_status_change(NEW.id, 'restored', NEW.status, NEW.status, fed);
    END IF;
    RETURN NULL;
END $$;

DROP FUNCTION record_session_status_change(uuid, text, text, text);

-- The writer's part, as its transaction ends: the status changes of `sessions` it recorded and
-- has not fed yet take the feed's next positions, in the order they were recorded. The trigger
-- records them as the transaction commits (it is deferred, so the feed's lock is held only
-- from then on): they are recorded here first. The lock is taken in a statement of its own, so
-- the positions are read after every earlier holder committed; no lock is taken when nothing
-- was recorded. On a distributed database this runs where the writer's statements do (the
-- coordinator): the sessions' rows on their nodes, and the feed.
CREATE FUNCTION feed_status_changes(sessions uuid[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    SET CONSTRAINTS session_status_change IMMEDIATE;
    IF NOT EXISTS (SELECT FROM unnest(sessions) AS s (id)
                   CROSS JOIN LATERAL (SELECT FROM session_status_changes c
                                       WHERE c.session_id = s.id AND c.feed_position IS NULL
                                       LIMIT 1) u) THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(7161131761842875493);
    WITH last AS (
        SELECT coalesce(max(position), 0) AS position FROM session_feed
    ), unfed AS (
        SELECT c.id, c.session_id, last.position + row_number() OVER (ORDER BY c.id) AS position
        FROM (SELECT DISTINCT unnest(sessions)) AS s (id)
        CROSS JOIN LATERAL (SELECT c.id, c.session_id FROM session_status_changes c
                            WHERE c.session_id = s.id AND c.feed_position IS NULL OFFSET 0) c,
             last
    ), given AS (
        UPDATE session_status_changes c SET feed_position = u.position
        FROM unfed u WHERE c.session_id = u.session_id AND c.id = u.id
    )
    INSERT INTO session_feed (position, session_id, change_id)
    SELECT u.position, u.session_id, u.id FROM unfed u;
END $$;
