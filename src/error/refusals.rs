//! The database's refusals, in words: of values (data exceptions, SQLSTATE class 22, and
//! integrity constraint violations, class 23), of time (statement, lock and idle-transaction
//! timeouts) and of service (it cannot be reached). Every input is checked before it reaches
//! SQL; for values this is the safety net for what gets past the checks (a row written by a
//! writer outside casefile between a check and an insert, a rule added to the schema later).

use super::sqlstate::{BadData, DbFailure};

/// Whose mistake a refusal is, as far as the request can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// A value the database does not accept.
    BadInput,
    /// A value that is already taken (unique and exclusion constraints).
    Conflict,
    /// The request took the database too long (nothing of it was kept): retry.
    Timeout,
    /// The database cannot be reached now: retry.
    Unavailable,
}

/// A refusal and what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub kind: Refused,
    pub message: String,
}

/// The refusal behind a database error, when it is one.
pub fn of(err: &sqlx::Error) -> Option<Refusal> {
    let failure = DbFailure::of(err)?;
    let Some(db) = err.as_database_error() else {
        return refusal(failure, "", None, None);
    };
    let column = db
        .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
        .and_then(|pg| pg.column());
    refusal(failure, &db.code()?, db.constraint(), column)
}

/// What a SQLSTATE (with the constraint or column it names) means for the client.
pub fn classify(code: &str, constraint: Option<&str>, column: Option<&str>) -> Option<Refusal> {
    refusal(DbFailure::of_code(code)?, code, constraint, column)
}

/// A failure, said for the client; `None` for one that is not the client's to hear of (a
/// collision, which the writer runs again).
fn refusal(
    failure: DbFailure,
    code: &str,
    constraint: Option<&str>,
    column: Option<&str>,
) -> Option<Refusal> {
    let (kind, message) = match failure {
        DbFailure::Taken => (Refused::Conflict, rule(constraint)),
        DbFailure::Missing => (
            Refused::BadInput,
            format!("`{}` is required", column.unwrap_or("a value")),
        ),
        DbFailure::BrokenRule => (Refused::BadInput, rule(constraint)),
        DbFailure::BadData(bad) => (Refused::BadInput, data_exception(bad, code)),
        DbFailure::StatementTimeout | DbFailure::LockTimeout | DbFailure::IdleTimeout => (
            Refused::Timeout,
            "the database took too long (a statement or lock timeout); nothing of this request \
             was kept: retry"
                .to_owned(),
        ),
        DbFailure::Unreachable => return Some(unavailable()),
        DbFailure::Collision => return None,
    };
    Some(Refusal { kind, message })
}

fn unavailable() -> Refusal {
    Refusal {
        kind: Refused::Unavailable,
        message: "the database cannot be reached right now; nothing of this request was kept: \
                  retry shortly"
            .to_owned(),
    }
}

fn rule(constraint: Option<&str>) -> String {
    match constraint {
        Some(name) => describe(of_its_table(name)).map_or_else(
            || format!("the values break the rule \"{}\"", name.replace('_', " ")),
            str::to_owned,
        ),
        None => "the values break a rule of the database".to_owned(),
    }
}

fn data_exception(bad: BadData, code: &str) -> String {
    match bad {
        BadData::TooLong => "a text is longer than its field allows".to_owned(),
        BadData::OutOfRange => "a number is out of the range its field allows".to_owned(),
        BadData::BadTime => "a date or time is out of range".to_owned(),
        BadData::NulInText => {
            "a text contains a NUL character (\\u0000), which cannot be stored".to_owned()
        }
        BadData::NulInJson => {
            "a JSON value contains a NUL character (\\u0000), which cannot be stored".to_owned()
        }
        BadData::BadForm => "a value is not in the form its field expects".to_owned(),
        BadData::BadParameter | BadData::Other => {
            format!("a value is not valid for its field (SQLSTATE {code})")
        }
    }
}

/// The table, or the key, a partition's copy stands for; any other name as it is. On a database
/// partitioned by session (`store::partitioning`), an error names the partition its row is in
/// (`stages_p2`) and, for a unique violation, the partition's index, named after its table's
/// (`stages_pkey_p2`).
pub(crate) fn of_its_table(name: &str) -> &str {
    match name.rsplit_once("_p") {
        Some((table, number))
            if !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) =>
        {
            table
        }
        _ => name,
    }
}

