-- The foreign key and check 0060 added NOT VALID were enforced for every write since; this
-- checks the rows from before (all of them without a chain version). Validation reads
-- `sessions` under a lock that lets reads and writes go on (SHARE UPDATE EXCLUSIVE; ROW SHARE on
-- `chains`).
ALTER TABLE sessions VALIDATE CONSTRAINT sessions_chain_fkey;
ALTER TABLE sessions VALIDATE CONSTRAINT sessions_chain_overrides_check;
