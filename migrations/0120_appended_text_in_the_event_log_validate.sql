-- The check 0119 added NOT VALID was enforced on every row written since; this checks the rows
-- from before (none holds text, so they pass). Validation reads `session_events` under SHARE
-- UPDATE EXCLUSIVE, which lets reads and writes go on.
ALTER TABLE session_events VALIDATE CONSTRAINT session_events_delta_check;
