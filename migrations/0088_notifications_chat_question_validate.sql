-- Validates 0087's foreign key: reads `notifications` under SHARE UPDATE EXCLUSIVE (writes go
-- on) and probes `chat_user_messages` for the few rows naming a question.
SET LOCAL lock_timeout = '5s';

ALTER TABLE notifications VALIDATE CONSTRAINT notifications_chat_question_fkey;
