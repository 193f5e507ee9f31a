-- The audit trail of a session's control-plane changes (its lifecycle, stages, executions,
-- chats, notifications, event stream tickets), kept with the session: keyed and distributed by
-- `session_id` (docs/scale-out.md), so a change and its record commit on one node. No foreign
-- key to `sessions`: the trail outlives a purged session until the audit retention removes it.
-- A new table and a view: creating them locks nothing in use. The indexes added to
-- `audit_records` (0090) take its SHARE lock while they build: it holds only the rare records
-- of chains, prices, tokens and claims.
SET LOCAL lock_timeout = '5s';

CREATE TABLE session_audit_records (
    session_id      uuid NOT NULL,
    id              uuid NOT NULL,
    at              timestamptz NOT NULL DEFAULT now(),
    actor           text,
    action          text NOT NULL CHECK (length(action) BETWEEN 1 AND 100),
    target_type     text NOT NULL CHECK (length(target_type) BETWEEN 1 AND 100),
    target_id       text NOT NULL CHECK (length(target_id) BETWEEN 1 AND 100),
    request_id      text CHECK (length(request_id) <= 128),
    client_address  text CHECK (length(client_address) <= 100),
    user_agent      text CHECK (length(user_agent) <= 500),
    changes         jsonb NOT NULL CHECK (jsonb_typeof(changes) = 'array'),
    PRIMARY KEY (session_id, id)
);

-- A session's trail, newest first.
CREATE INDEX session_audit_records_session_at ON session_audit_records (session_id, at DESC, id DESC);
-- The admin's log across everything, newest first, unfiltered and by each filter; and by age
-- for the retention policy.
CREATE INDEX session_audit_records_at ON session_audit_records (at DESC, id DESC);
CREATE INDEX session_audit_records_actor ON session_audit_records (actor, at DESC, id DESC);
CREATE INDEX session_audit_records_action ON session_audit_records (action, at DESC, id DESC);
CREATE INDEX session_audit_records_target_type
    ON session_audit_records (target_type, at DESC, id DESC);

CREATE INDEX audit_records_actor ON audit_records (actor, at DESC, id DESC);
CREATE INDEX audit_records_action ON audit_records (action, at DESC, id DESC);
CREATE INDEX audit_records_target_type ON audit_records (target_type, at DESC, id DESC);

-- Every audit record, the session's where it has one. PostgreSQL pushes a filter and a page's
-- bound into both branches and merges their index scans in order.
CREATE VIEW audit_log AS
    SELECT id, at, actor, action, target_type, target_id, NULL::uuid AS session_id, request_id,
           client_address, user_agent, changes
    FROM audit_records
    UNION ALL
    SELECT id, at, actor, action, target_type, target_id, session_id, request_id,
           client_address, user_agent, changes
    FROM session_audit_records;
