-- `agent_executions` keyed by (id, session_id), its place in a stage unique within the session.
-- (id, stage_id, session_id) stays: the records of an execution point at it.
SET LOCAL lock_timeout = '5s';
-- Adding a key on an index renames the index to the key's name, which is the point: no notice.
SET LOCAL client_min_messages = warning;
ALTER TABLE agent_executions
    DROP CONSTRAINT agent_executions_parent_execution_id_session_id_fkey,
    DROP CONSTRAINT agent_executions_pkey,
    ADD CONSTRAINT agent_executions_pkey PRIMARY KEY USING INDEX agent_executions_id_session_id_pkey,
    DROP CONSTRAINT agent_executions_id_session_id_key,
    DROP CONSTRAINT agent_executions_stage_id_agent_index_key,
    ADD CONSTRAINT agent_executions_stage_id_agent_index_key
        UNIQUE USING INDEX agent_executions_stage_id_agent_index_session_id_key,
    ADD CONSTRAINT agent_executions_parent_execution_id_session_id_fkey
        FOREIGN KEY (parent_execution_id, session_id) REFERENCES agent_executions (id, session_id)
        ON DELETE CASCADE NOT VALID;
