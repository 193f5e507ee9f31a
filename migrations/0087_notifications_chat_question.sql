-- A notification may name the chat question it answers (seed 000 Q5.3): written with the
-- `finishAgentExecution` that ends the question's answering stage. Adding a nullable column
-- rewrites nothing; the foreign key is added NOT VALID (existing rows are not scanned; 0088
-- validates it without blocking writes). Takes ACCESS EXCLUSIVE on `notifications` and SHARE
-- ROW EXCLUSIVE on `chat_user_messages` for the catalog change only.
SET LOCAL lock_timeout = '5s';

ALTER TABLE notifications ADD COLUMN chat_question_id uuid;
ALTER TABLE notifications ADD CONSTRAINT notifications_chat_question_fkey
    FOREIGN KEY (chat_question_id, session_id) REFERENCES chat_user_messages (id, session_id)
    NOT VALID;
