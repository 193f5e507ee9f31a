-- `messages` keyed by (id, session_id); a conversation's sequence numbers unique within the
-- session; the (id, execution_id) key that LLM interactions and tool calls point at (a message
-- of their own conversation) now carries the session, and so do their foreign keys.
SET LOCAL lock_timeout = '5s';
-- Adding a key on an index renames the index to the key's name, which is the point: no notice.
SET LOCAL client_min_messages = warning;
ALTER TABLE llm_interactions DROP CONSTRAINT llm_interactions_last_message_id_execution_id_fkey;
ALTER TABLE tool_calls DROP CONSTRAINT tool_calls_message_id_execution_id_fkey;
ALTER TABLE messages
    DROP CONSTRAINT messages_pkey,
    ADD CONSTRAINT messages_pkey PRIMARY KEY USING INDEX messages_id_session_id_pkey,
    DROP CONSTRAINT messages_execution_id_sequence_number_key,
    ADD CONSTRAINT messages_execution_id_sequence_number_key
        UNIQUE USING INDEX messages_execution_id_sequence_number_session_id_key,
    DROP CONSTRAINT messages_id_execution_id_key,
    ADD CONSTRAINT messages_id_execution_id_session_id_key
        UNIQUE USING INDEX messages_id_execution_id_session_id_key;
ALTER TABLE llm_interactions ADD CONSTRAINT llm_interactions_last_message_id_execution_id_fkey
    FOREIGN KEY (last_message_id, execution_id, session_id)
    REFERENCES messages (id, execution_id, session_id) NOT VALID;
ALTER TABLE tool_calls ADD CONSTRAINT tool_calls_message_id_execution_id_fkey
    FOREIGN KEY (message_id, execution_id, session_id)
    REFERENCES messages (id, execution_id, session_id) ON DELETE CASCADE NOT VALID;
