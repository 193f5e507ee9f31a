-- The live change log per session, merged by its followers (issue 36; docs/scale-out.md,
-- "Cross-session state").
--
-- Until now each change took the next id of one sequence, and every follower read the log in
-- id order, waiting on the ids of transactions still in flight. One order across all sessions
-- is state no shard of a distributed PostgreSQL can write from its trigger. Now a change is
-- found by the transaction that logged it: `logged_in` (its top-level transaction id, 64-bit,
-- never reused). A follower reads the changes of every transaction that ended since its last
-- read, under a snapshot that says which those are (its `xmax` and the transactions it saw
-- running, `xip`), as PgQ's batches are cut: each change is read exactly once, with no global
-- number. A row is then keyed within its session's transactions: the key holds `session_id`,
-- so the log is a distributed table like the others (its rows on their session's shard, the
-- triggers' writes with them) and the follower's read is the one read across sessions.
--
-- Writers do not change: they insert `(session_id, position)`; both ids are defaults.
--
-- Rolling upgrade: binaries from before 0127 read and prune the log by `id`, so the column, its
-- sequence and an index on it stay until a later release. Their readers report an `id`
-- position; readers of this version report `read_below` (and position 0, which holds an older
-- binary's pruning by readers back entirely, so that it never deletes what they have not
-- read; the newer binaries prune for both).

-- Rows already logged were all logged by this migration's transaction; a `(session_id,
-- position)` logged twice (never by casefile's writers) is one change.
ALTER TABLE live_changes ADD COLUMN logged_in xid8 NOT NULL DEFAULT pg_current_xact_id();
DELETE FROM live_changes a USING live_changes b
WHERE a.session_id = b.session_id AND a.position = b.position AND a.id > b.id;
ALTER TABLE live_changes DROP CONSTRAINT live_changes_pkey;
ALTER TABLE live_changes ADD PRIMARY KEY (logged_in, session_id, position);
CREATE INDEX live_changes_id ON live_changes (id);

-- A reader of this version: every change logged by a transaction below this one was read.
ALTER TABLE change_log_readers ADD COLUMN read_below bigint;
-- Changes logged by transactions below this one may have been pruned; and how many prunes
-- deleted, by their age, changes some live reader had not read (a transaction open for longer
-- than the log keeps changes): a reader that sees either move past it resumes its subscribers.
ALTER TABLE change_log_state
    ADD COLUMN pruned_below bigint NOT NULL DEFAULT 0,
    ADD COLUMN unread_prunes bigint NOT NULL DEFAULT 0;
