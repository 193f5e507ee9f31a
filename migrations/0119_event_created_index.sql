-- no-transaction
-- Where each timeline event's creation sits in its session's event log: the event's appended
-- text now lives in the log (0120), and a streaming event's text is read from the rows after its
-- creation. One entry per event, none per append. Built without blocking writes; a failed build
-- leaves an invalid index, to drop before starting again:
--   DROP INDEX CONCURRENTLY session_events_event_created_idx;
CREATE INDEX CONCURRENTLY IF NOT EXISTS session_events_event_created_idx
    ON session_events (session_id, entity_id) WHERE kind = 'event_created';
