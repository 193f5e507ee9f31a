-- Tool calls joined to their results (seed 002's ToolCall, seed 004's llm.tool_call and
-- llm.tool_result). An assistant message's `tool_calls` stays as sent; this table indexes the
-- calls in it by the id the model gave each one, which the tool message answering the call,
-- the MCP interaction executing it and the timeline events showing it all name. A call is an
-- element of the message's array with a string `id` and a name (`name` or `function.name`).
CREATE TABLE tool_calls (
    execution_id uuid NOT NULL,
    call_id      text NOT NULL CHECK (length(call_id) BETWEEN 1 AND 200),
    session_id   uuid NOT NULL,
    message_id   uuid NOT NULL,
    position     integer NOT NULL CHECK (position >= 0),
    -- Call ids are unique in a conversation: each names one call, answered once.
    PRIMARY KEY (execution_id, call_id),
    UNIQUE (message_id, position),
    FOREIGN KEY (message_id, execution_id) REFERENCES messages (id, execution_id) ON DELETE CASCADE
);

-- Calls already stored; where a conversation repeats an id, its first request keeps it.
INSERT INTO tool_calls (execution_id, call_id, session_id, message_id, position)
SELECT m.execution_id, c.value ->> 'id', m.session_id, m.id, (c.ordinality - 1)::integer
FROM messages m
CROSS JOIN LATERAL jsonb_array_elements(m.tool_calls) WITH ORDINALITY AS c
WHERE jsonb_typeof(m.tool_calls) = 'array'
  AND jsonb_typeof(c.value -> 'id') = 'string'
  AND length(c.value ->> 'id') BETWEEN 1 AND 200
  AND coalesce(c.value ->> 'name', c.value -> 'function' ->> 'name') IS NOT NULL
ORDER BY m.execution_id, m.sequence_number, c.ordinality
ON CONFLICT DO NOTHING;

-- The MCP interaction that executed a call: at most one per call, in the call's execution.
ALTER TABLE mcp_interactions ADD COLUMN tool_call_id text;
ALTER TABLE mcp_interactions
    ADD CONSTRAINT mcp_interactions_tool_call_fkey
        FOREIGN KEY (execution_id, tool_call_id) REFERENCES tool_calls (execution_id, call_id),
    ADD CONSTRAINT mcp_interactions_tool_call_key UNIQUE (execution_id, tool_call_id),
    ADD CONSTRAINT mcp_interactions_tool_call_check
        CHECK (interaction_type = 'tool_call' OR tool_call_id IS NULL);

-- The tool message answering a call, and the timeline events naming it.
CREATE INDEX messages_tool_answer_idx ON messages (execution_id, tool_call_id)
    WHERE tool_call_id IS NOT NULL;
CREATE INDEX timeline_events_tool_call_idx
    ON timeline_events (execution_id, (metadata ->> 'tool_call_id'), sequence_number)
    WHERE event_type IN ('llm_tool_call', 'mcp_tool_call');

-- MCP interactions across sessions, newest first (seed 002's audit of failed tool calls):
-- by time alone, by server or by tool, each also over failures only (a small part of them).
CREATE INDEX mcp_interactions_time_idx ON mcp_interactions (created_at, id);
DROP INDEX mcp_interactions_created_at_idx;
CREATE INDEX mcp_interactions_server_time_idx ON mcp_interactions (server_name, created_at, id);
CREATE INDEX mcp_interactions_tool_time_idx ON mcp_interactions (tool_name, created_at, id);
CREATE INDEX mcp_interactions_failed_time_idx ON mcp_interactions (created_at, id)
    WHERE error_message IS NOT NULL;
CREATE INDEX mcp_interactions_failed_server_time_idx
    ON mcp_interactions (server_name, created_at, id) WHERE error_message IS NOT NULL;
CREATE INDEX mcp_interactions_failed_tool_time_idx
    ON mcp_interactions (tool_name, created_at, id) WHERE error_message IS NOT NULL;
