-- The sessions feed's writer (0124) finds and feeds each noted session's unfed status changes by
-- that session alone. As one statement (`UPDATE … FROM` the unfed changes of every noted
-- session) its plan joined every partition of `session_status_changes` on the partitioned layout
-- (and would reach every shard on a distributed one): each feed scanned them all. In a loop
-- whose session is a parameter each statement is pruned to that session's partition as it
-- starts. The unfed changes are read once (0124 read them twice: first to decide whether to take
-- the feed's lock), and still take the feed's positions in the order they were recorded.
SET LOCAL lock_timeout = '5s';

CREATE OR REPLACE FUNCTION feed_status_changes(sessions uuid[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    session uuid;
    changes bigint[] := '{}';
    owners uuid[] := '{}';
    change record;
    next_position bigint;
BEGIN
    SET CONSTRAINTS session_status_change IMMEDIATE;
    FOREACH session IN ARRAY sessions LOOP
        SELECT changes || coalesce(array_agg(c.id ORDER BY c.id), '{}'),
               owners || coalesce(array_agg(c.session_id ORDER BY c.id), '{}')
        INTO changes, owners
        FROM session_status_changes c
        WHERE c.session_id = session AND c.feed_position IS NULL;
    END LOOP;
    IF cardinality(changes) = 0 THEN
        RETURN;
    END IF;
    -- Taken before the last position is read, so that it is read after every earlier holder
    -- committed.
    PERFORM pg_advisory_xact_lock(7161131761842875493);
    next_position := (SELECT coalesce(max(position), 0) FROM session_feed);
    FOR change IN
        SELECT DISTINCT u.id, u.session_id FROM unnest(changes, owners) AS u (id, session_id)
        ORDER BY u.id
    LOOP
        -- Still unfed: read before the lock, a change another writer's transaction fed
        -- meanwhile (a committed one left unfed, noted by both) is its, not fed twice.
        UPDATE session_status_changes SET feed_position = next_position + 1
        WHERE session_id = change.session_id AND id = change.id AND feed_position IS NULL;
        IF FOUND THEN
            next_position := next_position + 1;
            INSERT INTO session_feed (position, session_id, change_id)
            VALUES (next_position, change.session_id, change.id);
        END IF;
    END LOOP;
END $$;
