-- `chat_user_messages` keyed by (id, session_id), which the stage answering a question already
-- points at.
SET LOCAL lock_timeout = '5s';
-- Adding a key on an index renames the index to the key's name, which is the point: no notice.
SET LOCAL client_min_messages = warning;
ALTER TABLE stages DROP CONSTRAINT stages_chat_user_message_id_session_id_fkey;
ALTER TABLE chat_user_messages
    DROP CONSTRAINT chat_user_messages_pkey,
    ADD CONSTRAINT chat_user_messages_pkey
        PRIMARY KEY USING INDEX chat_user_messages_id_session_id_pkey,
    DROP CONSTRAINT chat_user_messages_id_session_id_key;
ALTER TABLE stages ADD CONSTRAINT stages_chat_user_message_id_session_id_fkey
    FOREIGN KEY (chat_user_message_id, session_id) REFERENCES chat_user_messages (id, session_id)
    ON DELETE CASCADE NOT VALID;
