-- Chats people own (seed 002): an optional title, and each person's chats across sessions,
-- most recently active first.
--
-- A nullable column with no default is added without rewriting the table; the check reads the
-- existing rows once (all null).
ALTER TABLE chats ADD COLUMN title text
    CONSTRAINT chats_title_length CHECK (char_length(title) BETWEEN 1 AND 200);

-- `chats(owner: ME)`: one person's chats in list order, read along the index from either end.
CREATE INDEX chats_owner_activity_idx ON chats (created_by, updated_at, id);
-- An admin's `chats(owner: ANYONE)`: everyone's, in the same order.
CREATE INDEX chats_activity_idx ON chats (updated_at, id);