/// A constraint of the schema (every migration), in words; `None` for one it does not know.
pub fn describe(constraint: &str) -> Option<&'static str> {
    Some(match constraint {
        "sessions_alert_type_check" => "`alertType` must be 1–200 characters",
        "sessions_chain_id_check" => "`chainId` must be 1–200 characters",
        "sessions_check" => "a session cannot complete before it started",
        "sessions_chain_fkey" => "the session's chain version is not registered",
        "sessions_chain_overrides_check" => {
            "`chainOverrides` is a JSON object, and only with a registered chain version"
        }
        "chains_name_check" => "a chain's `name` must be 1–200 characters",
        "chains_version_check" => {
            "a chain's `version` is 1–100 letters, digits, '.', '_', '+' or '-', starting with a \
             letter or digit"
        }
        "chains_definition_check" => "a chain's `definition` must be a JSON object",
        "chains_stage_count_check" => {
            "a chain's `definition.stages` must be a non-empty array of its stages"
        }
        "chains_name_version_key" => {
            "this chain version is already registered (a version never changes)"
        }
        "chat_user_messages_content_check" => {
            "a chat question must not be empty or only whitespace, and at most 5,000 characters"
        }
        "chat_user_messages_chat_id_session_id_fkey" => "the chat is not a chat of this session",
        "chats_title_length" => "a chat's `title` must be 1–200 characters",
        "chats_deleted_by_check" => {
            "a chat's `deletedBy` is at most 200 characters, and only on a deleted chat"
        }
        "purges_trigger_check" => "a purge's `trigger` is `command` or `schedule`",
        // Written by the store alone, from values it bounds first.
        "audit_records_action_check"
        | "audit_records_target_type_check"
        | "audit_records_target_id_check"
        | "audit_records_request_id_check"
        | "audit_records_client_address_check"
        | "audit_records_user_agent_check"
        | "audit_records_changes_check"
        | "session_audit_records_action_check"
        | "session_audit_records_target_type_check"
        | "session_audit_records_target_id_check"
        | "session_audit_records_request_id_check"
        | "session_audit_records_client_address_check"
        | "session_audit_records_user_agent_check"
        | "session_audit_records_changes_check" => "an audit record's fields are out of bounds",
        "stages_session_id_stage_index_key" => {
            "this stage index is already used in the session (`stageIndex` is unique in a session)"
        }
        "stages_stage_index_check" => "`stageIndex` must be 0 or more",
        "stages_stage_name_check" => "a stage's `name` must be 1–200 characters",
        "stages_expected_agent_count_check" => "`expectedAgentCount` must be at least 1",
        "stages_check" => {
            "a single-agent stage takes no `parallelType` or `successPolicy`; a stage of several \
             agents needs both"
        }
        "stages_check1" => "`chatUserMessageId` needs `chatId`",
        "stages_chat_id_session_id_fkey" => "the chat is not a chat of this session",
        "stages_chat_user_message_id_session_id_fkey" => {
            "the chat question is not a question of this session"
        }
        "stages_chat_user_message_idx" => "the chat question already has its answering stage",
        "stages_parallel_type_check" => "`parallelType` is not one of its values",
        "stages_success_policy_check" => "`successPolicy` is not one of its values",
        "agent_executions_agent_index_check" => "`agentIndex` must be at least 1",
        "agent_executions_agent_name_check" => "`agentName` must be 1–200 characters",
        "agent_executions_iteration_strategy_check" => {
            "`iterationStrategy` must be 1–100 characters"
        }
        "agent_executions_check" => "an agent execution cannot be its own parent",
        "agent_executions_stage_id_agent_index_key" => {
            "this agent index is already used in the stage (`agentIndex` is unique in a stage)"
        }
        "agent_executions_stage_id_session_id_fkey" => "the stage is not a stage of this session",
        "agent_executions_parent_execution_id_session_id_fkey" => {
            "the parent execution is not an execution of this session"
        }
        "messages_check" => "only a `TOOL` message has a `toolCallId`",
        "messages_check1" => "only an `ASSISTANT` message requests `toolCalls`",
        "messages_execution_id_sequence_number_key" => {
            "this sequence number is already used in the conversation"
        }
        "messages_role_check" => "`role` is not one of its values",
        "llm_interactions_model_name_check" => "`modelName` must be 1–200 characters",
        "llm_interactions_last_message_id_execution_id_fkey" => {
            "`lastMessageId` is not a message of this agent execution"
        }
        "llm_interactions_sent_message_ids_check" => {
            "`sentMessageIds` must name at least one message, ending with `lastMessageId`"
        }
        "llm_interactions_estimated_cost_usd_check" => "`estimatedCostUsd` must be 0 or more",
        "llm_interactions_input_tokens_check" => "`inputTokens` must be 0 or more",
        "llm_interactions_output_tokens_check" => "`outputTokens` must be 0 or more",
        "llm_interactions_total_tokens_check" => "`totalTokens` must be 0 or more",
        "llm_interactions_thinking_tokens_check" => "`thinkingTokens` must be 0 or more",
        "llm_interactions_cached_input_tokens_check" => {
            "`cachedInputTokens` must be 0 or more, and part of `inputTokens`"
        }
        "llm_interactions_cost_source_check" => "`costSource` is not one of its values",
        "llm_interactions_priced_check" => {
            "a cost from the price list has its pricing snapshot and its input and output costs, \
             which add up to its total; any other cost has none of them"
        }
        "model_prices_key" => {
            "the model already has a price from this instant for this provider (prices never \
             change)"
        }
        "model_prices_model_name_check" => "`model` must be 1–200 characters",
        "model_prices_provider_check" => "`provider` must be 1–200 characters",
        "model_prices_input_per_million_check"
        | "model_prices_output_per_million_check"
        | "model_prices_cached_input_per_million_check"
        | "model_prices_thinking_per_million_check" => {
            "a price must be between 0 and 1,000,000 US dollars per million tokens"
        }
        "mcp_interactions_server_name_check" => "`serverName` must be 1–200 characters",
        "mcp_interactions_check" => "a `TOOL_CALL` interaction needs a `toolName`",
        "mcp_interactions_tool_call_check" => {
            "only a `TOOL_CALL` interaction executes a `toolCallId`"
        }
        "mcp_interactions_tool_call_fkey" => {
            "no message of this agent's conversation requested this `toolCallId`"
        }
        "mcp_interactions_tool_call_attempt_key" => {
            "this attempt at the tool call is already recorded"
        }
        "mcp_interactions_attempt_check" => {
            "attempts are numbered from 1, and only a retried tool call (by `toolCallId`) has \
             more than one"
        }
        "tool_calls_call_id_check" => "a tool call's `id` must be 1–200 characters",
        "tool_calls_pkey" => "this tool call id is already requested in the conversation",
        "tool_calls_message_id_execution_id_fkey" => {
            "a tool call is requested by a message of its own conversation"
        }
        "tool_calls_message_id_position_key" => "a message's tool call is indexed once",
        "tool_calls_position_check" => "a tool call's place in its message starts at 0",
        "timeline_events_session_id_sequence_number_key" => {
            "this sequence number is already used in the session's timeline"
        }
        "timeline_events_llm_interaction_id_session_id_fkey" => {
            "`llmInteractionId` is not an LLM interaction of this session"
        }
        "timeline_events_mcp_interaction_id_session_id_fkey" => {
            "`mcpInteractionId` is not an MCP interaction of this session"
        }
        "timeline_events_event_type_check" => "`eventType` is not one of its values",
        "timeline_event_chunks_pkey" => "content was already appended at this offset",
        "timeline_event_chunks_content_check" => "`delta` must not be empty",
        "timeline_event_chunks_start_offset_check" => "`offset` must be 0 or more",
        "api_tokens_name_key" => "a token of this name exists (names are never reused)",
        "api_tokens_name_check" => {
            "a token `name` is 1–100 letters, digits, '.', '_' or '-', starting with a letter or \
             digit"
        }
        "api_tokens_secret_hash_key" => "this token secret is already in use",
        "api_tokens_secret_hash_check" => "a token secret hash is 32 bytes",
        "share_links_secret_hash_key" => "this share link secret is already in use",
        "share_links_secret_hash_check" => "a share link secret hash is 32 bytes",
        "share_links_note_check" => "a share link's `note` must be 1–500 characters",
        "api_tokens_role_check" => "`role` is not one of its values",
        "session_status_changes_action_check" => "the status change is not one of its kinds",
        "create_receipts_session_id_fkey" => "the session does not exist",
        "notifications_session_id_fkey" => "the session does not exist",
        "notifications_pkey" => "this notification already exists in the session",
        "notifications_type_check" => "a notification's `type` is not one of its values",
        "notifications_destination_check" => {
            "a notification's `destination` must be 1–2,000 characters"
        }
        "notifications_status_check" => "a notification's `status` is not one of its values",
        "notifications_attempts_check" => "a notification's `attempts` cannot be negative",
        "notifications_max_attempts_check" => "`maxAttempts` must be 1–100",
        "notifications_last_error_check" => {
            "a notification's `error` must be at most 10,000 characters"
        }
        "notifications_chat_question_fkey" => "the chat question is not a question of this session",
        "notifications_due_check" => {
            "a notification has a next attempt exactly while it is pending or being sent"
        }
        "agent_executions_agent_type_check" => "`agentType` is not one of its values",
        "agent_executions_team_name_check" => {
            "a team supervisor or worker needs a `teamName` (1–200 characters); a global \
             supervisor has none"
        }
        "agent_executions_global_supervisor_check" => {
            "a global supervisor is the root of its tree: it has no parent execution"
        }
        "agent_executions_depth_check" => "agent trees are at most 10 deep",
        "agent_executions_task_check" => "`task` must be at most 1,000,000 characters",
        "agent_executions_result_summary_check" => {
            "`resultSummary` must be at most 1,000,000 characters"
        }
        "session_events_pkey" | "session_feed_pkey" => {
            "the session's event order was written by another transaction at once; retry"
        }
        "session_events_position_check" => "event positions start at 1",
        "session_events_run_check" => {
            "a run of appends in the event order holds 2–1,000 appends, each with its event, \
             place and characters"
        }
        "session_event_runs_pkey" => {
            "the session's event order was written by another transaction at once; retry"
        }
        "session_event_runs_positions_check" => {
            "a run of appends in the event order holds one entry per position it covers, from 1"
        }
        "session_events_delta_check" => {
            "an append's text in the event order covers its characters, once per append of a run"
        }
        "streaming_event_ends_pkey" | "event_texts_in_log_pkey" => {
            "a streaming event's text was appended to by another transaction at once; retry"
        }
        "session_feed_position_check" => "feed positions start at 1",
        "event_stream_tickets_ticket_hash_check" => "a stream ticket's hash is 32 bytes",
        "event_stream_tickets_role_check" => "`role` is not one of its values",
        "change_log_state_singleton_check" | "change_log_epoch_singleton_check" => {
            "the change log keeps a single row of its state"
        }
        other => return by_pattern(other),
    })
}

