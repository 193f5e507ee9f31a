-- `chats` keyed by (id, session_id), which chat questions and the stages answering them already
-- point at.
SET LOCAL lock_timeout = '5s';
-- Adding a key on an index renames the index to the key's name, which is the point: no notice.
SET LOCAL client_min_messages = warning;
ALTER TABLE chat_user_messages DROP CONSTRAINT chat_user_messages_chat_id_session_id_fkey;
ALTER TABLE stages DROP CONSTRAINT stages_chat_id_session_id_fkey;
ALTER TABLE chats
    DROP CONSTRAINT chats_pkey,
    ADD CONSTRAINT chats_pkey PRIMARY KEY USING INDEX chats_id_session_id_pkey,
    DROP CONSTRAINT chats_id_session_id_key;
ALTER TABLE chat_user_messages ADD CONSTRAINT chat_user_messages_chat_id_session_id_fkey
    FOREIGN KEY (chat_id, session_id) REFERENCES chats (id, session_id) ON DELETE CASCADE NOT VALID;
ALTER TABLE stages ADD CONSTRAINT stages_chat_id_session_id_fkey
    FOREIGN KEY (chat_id, session_id) REFERENCES chats (id, session_id) ON DELETE CASCADE NOT VALID;
