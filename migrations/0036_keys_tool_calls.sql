-- `tool_calls` keyed by (execution_id, call_id, session_id), a message's calls indexed once
-- within the session; an MCP interaction's executed call points at it with its session.
SET LOCAL lock_timeout = '5s';
-- Adding a key on an index renames the index to the key's name, which is the point: no notice.
SET LOCAL client_min_messages = warning;
ALTER TABLE mcp_interactions DROP CONSTRAINT mcp_interactions_tool_call_fkey;
ALTER TABLE tool_calls
    DROP CONSTRAINT tool_calls_pkey,
    ADD CONSTRAINT tool_calls_pkey
        PRIMARY KEY USING INDEX tool_calls_execution_id_call_id_session_id_pkey,
    DROP CONSTRAINT tool_calls_message_id_position_key,
    ADD CONSTRAINT tool_calls_message_id_position_key
        UNIQUE USING INDEX tool_calls_message_id_position_session_id_key;
ALTER TABLE mcp_interactions ADD CONSTRAINT mcp_interactions_tool_call_fkey
    FOREIGN KEY (execution_id, tool_call_id, session_id)
    REFERENCES tool_calls (execution_id, call_id, session_id) NOT VALID;
