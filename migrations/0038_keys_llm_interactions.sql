-- `llm_interactions` keyed by (id, session_id), which timeline events already point at.
SET LOCAL lock_timeout = '5s';
-- Adding a key on an index renames the index to the key's name, which is the point: no notice.
SET LOCAL client_min_messages = warning;
ALTER TABLE timeline_events DROP CONSTRAINT timeline_events_llm_interaction_id_session_id_fkey;
ALTER TABLE llm_interactions
    DROP CONSTRAINT llm_interactions_pkey,
    ADD CONSTRAINT llm_interactions_pkey PRIMARY KEY USING INDEX llm_interactions_id_session_id_pkey,
    DROP CONSTRAINT llm_interactions_id_session_id_key;
ALTER TABLE timeline_events ADD CONSTRAINT timeline_events_llm_interaction_id_session_id_fkey
    FOREIGN KEY (llm_interaction_id, session_id) REFERENCES llm_interactions (id, session_id)
    NOT VALID;
