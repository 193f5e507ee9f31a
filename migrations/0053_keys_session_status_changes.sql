-- `session_status_changes` keyed by (id, session_id).
SET LOCAL lock_timeout = '5s';
-- Adding a key on an index renames the index to the key's name, which is the point: no notice.
SET LOCAL client_min_messages = warning;
ALTER TABLE session_status_changes
    DROP CONSTRAINT session_status_changes_pkey,
    ADD CONSTRAINT session_status_changes_pkey
        PRIMARY KEY USING INDEX session_status_changes_id_session_id_pkey;
