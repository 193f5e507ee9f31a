-- no-transaction
-- `llm_interactions` (id), keyed with its session: built without blocking writes, swapped in
-- by a later migration. A failed build leaves an invalid index; drop it before starting again:
--   DROP INDEX CONCURRENTLY llm_interactions_id_session_id_pkey;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS llm_interactions_id_session_id_pkey
    ON llm_interactions (id, session_id);
