-- A purge forgets audit records older than the audit retention (`--retention-audit-before`),
-- and says how many. A column with a constant default: added without rewriting `purges`, under
-- its lock for the moment of the catalog change.
SET LOCAL lock_timeout = '5s';

ALTER TABLE purges ADD COLUMN audit_records_deleted bigint NOT NULL DEFAULT 0;
