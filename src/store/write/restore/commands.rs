//! Each record as the command that would have created it, so the live writers' own checks
//! (`check` on each command) judge it.

use serde_json::Value as Json;

use crate::error::{Error, Result};
use crate::store::write::chains::NewChain;
use crate::store::write::chats::NewChat;
use crate::store::write::executions::{Finish, NewExecution};
use crate::store::write::interactions::{NewLlmInteraction, NewMcpInteraction};
use crate::store::write::messages::NewMessage;
use crate::store::write::notifications::NewNotification;
use crate::store::write::sessions::{Completion, NewSession};
use crate::store::write::stages::NewStage;
use crate::store::write::timeline::NewEvent;
use crate::store::{
    ChainRow, ChatRow, ExecutionRow, LlmInteractionRow, LlmPayloadRow, LlmRequestRow,
    McpInteractionRow, McpPayloadRow, MessageRow, NotificationRow, RawJson, SessionRow, StageRow,
    TimelineEventRow,
};

/// JSON as a command carries it.
pub(super) fn json(raw: &RawJson) -> Result<Json> {
    serde_json::from_str(raw.get()).map_err(|e| Error::bad_input(format!("invalid JSON: {e}")))
}

pub(super) fn new_session(s: &SessionRow) -> Result<NewSession> {
    Ok(NewSession {
        id: Some(s.id),
        alert_type: s.alert_type.clone(),
        alert_data: json(&s.alert_data)?,
        chain_id: s.chain_id.clone(),
        author: s.author.clone(),
        runbook_url: s.runbook_url.clone(),
        created_by: s.created_by.clone(),
        chain_version: s.chain_version.clone(),
        chain_overrides: s.chain_overrides.as_ref().map(json).transpose()?,
    })
}

pub(super) fn new_chain(c: &ChainRow) -> Result<NewChain> {
    Ok(NewChain {
        key: c.key(),
        definition: json(&c.definition)?,
        created_by: c.created_by.clone(),
    })
}

pub(super) fn new_chat(c: &ChatRow) -> NewChat {
    NewChat {
        id: Some(c.id),
        session_id: c.session_id,
        created_by: c.created_by.clone(),
        title: c.title.clone(),
    }
}

pub(super) fn new_stage(s: &StageRow) -> NewStage {
    NewStage {
        id: Some(s.id),
        session_id: s.session_id,
        stage_index: s.stage_index,
        name: s.stage_name.clone(),
        expected_agent_count: s.expected_agent_count,
        parallel_type: s.parallel_type,
        success_policy: s.success_policy,
        chat_id: s.chat_id,
        chat_user_message_id: s.chat_user_message_id,
    }
}

pub(super) fn new_execution(e: &ExecutionRow) -> NewExecution {
    NewExecution {
        id: Some(e.id),
        stage_id: e.stage_id,
        agent_name: e.agent_name.clone(),
        agent_index: e.agent_index,
        iteration_strategy: e.iteration_strategy.clone(),
        llm_provider: e.llm_provider.clone(),
        llm_model: e.llm_model.clone(),
        parent_execution_id: e.parent_execution_id,
        agent_type: Some(e.agent_type),
        team_name: e.team_name.clone(),
        task: e.task.clone(),
    }
}

pub(super) fn new_message(m: &MessageRow) -> Result<NewMessage> {
    Ok(NewMessage {
        id: Some(m.id),
        execution_id: m.execution_id,
        role: m.role,
        content: m.content.clone(),
        tool_call_id: m.tool_call_id.clone(),
        tool_name: m.tool_name.clone(),
        tool_calls: m.tool_calls.as_ref().map(json).transpose()?,
    })
}

pub(super) fn new_llm(
    (row, request, payload): &(LlmInteractionRow, LlmRequestRow, LlmPayloadRow),
) -> NewLlmInteraction {
    NewLlmInteraction {
        id: Some(row.id),
        execution_id: row.execution_id,
        interaction_type: row.interaction_type,
        model_name: row.model_name.clone(),
        last_message_id: row.last_message_id,
        llm_request: request.llm_request.clone(),
        llm_response: payload.llm_response.clone(),
        thinking_content: payload.thinking_content.clone(),
        response_metadata: payload.response_metadata.clone(),
        input_tokens: row.input_tokens,
        output_tokens: row.output_tokens,
        total_tokens: row.total_tokens,
        thinking_tokens: row.thinking_tokens,
        cost_usd: row.estimated_cost_usd,
        duration_ms: row.duration_ms,
        error_message: row.error_message.clone(),
        cached_input_tokens: row.cached_input_tokens,
        called_at: Some(row.created_at),
        sent_message_ids: row.sent_message_ids.clone(),
    }
}

pub(super) fn new_mcp((row, payload): &(McpInteractionRow, McpPayloadRow)) -> NewMcpInteraction {
    NewMcpInteraction {
        id: Some(row.id),
        execution_id: row.execution_id,
        interaction_type: row.interaction_type,
        server_name: row.server_name.clone(),
        tool_name: row.tool_name.clone(),
        tool_arguments: payload.tool_arguments.clone(),
        tool_result: payload.tool_result.clone(),
        available_tools: payload.available_tools.clone(),
        duration_ms: row.duration_ms,
        error_message: row.error_message.clone(),
        tool_call_id: row.tool_call_id.clone(),
    }
}

pub(super) fn new_event(e: &TimelineEventRow) -> Result<NewEvent> {
    Ok(NewEvent {
        id: Some(e.id),
        execution_id: e.execution_id,
        event_type: e.event_type,
        status: e.status,
        content: e.content.clone(),
        metadata: json(&e.metadata)?,
    })
}

pub(super) fn completion(s: &SessionRow) -> Completion {
    Completion {
        final_analysis: s.final_analysis.clone(),
        executive_summary: s.executive_summary.clone(),
    }
}

pub(super) fn finish(e: &ExecutionRow) -> Finish {
    Finish {
        id: e.id,
        status: e.status,
        error_message: e.error_message.clone(),
        result_summary: e.result_summary.clone(),
        notify: Vec::new(),
    }
}

pub(super) fn new_notification(n: &NotificationRow) -> Result<NewNotification> {
    Ok(NewNotification {
        notification_type: n.notification_type,
        destination: n.destination.clone(),
        integration_data: Some(json(&n.integration_data)?),
        max_attempts: n.max_attempts,
    })
}
