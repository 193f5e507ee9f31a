-- Retention (seed 000 Q12): sessions are hard-deleted with everything under them once a policy
-- says so (soft-deleted, or finished, longer ago than an age), in small batches; idempotency
-- receipts are forgotten by age. Each purge that deletes leaves a record of its own. This
-- migration only takes short locks: a new table, a column added without a rewrite, an index on
-- a small table.

-- A session's delete cascades along every foreign key to it; each needs an index that leads
-- with the referencing column, or each deleted session costs a scan of the table. Tickets live
-- for seconds, so their table is small; the indexes on large tables are built without blocking
-- writes, one per migration (0018 to 0020: `CREATE INDEX CONCURRENTLY` runs outside a
-- transaction, alone).
CREATE INDEX event_stream_tickets_session_idx ON event_stream_tickets (session_id);

-- The live change log is pruned by age too (`--retention-change-log`), past a process that is
-- alive but stuck: each change says when it was logged. Added without rewriting the table;
-- changes logged before have no time and go as readers read them.
ALTER TABLE live_changes ADD COLUMN created_at timestamptz;
ALTER TABLE live_changes ALTER COLUMN created_at SET DEFAULT clock_timestamp();

-- One row per purge that ran (by `casefile purge --execute`, or the server's schedule when it
-- deleted anything): who, when, by what criteria, and how many rows it deleted. Counts are
-- updated in each batch's transaction, so an interrupted purge says how far it got.
CREATE TABLE purges (
    id               uuid PRIMARY KEY,
    actor            text NOT NULL,
    trigger          text NOT NULL CHECK (trigger IN ('command', 'schedule')),
    -- The policy as given (ages or instants) and the instants it resolved to.
    criteria         jsonb NOT NULL,
    status           text NOT NULL DEFAULT 'running'
                     CHECK (status IN ('running', 'completed', 'failed')),
    sessions_deleted bigint NOT NULL DEFAULT 0,
    receipts_deleted bigint NOT NULL DEFAULT 0,
    error_message    text,
    started_at       timestamptz NOT NULL DEFAULT now(),
    -- Moved by every batch: a running purge not heard from for an hour has lost its process.
    heartbeat_at     timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz
);
CREATE INDEX purges_started_at_idx ON purges (started_at, id);
