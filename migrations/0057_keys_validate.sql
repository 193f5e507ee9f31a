-- The foreign keys re-added by 0026 to 0051 were enforced for every write since; this checks
-- the rows from before. Validation reads the referencing tables under locks that let reads and
-- writes go on (SHARE UPDATE EXCLUSIVE, ROW SHARE on the referenced ones).
ALTER TABLE agent_executions VALIDATE CONSTRAINT agent_executions_stage_id_session_id_fkey;
ALTER TABLE agent_executions VALIDATE CONSTRAINT agent_executions_parent_execution_id_session_id_fkey;
ALTER TABLE llm_interactions VALIDATE CONSTRAINT llm_interactions_last_message_id_execution_id_fkey;
ALTER TABLE tool_calls VALIDATE CONSTRAINT tool_calls_message_id_execution_id_fkey;
ALTER TABLE mcp_interactions VALIDATE CONSTRAINT mcp_interactions_tool_call_fkey;
ALTER TABLE timeline_events VALIDATE CONSTRAINT timeline_events_llm_interaction_id_session_id_fkey;
ALTER TABLE timeline_events VALIDATE CONSTRAINT timeline_events_mcp_interaction_id_session_id_fkey;
ALTER TABLE timeline_event_chunks VALIDATE CONSTRAINT timeline_event_chunks_event_id_fkey;
ALTER TABLE chat_user_messages VALIDATE CONSTRAINT chat_user_messages_chat_id_session_id_fkey;
ALTER TABLE stages VALIDATE CONSTRAINT stages_chat_id_session_id_fkey;
ALTER TABLE stages VALIDATE CONSTRAINT stages_chat_user_message_id_session_id_fkey;
