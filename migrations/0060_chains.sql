-- Chains and their versions (seed 000, Q4: a chain entity, each version an immutable snapshot).
-- A definition is registered once per name and version and stored once, however many sessions
-- ran it; it never changes (sessions are immutable, and so is what they ran). A session names
-- the version it ran: `sessions.chain_id` stays the chain's name, as it always was, and the new
-- `chain_version` (null for sessions created with a name only, and for every session from
-- before this migration) refers to a registered version together with it.
--
-- Locks: `chains` is new. On `sessions`, the two nullable columns without a default are catalog
-- changes (no rewrite); the foreign key and the check are added NOT VALID (no scan: they hold
-- for every write from now on, and 0062 checks the rows from before), so `sessions` is locked
-- exclusively for the time of the catalog changes only. Gives up after 5 s rather than queue
-- readers behind a long transaction.
SET LOCAL lock_timeout = '5s';

CREATE TABLE chains (
    id            uuid PRIMARY KEY,
    name          text NOT NULL CONSTRAINT chains_name_check CHECK (length(name) BETWEEN 1 AND 200),
    version       text NOT NULL
                  CONSTRAINT chains_version_check CHECK (version ~ '^[A-Za-z0-9][A-Za-z0-9._+-]{0,99}$'),
    definition    jsonb NOT NULL,
    -- The stages the chain runs, in order: what "stage 2 of 5" counts to.
    stage_count   integer GENERATED ALWAYS AS (
                      CASE WHEN jsonb_typeof(definition -> 'stages') = 'array'
                           THEN jsonb_array_length(definition -> 'stages') END) STORED
                  CONSTRAINT chains_stage_count_check CHECK (stage_count >= 1),
    created_at    timestamptz NOT NULL DEFAULT now(),
    created_by    text,
    deprecated_at timestamptz,
    deprecated_by text,
    CONSTRAINT chains_definition_check CHECK (jsonb_typeof(definition) = 'object'),
    CONSTRAINT chains_name_version_key UNIQUE (name, version)
);
-- The chain list, newest first: all chains, or one name's versions.
CREATE INDEX chains_created_at_idx ON chains (created_at, id);
CREATE INDEX chains_name_created_at_idx ON chains (name, created_at, id);

ALTER TABLE sessions
    ADD COLUMN chain_version text,
    ADD COLUMN chain_overrides jsonb;
ALTER TABLE sessions
    ADD CONSTRAINT sessions_chain_fkey FOREIGN KEY (chain_id, chain_version)
        REFERENCES chains (name, version) NOT VALID,
    ADD CONSTRAINT sessions_chain_overrides_check CHECK (chain_overrides IS NULL
        OR (chain_version IS NOT NULL AND jsonb_typeof(chain_overrides) = 'object')) NOT VALID;
