-- Exactly the messages sent to the model in each LLM call: its execution's conversation up to
-- and including the call's last message, each row named by the call. A conversation is read a
-- page at a time from here like any other list of messages (by execution, then sequence).
-- `m.*` is expanded when the view is made: a column added to messages later must be added to
-- the view too (casefile reads every column of a message).
CREATE VIEW llm_conversation_messages AS
SELECT m.*, li.id AS interaction_id
FROM llm_interactions li
JOIN messages last ON last.id = li.last_message_id
JOIN messages m ON m.execution_id = li.execution_id
               AND m.sequence_number <= last.sequence_number;
