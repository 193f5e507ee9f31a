-- Creating and finishing a timeline event, each in one statement (src/store/write/timeline.rs).
--
-- Both hold their session's row lock, which every creation and finish in the session needs
-- too. Run as a transaction of several statements, one round trip after another, that lock was
-- held across four to six round trips; with many agents streaming into one session, creations
-- and finishes queued on it holding pooled connections, and the appends' groups waited for
-- those connections (p99 of the appends measured at 39.6 ms with 20 appends per event against
-- 15.5 ms with no event finishing). Sent on their own, these statements commit at once and
-- hold the lock only while they run.
--
-- Each does the common case and declines (returns no row, having written nothing) every other
-- one, which the caller then decides step by step in a transaction: a retried or reused
-- client id, a pending execution (its first record starts it), a finished event, a missing
-- record, a link to an interaction of another session. The caller's transaction, once it has
-- taken its locks and made its checks, calls the same function to write, so the rows are
-- written in one place.
--
-- Locks, in the one order (src/store/write/locks.rs): the session's row, then the execution's
-- row (under it), or the event's stream. Both are given the session: the statement that
-- calls them alone finds it by the record's id (the API names records by id alone), one in a
-- transaction has it already.

-- An event inserted with its session's next number, whose row the caller has locked, so
-- writers to one session number one at a time, with no gap (a rolled-back transaction gives its
-- number back). Also a chat's question, recorded under the execution that will answer it.
CREATE FUNCTION insert_timeline_event(owner uuid, stage uuid, execution uuid, event uuid,
                                      kind text, initial_status text, initial_content text,
                                      initial_metadata jsonb)
RETURNS SETOF timeline_events
LANGUAGE sql AS $$
    INSERT INTO timeline_events (id, session_id, stage_id, execution_id, sequence_number,
                                 event_type, status, content, metadata)
    VALUES (event, owner, stage, execution,
            (SELECT coalesce(max(e.sequence_number), 0) + 1 FROM timeline_events e
             WHERE e.session_id = owner),
            kind, initial_status, initial_content, initial_metadata)
    RETURNING *;
$$;

-- A new event of a running execution. A client-chosen id is claimed for its request (the
-- operation and the request's hash, null when the id is the server's), as `create_receipts`
-- records every create with a client id. No row when the execution is not running, or the id
-- is already claimed or used.
CREATE FUNCTION create_timeline_event(owner uuid, execution uuid, event uuid,
                                      receipt_operation text, receipt_hash bytea, kind text,
                                      initial_status text, initial_content text,
                                      initial_metadata jsonb)
RETURNS SETOF timeline_events
LANGUAGE plpgsql AS $$
DECLARE
    stage uuid;
BEGIN
    PERFORM FROM sessions s WHERE s.id = owner FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT x.stage_id INTO stage FROM agent_executions x
    WHERE x.id = execution AND x.session_id = owner AND x.status = 'active'
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF receipt_hash IS NOT NULL THEN
        IF EXISTS (SELECT FROM timeline_events e WHERE e.id = event) THEN
            RETURN;
        END IF;
        -- A concurrent claim of the same id waits here for the first to commit.
        INSERT INTO create_receipts (id, session_id, operation, request_hash)
        VALUES (event, owner, receipt_operation, receipt_hash)
        ON CONFLICT (id) DO NOTHING;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;
    RETURN QUERY SELECT * FROM insert_timeline_event(owner, stage, execution, event, kind,
                                                    initial_status, initial_content,
                                                    initial_metadata);
END $$;

-- A streaming event ended with `final_status`: its text (`final_content`, or what was streamed
-- when null) written into its row once and its chunks dropped. No row when the event is not
-- streaming, or a link names no interaction of its session.
CREATE FUNCTION finish_timeline_event(owner uuid, event uuid, final_status text,
                                      final_content text, final_metadata jsonb, llm uuid,
                                      mcp uuid)
RETURNS SETOF timeline_events
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM FROM sessions s WHERE s.id = owner FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- Before reading the text: no append lands between what is read and what is written.
    PERFORM pg_advisory_xact_lock(stream_lock_key(event));
    IF NOT EXISTS (SELECT FROM timeline_events e
                   WHERE e.id = event AND e.session_id = owner AND e.status = 'streaming')
       OR (llm IS NOT NULL AND NOT EXISTS (SELECT FROM llm_interactions i
                                           WHERE i.id = llm AND i.session_id = owner))
       OR (mcp IS NOT NULL AND NOT EXISTS (SELECT FROM mcp_interactions i
                                           WHERE i.id = mcp AND i.session_id = owner)) THEN
        RETURN;
    END IF;
    IF final_content IS NULL THEN
        SELECT l.content INTO final_content FROM timeline_events_live l
        WHERE l.id = event AND l.session_id = owner;
    END IF;
    DELETE FROM timeline_event_chunks c WHERE c.event_id = event AND c.session_id = owner;
    RETURN QUERY
    UPDATE timeline_events e
    SET status = final_status, content = final_content,
        metadata = coalesce(final_metadata, e.metadata),
        llm_interaction_id = coalesce(llm, e.llm_interaction_id),
        mcp_interaction_id = coalesce(mcp, e.mcp_interaction_id), updated_at = now()
    WHERE e.id = event AND e.session_id = owner
    RETURNING e.*;
END $$;
