-- Notifications and their outbox (seed 000 Q5; seed 001's effects). casefile sends nothing:
-- a notification is written in the transaction of the write that causes it (completeSession,
-- failSession), and a delivery worker claims due ones with a lease and reports the outcome.
-- A new table: creating it and its indexes locks nothing that exists (the FK takes a SHARE ROW
-- EXCLUSIVE lock on `sessions` for the moment of the catalog change, no scan).
SET LOCAL lock_timeout = '5s';

CREATE TABLE notifications (
    session_id       uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    id               uuid NOT NULL,
    type             text NOT NULL
                     CONSTRAINT notifications_type_check
                     CHECK (type IN ('slack', 'email', 'pagerduty', 'webhook', 'msteams')),
    -- Where to: a Slack channel, an address, a PagerDuty service key, a URL.
    destination      text NOT NULL
                     CONSTRAINT notifications_destination_check
                     CHECK (length(destination) BETWEEN 1 AND 2000),
    status           text NOT NULL DEFAULT 'pending'
                     CONSTRAINT notifications_status_check
                     CHECK (status IN ('pending', 'sending', 'sent', 'delivered', 'failed')),
    -- Type-specific data: what the writer gave, merged with what the worker reported
    -- (Slack: channel, thread_ts, message_fingerprint, permalink).
    integration_data jsonb NOT NULL DEFAULT '{}',
    -- Claims so far (each claim is an attempt).
    attempts         integer NOT NULL DEFAULT 0 CONSTRAINT notifications_attempts_check
                     CHECK (attempts >= 0),
    max_attempts     integer NOT NULL CONSTRAINT notifications_max_attempts_check
                     CHECK (max_attempts BETWEEN 1 AND 100),
    -- When it may next be claimed: pending, when its backoff ends; sending, when the lease
    -- runs out (a crashed worker's claim comes back then); null once sent, delivered or failed.
    next_attempt_at  timestamptz,
    -- The claim holding it (kept after the outcome, so a retried report or claim is known).
    claim_id         uuid,
    last_error       text CONSTRAINT notifications_last_error_check
                     CHECK (length(last_error) <= 10000),
    created_at       timestamptz NOT NULL DEFAULT now(),
    sent_at          timestamptz,
    delivered_at     timestamptz,
    failed_at        timestamptz,
    PRIMARY KEY (session_id, id),
    CONSTRAINT notifications_due_check
        CHECK ((status IN ('pending', 'sending')) = (next_attempt_at IS NOT NULL))
);
-- What a worker polls: due notifications, oldest due first.
CREATE INDEX notifications_due_idx ON notifications (next_attempt_at)
    WHERE status IN ('pending', 'sending');
-- A retried claim finds its set.
CREATE INDEX notifications_claim_idx ON notifications (claim_id) WHERE claim_id IS NOT NULL;
-- An operator's "what failed to deliver" view, newest first.
CREATE INDEX notifications_status_created_idx ON notifications (status, created_at);
