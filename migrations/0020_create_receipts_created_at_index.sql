-- no-transaction
-- Idempotency receipts are forgotten oldest first. Built without blocking writes; after a
-- failed build, drop the invalid index before starting again.
CREATE INDEX CONCURRENTLY IF NOT EXISTS create_receipts_created_at_idx
    ON create_receipts (created_at);
