-- The embedded database (PostgreSQL compiled to WebAssembly, on a virtual file system) cannot
-- reset unlogged tables after a crash: the reset lists the data directory while it creates
-- files in it, the listing can name a file twice, and the second copy fails ("could not create
-- file …: File exists"), so the database never starts again. Whether a listing repeats depends
-- on the directory's contents; 0021–0057 made it repeat. There the change log is logged: after
-- a crash it keeps what it held, and readers resume from where they were instead of starting
-- over. A PostgreSQL server keeps it unlogged (no WAL for a log that only bridges a moment).
DO $$
BEGIN
    IF version() LIKE '%wasm%' THEN
        ALTER TABLE live_changes SET LOGGED;
        ALTER TABLE change_log_epoch SET LOGGED;
    END IF;
END $$;
