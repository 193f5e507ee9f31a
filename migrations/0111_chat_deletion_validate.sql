-- Validates 0110's check: reads `chats` under SHARE UPDATE EXCLUSIVE (writes go on).
SET LOCAL lock_timeout = '5s';

ALTER TABLE chats VALIDATE CONSTRAINT chats_deleted_by_check;
