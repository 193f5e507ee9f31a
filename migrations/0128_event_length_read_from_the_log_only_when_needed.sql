-- Where a streaming event's text ends, as every append checks it (`streaming_event_length`,
-- 0119): the text in its session's log is read only when `streaming_event_ends` has no row for
-- the event (its first append, or after a crash emptied that unlogged table), and through a
-- PL/pgSQL function, whose statements are planned and started only when it is called.
--
-- As a sub-select of the SQL function, `logged_event_text` was inlined into the plan of each
-- statement that checks an append (its two branches, the session's log rows and runs, and the
-- recursive walk of a run's entries), and PostgreSQL sets up every node of a kept plan each
-- time the statement starts, read or not. Profiled (perf, pgbench calling
-- `append_timeline_chunks` once per transaction, one client), setting up plans took about a
-- quarter of the backend's time plain and a third partitioned by 4, where the look-ups of each
-- append's session (pruned per row) set up a scan of every partition of each table: the read
-- of the log was most of the group's first statement. Same result, same snapshot (the function
-- is stable, so it reads with its caller's).
SET LOCAL lock_timeout = '5s';

CREATE FUNCTION logged_event_text_end(owner uuid, event uuid) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT max(l.end_offset) FROM logged_event_text(owner, event) l);
END $$;

CREATE OR REPLACE FUNCTION streaming_event_length(owner uuid, event uuid, folded text)
RETURNS TABLE (length bigint)
LANGUAGE sql STABLE AS $$
    SELECT greatest(char_length(folded)::bigint,
                    (SELECT c.start_offset + char_length(c.content)
                     FROM timeline_event_chunks c
                     WHERE c.event_id = event AND c.session_id = owner
                     ORDER BY c.start_offset DESC LIMIT 1),
                    coalesce((SELECT x.end_offset FROM streaming_event_ends x
                              WHERE x.session_id = owner AND x.event_id = event),
                             logged_event_text_end(owner, event)))
$$;
