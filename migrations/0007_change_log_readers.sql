-- The change log (`live_changes`) is shared by every casefile process on this database. Each one
-- follows it and records here how far it has read, with a heartbeat; the log is pruned only
-- below what every live reader has read, so a slow replica is never pruned past. A reader whose
-- heartbeat is older than a limit (it crashed, or stalls) stops holding the log back; when it
-- comes back it finds the log pruned past its position and resumes its subscribers from the
-- data instead.
CREATE TABLE change_log_readers (
    reader_id    uuid PRIMARY KEY,
    -- Host and process, for operators.
    name         text NOT NULL,
    -- Every change with an id up to here was read by this process.
    position     bigint NOT NULL,
    heartbeat_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- How far the log has been pruned: a reader whose position is below it may have missed changes.
CREATE TABLE change_log_state (
    singleton      boolean PRIMARY KEY DEFAULT TRUE CHECK (singleton),
    pruned_through bigint NOT NULL DEFAULT 0
);
INSERT INTO change_log_state DEFAULT VALUES;

-- The log is UNLOGGED: after a PostgreSQL crash it is empty, and changes committed but not yet
-- read are gone. This one-row table is UNLOGGED too, so it is emptied with the log: a reader that
-- finds it empty, or holding another epoch than the one it knows, knows the log was reset.
CREATE UNLOGGED TABLE change_log_epoch (
    singleton boolean PRIMARY KEY DEFAULT TRUE CHECK (singleton),
    epoch     uuid NOT NULL
);
INSERT INTO change_log_epoch (epoch) VALUES (gen_random_uuid());
