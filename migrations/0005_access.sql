-- Access control: API tokens, who created what, and every session status change with its actor.

-- An API token. The secret is never stored: only its SHA-256, which is what a presented token is
-- looked up by. Names are unique for good (revoked ones included), so an actor recorded as
-- `token:NAME` always means the same token.
CREATE TABLE api_tokens (
    id           uuid PRIMARY KEY,
    name         text NOT NULL UNIQUE CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$'),
    role         text NOT NULL CHECK (role IN ('reader', 'operator', 'writer', 'admin')),
    secret_hash  bytea NOT NULL UNIQUE CHECK (length(secret_hash) = 32),
    created_by   text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz,
    last_used_at timestamptz,
    revoked_at   timestamptz,
    revoked_by   text
);

-- Every process caches verified tokens (and refused secrets); any change that can make one
-- unusable (or usable) tells them all to forget, whatever made it (the API, the command line,
-- plain SQL). The payload is the operation: a new token only invalidates refusals. Writing
-- `last_used_at` is not such a change.
CREATE FUNCTION api_tokens_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('casefile_tokens', TG_OP);
    RETURN NULL;
END $$;
CREATE TRIGGER api_tokens_changed
    AFTER INSERT OR DELETE OR UPDATE OF name, role, secret_hash, expires_at, revoked_at
    ON api_tokens FOR EACH STATEMENT EXECUTE FUNCTION api_tokens_changed();

-- Who (a token as `token:NAME`, or the SSO proxy's user) created a session or a chat question.
-- A chat's `created_by` (0001) is its owner.
ALTER TABLE sessions ADD COLUMN created_by text;
ALTER TABLE chat_user_messages ADD COLUMN created_by text;

-- Every session status change, and deletes and restores, with who did it and why. Written by a
-- trigger, so no code path can change a session without leaving a row here; the acting identity
-- and the reason come from transaction-local settings (`casefile.actor`, `casefile.reason`) that
-- the API sets (absent: a change the system made, e.g. a cancelling session whose last agent ended).
CREATE TABLE session_status_changes (
    id          bigserial PRIMARY KEY,
    session_id  uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    action      text NOT NULL CHECK (action IN ('created', 'status_changed', 'deleted', 'restored')),
    from_status text,
    to_status   text NOT NULL,
    actor       text,
    reason      text,
    changed_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX session_status_changes_session_idx ON session_status_changes (session_id, id);
-- "Sessions cancelled (or deleted) by X".
CREATE INDEX session_status_changes_actor_idx ON session_status_changes (actor, to_status)
    WHERE actor IS NOT NULL;

CREATE FUNCTION session_status_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    actor  text := nullif(current_setting('casefile.actor', true), '');
    reason text := nullif(current_setting('casefile.reason', true), '');
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO session_status_changes (session_id, action, from_status, to_status, actor, reason)
        VALUES (NEW.id, 'created', NULL, NEW.status, actor, reason);
        RETURN NULL;
    END IF;
    IF OLD.status IS DISTINCT FROM NEW.status THEN
        INSERT INTO session_status_changes (session_id, action, from_status, to_status, actor, reason)
        VALUES (NEW.id, 'status_changed', OLD.status, NEW.status, actor, reason);
    END IF;
    IF OLD.deleted_at IS NULL AND NEW.deleted_at IS NOT NULL THEN
        INSERT INTO session_status_changes (session_id, action, from_status, to_status, actor, reason)
        VALUES (NEW.id, 'deleted', NEW.status, NEW.status, actor, reason);
    ELSIF OLD.deleted_at IS NOT NULL AND NEW.deleted_at IS NULL THEN
        INSERT INTO session_status_changes (session_id, action, from_status, to_status, actor, reason)
        VALUES (NEW.id, 'restored', NEW.status, NEW.status, actor, reason);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER session_status_change AFTER INSERT OR UPDATE OF status, deleted_at ON sessions
    FOR EACH ROW EXECUTE FUNCTION session_status_change();

-- Sessions recorded before this migration: their creation, and the status they had reached
-- (the steps in between, and who took them, were not recorded).
INSERT INTO session_status_changes (session_id, action, from_status, to_status, changed_at)
SELECT id, 'created', NULL, 'pending', created_at FROM sessions;
INSERT INTO session_status_changes (session_id, action, from_status, to_status, reason, changed_at)
SELECT id, 'status_changed', 'pending', status, 'recorded before the status history existed',
       coalesce(completed_at, started_at, updated_at)
FROM sessions WHERE status <> 'pending';
