-- Seed 003's history compression: an agent that compresses part of its history (a summary
-- standing in for earlier messages) or discards steps sends the model a selection of its
-- conversation, not the conversation up to its last message. `sent_message_ids` records that
-- selection as sent, in order (each a message of the interaction's own execution, checked by
-- the writer); NULL means the plain prefix, up to `last_message_id`, as before. The last message
-- sent is the selection's last.
--
-- A column without a default changes only the catalog. The CHECK is added NOT VALID (enforced on
-- new rows at once; every row from before is NULL there and passes it); 0102 validates it.
SET LOCAL lock_timeout = '5s';

ALTER TABLE llm_interactions
    ADD COLUMN sent_message_ids uuid[],
    ADD CONSTRAINT llm_interactions_sent_message_ids_check
        CHECK (sent_message_ids IS NULL
               OR (cardinality(sent_message_ids) >= 1
                   AND array_position(sent_message_ids, NULL) IS NULL
                   AND last_message_id = sent_message_ids[cardinality(sent_message_ids)]))
        NOT VALID;
