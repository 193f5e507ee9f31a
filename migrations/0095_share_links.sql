-- Share links (seed 003's `share_secret_key`): a secret that opens one session, read-only, to
-- someone without an account. Like an API token, only the secret's SHA-256 is stored, and any
-- change that can make a link unusable tells every process to forget what it cached
-- (`NOTIFY casefile_tokens`, the tokens' channel: one cache holds both). Local
-- (docs/scale-out.md): looked up by its secret's hash, which names no session; tiny. A new
-- table: creating it locks nothing in use but `sessions`, for the instant of the foreign key.
SET LOCAL lock_timeout = '5s';

CREATE TABLE share_links (
    id           uuid PRIMARY KEY,
    session_id   uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    secret_hash  bytea NOT NULL UNIQUE CHECK (length(secret_hash) = 32),
    -- What it is for, as its creator said (at most 500 characters).
    note         text CHECK (length(note) BETWEEN 1 AND 500),
    created_by   text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    last_used_at timestamptz,
    revoked_at   timestamptz,
    revoked_by   text
);
-- A session's links, oldest first; a session's delete cascades along it.
CREATE INDEX share_links_session_idx ON share_links (session_id, created_at, id);

-- The tokens' trigger function (0005): the same notification on the same channel.
CREATE TRIGGER share_links_changed
    AFTER INSERT OR DELETE OR UPDATE OF secret_hash, expires_at, revoked_at, session_id
    ON share_links FOR EACH STATEMENT EXECUTE FUNCTION api_tokens_changed();
