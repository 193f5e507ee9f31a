-- The audit trail of control-plane changes that belong to no session (chain versions first):
-- who made each, from which request and client, and the fields it changed (before and after,
-- large payloads and secrets left out). A new table: creating it locks nothing in use.
-- Local: written rarely (by writers registering chains, by admins), read by admins across
-- all of it, and pruned by age.
CREATE TABLE audit_records (
    id              uuid PRIMARY KEY,
    at              timestamptz NOT NULL DEFAULT now(),
    -- The caller's identity, as `createdBy` records it (NULL: a caller without one).
    actor           text,
    -- The mutation, as the schema names it (`deprecateChain`).
    action          text NOT NULL CHECK (length(action) BETWEEN 1 AND 100),
    target_type     text NOT NULL CHECK (length(target_type) BETWEEN 1 AND 100),
    -- The target's id as text: a uuid, or a number (a price's).
    target_id       text NOT NULL CHECK (length(target_id) BETWEEN 1 AND 100),
    request_id      text CHECK (length(request_id) <= 128),
    client_address  text CHECK (length(client_address) <= 100),
    user_agent      text CHECK (length(user_agent) <= 500),
    -- [{"field": …, "before": …, "after": …}], only the fields that changed.
    changes         jsonb NOT NULL CHECK (jsonb_typeof(changes) = 'array')
);

-- Newest first, and by age for the retention policy.
CREATE INDEX audit_records_at ON audit_records (at DESC, id DESC);
CREATE INDEX audit_records_target ON audit_records (target_type, target_id, at DESC);