/// Rules every table states alike.
fn by_pattern(constraint: &str) -> Option<&'static str> {
    let ends = |suffix: &str| constraint.ends_with(suffix);
    Some(if ends("_pkey") || ID_KEYS.contains(&constraint) {
        "this id is already used by another record"
    } else if ends("_execution_id_stage_id_session_id_fkey") {
        "the agent execution is not an execution of this stage and session"
    } else if ends("_session_id_fkey") {
        "the session does not exist"
    } else if ends("_status_check") {
        "`status` is not one of its values"
    } else if ends("_interaction_type_check") {
        "`interactionType` is not one of its values"
    } else if ends("_duration_ms_check") {
        "`durationMs` must be 0 or more"
    } else if ends("_sequence_number_check") {
        "sequence numbers start at 1"
    } else {
        return None;
    })
}

/// The unique keys that start with the row's `id` besides the primary key (they let composite
/// foreign keys point at it).
const ID_KEYS: [&str; 2] = [
    "agent_executions_id_stage_id_session_id_key",
    "messages_id_execution_id_session_id_key",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_22_and_23_are_the_clients() {
        let conflict = classify("23505", Some("stages_session_id_stage_index_key"), None).unwrap();
        assert_eq!(conflict.kind, Refused::Conflict);
        assert!(
            conflict.message.contains("`stageIndex` is unique"),
            "{conflict:?}"
        );
        let check = classify(
            "23514",
            Some("agent_executions_iteration_strategy_check"),
            None,
        );
        assert_eq!(check.unwrap().kind, Refused::BadInput);
        let missing = classify("23502", None, Some("chain_id")).unwrap();
        assert_eq!(missing.message, "`chain_id` is required");
        let unknown = classify("23514", Some("widgets_size_check"), None).unwrap();
        assert_eq!(
            unknown.message,
            "the values break the rule \"widgets size check\""
        );
        assert_eq!(
            classify("22021", None, None).unwrap().kind,
            Refused::BadInput
        );
        assert!(
            classify("22P05", None, None)
                .unwrap()
                .message
                .contains("JSON")
        );
        assert_eq!(classify("40001", None, None), None);
        assert_eq!(classify("42P01", None, None), None);
    }

    #[test]
    fn a_partitions_copy_is_named_as_its_table() {
        assert_eq!(of_its_table("stages_p2"), "stages");
        assert_eq!(of_its_table("stages_pkey_p13"), "stages_pkey");
        assert_eq!(of_its_table("stages_pkey"), "stages_pkey");
        assert_eq!(of_its_table("messages_p"), "messages_p");
        assert_eq!(of_its_table("tool_calls_pk2"), "tool_calls_pk2");
        assert_eq!(
            rule(Some("stages_session_id_stage_index_key_p1")),
            rule(Some("stages_session_id_stage_index_key"))
        );
    }

    #[test]
    fn keys_that_start_with_the_id_are_ids_and_others_are_not() {
        assert_eq!(
            describe("messages_id_execution_id_session_id_key"),
            Some("this id is already used by another record")
        );
        assert_eq!(
            describe("sessions_pkey"),
            Some("this id is already used by another record")
        );
        assert_ne!(
            describe("agent_executions_stage_id_agent_index_key"),
            Some("this id is already used by another record")
        );
    }
}
