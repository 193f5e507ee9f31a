-- A stage's messages are read a page at a time, each agent's conversation whole: by
-- (execution, sequence) within the stage. This index serves that order; it replaces the
-- (stage_id, execution_id) index, of which it is an extension.
CREATE INDEX messages_stage_order_idx ON messages (stage_id, execution_id, sequence_number);
DROP INDEX messages_stage_execution_idx;
