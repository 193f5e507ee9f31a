-- `mcp_interactions` keyed by (id, session_id), which timeline events already point at; a tool
-- call is executed once within the session.
SET LOCAL lock_timeout = '5s';
-- Adding a key on an index renames the index to the key's name, which is the point: no notice.
SET LOCAL client_min_messages = warning;
ALTER TABLE timeline_events DROP CONSTRAINT timeline_events_mcp_interaction_id_session_id_fkey;
ALTER TABLE mcp_interactions
    DROP CONSTRAINT mcp_interactions_pkey,
    ADD CONSTRAINT mcp_interactions_pkey PRIMARY KEY USING INDEX mcp_interactions_id_session_id_pkey,
    DROP CONSTRAINT mcp_interactions_id_session_id_key,
    DROP CONSTRAINT mcp_interactions_tool_call_key,
    ADD CONSTRAINT mcp_interactions_tool_call_key
        UNIQUE USING INDEX mcp_interactions_tool_call_session_key;
ALTER TABLE timeline_events ADD CONSTRAINT timeline_events_mcp_interaction_id_session_id_fkey
    FOREIGN KEY (mcp_interaction_id, session_id) REFERENCES mcp_interactions (id, session_id)
    NOT VALID;
