-- `stages` keyed by (id, session_id). The old unique (id, session_id) served only as the target
-- of agent executions' foreign key, which now points at the primary key. Locks `stages` and
-- `agent_executions` exclusively for catalog changes only; the re-added foreign key is
-- validated at the end (0057).
SET LOCAL lock_timeout = '5s';
-- Adding a key on an index renames the index to the key's name, which is the point: no notice.
SET LOCAL client_min_messages = warning;
ALTER TABLE agent_executions DROP CONSTRAINT agent_executions_stage_id_session_id_fkey;
ALTER TABLE stages
    DROP CONSTRAINT stages_pkey,
    ADD CONSTRAINT stages_pkey PRIMARY KEY USING INDEX stages_id_session_id_pkey,
    DROP CONSTRAINT stages_id_session_id_key;
DROP INDEX stages_chat_user_message_idx;
ALTER INDEX stages_chat_user_message_session_idx RENAME TO stages_chat_user_message_idx;
ALTER TABLE agent_executions ADD CONSTRAINT agent_executions_stage_id_session_id_fkey
    FOREIGN KEY (stage_id, session_id) REFERENCES stages (id, session_id) ON DELETE CASCADE
    NOT VALID;
