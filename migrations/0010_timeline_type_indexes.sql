-- Context builders read one kind of event: a stage's final analyses, an agent's tool calls.
-- A timeline filtered by event type reads these indexes (one range per type, in sequence
-- order) rather than every event of its session, stage or execution.
CREATE INDEX timeline_events_session_type_idx
    ON timeline_events (session_id, event_type, sequence_number);
CREATE INDEX timeline_events_stage_type_idx
    ON timeline_events (stage_id, event_type, sequence_number);
CREATE INDEX timeline_events_execution_type_idx
    ON timeline_events (execution_id, event_type, sequence_number);
