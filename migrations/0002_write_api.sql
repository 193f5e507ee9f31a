-- Write side: streamed timeline content and idempotent creates.

-- Streaming content is appended as immutable chunk rows instead of rewriting the event row's
-- growing text on every append (PostgreSQL rewrites a whole row per UPDATE, so that would cost
-- quadratic I/O). Chunks are folded into timeline_events.content when the event finishes.
-- Offsets count characters (Unicode code points) from the start of the event's content.
CREATE TABLE timeline_event_chunks (
    event_id     uuid NOT NULL REFERENCES timeline_events (id) ON DELETE CASCADE,
    start_offset integer NOT NULL CHECK (start_offset >= 0),
    content      text NOT NULL CHECK (content <> ''),
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (event_id, start_offset)
);

-- What readers see: a streaming event's content is its folded content plus every chunk so far.
CREATE VIEW timeline_events_live AS
SELECT e.id, e.session_id, e.stage_id, e.execution_id, e.sequence_number, e.event_type, e.status,
       CASE WHEN e.status = 'streaming'
            THEN e.content || coalesce(
                (SELECT string_agg(c.content, '' ORDER BY c.start_offset)
                 FROM timeline_event_chunks c WHERE c.event_id = e.id), '')
            ELSE e.content END AS content,
       e.metadata, e.llm_interaction_id, e.mcp_interaction_id, e.created_at,
       CASE WHEN e.status = 'streaming'
            THEN greatest(e.updated_at, (SELECT max(c.created_at)
                                         FROM timeline_event_chunks c WHERE c.event_id = e.id))
            ELSE e.updated_at END AS updated_at
FROM timeline_events e;

-- One row per create that carried a client-supplied id: a retry with the same request returns
-- the record already made; a different request under the same id is a conflict. The receipt is
-- claimed first (so concurrent retries queue on its key), hence the deferred foreign key: a
-- session's own receipt precedes the session row.
CREATE TABLE create_receipts (
    id           uuid PRIMARY KEY,
    session_id   uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    operation    text NOT NULL,
    request_hash bytea NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX create_receipts_session_idx ON create_receipts (session_id);
