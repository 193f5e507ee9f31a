//! The types and fields the compiled path answers, and how each field's value is made from its
//! column: with the same conversions the resolvers use (`api::types`), so that an answer is the
//! same, byte for byte, whichever path made it. A field not listed here sends its query down
//! the resolvers' path.

use async_graphql::{ScalarType, Value};
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::api::ids::{self, NodeType};
use crate::model::{
    AgentType, ExecutionStatus, LlmInteractionType, McpInteractionType, MessageRole, ParallelType,
    SessionStatus, StageStatus, SuccessPolicy, TimelineEventStatus, TimelineEventType,
    from_db_name,
};
use crate::store::Scope;
use crate::store::tree::{Column, Datum, Rows};

/// An object type: its GraphQL name and the fields answered here.
pub struct ObjectType {
    pub name: &'static str,
    pub fields: &'static [(&'static str, Field)],
}

/// A connection type over one relationship: its name, its edges' and their nodes' type.
pub struct ConnectionType {
    pub name: &'static str,
    pub edge: &'static str,
    pub node: &'static ObjectType,
}

/// How a field answers.
pub enum Field {
    /// From its row's column: the value `value` makes of it, counted toward the response's
    /// size when `counted` (the row's text and JSON, as [`crate::api::scalars`] counts them).
    Column {
        column: Column,
        value: fn(&Datum) -> Result<Value, String>,
        counted: bool,
    },
    /// The row's global ID (of its `id`).
    GlobalId(NodeType),
    /// A list of the rows below.
    List { of: &'static ObjectType, rows: Rows },
    /// The one row below, or null.
    One { of: &'static ObjectType, rows: Rows },
    /// A page of the rows below, as a connection (`first` only).
    Page {
        of: &'static ConnectionType,
        rows: Rows,
    },
}

const fn column(column: &'static str, value: fn(&Datum) -> Result<Value, String>) -> Field {
    Field::Column {
        column: Column::Value(column),
        value,
        counted: false,
    }
}

/// The column's text or JSON: counted toward the response's size.
const fn counted(column: &'static str, value: fn(&Datum) -> Result<Value, String>) -> Field {
    Field::Column {
        column: Column::Value(column),
        value,
        counted: true,
    }
}

fn unexpected(what: &str, datum: &Datum) -> String {
    format!("{what} expected, {} read", datum.kind())
}

fn text(datum: &Datum) -> Result<Value, String> {
    match datum {
        Datum::Null => Ok(Value::Null),
        Datum::Text(text) => Ok(Value::String(text.clone())),
        other => Err(unexpected("text", other)),
    }
}

fn int(datum: &Datum) -> Result<Value, String> {
    match datum {
        Datum::Null => Ok(Value::Null),
        Datum::Int(n) => Ok(Value::Number((*n).into())),
        other => Err(unexpected("an integer", other)),
    }
}

fn uuid(datum: &Datum) -> Result<Value, String> {
    match datum {
        Datum::Uuid(id) => Ok(<Uuid as ScalarType>::to_value(id)),
        other => Err(unexpected("a UUID", other)),
    }
}

fn time(datum: &Datum) -> Result<Value, String> {
    match datum {
        Datum::Null => Ok(Value::Null),
        Datum::Time(at) => Ok(<DateTime<Utc> as ScalarType>::to_value(at)),
        other => Err(unexpected("a timestamp", other)),
    }
}

/// JSON put into the response as the database sent it (as [`crate::api::scalars::JsonRef`]).
fn raw_json(datum: &Datum) -> Result<Value, String> {
    match datum {
        Datum::Null => Ok(Value::Null),
        Datum::Json(json) => serde_json::from_str(json).map_err(|err| err.to_string()),
        other => Err(unexpected("JSON", other)),
    }
}

/// JSON as a payload row holds it (a `serde_json::Value`, for
/// [`crate::api::scalars::SharedJson`]): each object's keys in their order (serde_json's maps
/// are sorted), read straight into the response's value rather than through a tree of its own.
fn parsed_json(datum: &Datum) -> Result<Value, String> {
    match datum {
        Datum::Json(json) => {
            let mut value: Value = serde_json::from_str(json).map_err(|err| err.to_string())?;
            sort_keys(&mut value);
            Ok(value)
        }
        other => Err(unexpected("JSON", other)),
    }
}

fn sort_keys(value: &mut Value) {
    match value {
        Value::Object(fields) => {
            fields.sort_unstable_keys();
            fields.values_mut().for_each(sort_keys);
        }
        Value::List(items) => items.iter_mut().for_each(sort_keys),
        _ => {}
    }
}

/// One of the model's enums, stored as its snake_case name.
fn enumerated<E: DeserializeOwned + async_graphql::InputType>(
    datum: &Datum,
) -> Result<Value, String> {
    match datum {
        Datum::Null => Ok(Value::Null),
        Datum::Text(name) => from_db_name::<E>(name)
            .map(|value| async_graphql::InputType::to_value(&value))
            .ok_or_else(|| format!("{name} is not a {}", E::type_name())),
        other => Err(unexpected("an enum's name", other)),
    }
}

/// Whether a column is null (`success`: no error message), read as such.
const fn is_null(column: &'static str) -> Field {
    Field::Column {
        column: Column::IsNull(column),
        value: boolean,
        counted: false,
    }
}

/// Whether a column is set (`historyEdited`: the messages sent were recorded apart), read as
/// whether it is null.
const fn is_set(column: &'static str) -> Field {
    Field::Column {
        column: Column::IsNull(column),
        value: negated,
        counted: false,
    }
}

fn boolean(datum: &Datum) -> Result<Value, String> {
    match datum {
        Datum::Bool(b) => Ok(Value::Boolean(*b)),
        other => Err(unexpected("a boolean", other)),
    }
}

fn negated(datum: &Datum) -> Result<Value, String> {
    match datum {
        Datum::Bool(b) => Ok(Value::Boolean(!b)),
        other => Err(unexpected("a boolean", other)),
    }
}

/// An agent's global ID, from the id of another row's column (`parentId`).
fn execution_id(datum: &Datum) -> Result<Value, String> {
    match datum {
        Datum::Null => Ok(Value::Null),
        Datum::Uuid(id) => Ok(ids::encode(NodeType::AgentExecution, *id).to_value()),
        other => Err(unexpected("a UUID", other)),
    }
}

pub static SESSION: ObjectType = ObjectType {
    name: "Session",
    fields: &[
        ("id", Field::GlobalId(NodeType::Session)),
        ("uuid", column("id", uuid)),
        ("alertType", counted("alert_type", text)),
        ("alertData", counted("alert_data", raw_json)),
        ("status", column("status", enumerated::<SessionStatus>)),
        ("chainId", counted("chain_id", text)),
        ("chainOverrides", counted("chain_overrides", raw_json)),
        ("author", counted("author", text)),
        ("createdBy", counted("created_by", text)),
        ("runbookUrl", counted("runbook_url", text)),
        ("finalAnalysis", counted("final_analysis", text)),
        ("executiveSummary", counted("executive_summary", text)),
        ("errorMessage", counted("error_message", text)),
        ("startedAt", column("started_at", time)),
        ("completedAt", column("completed_at", time)),
        ("durationMs", column("duration_ms", int)),
        ("createdAt", column("created_at", time)),
        ("updatedAt", column("updated_at", time)),
        ("deletedAt", column("deleted_at", time)),
        (
            "stages",
            Field::List {
                of: &STAGE,
                rows: Rows::Stages,
            },
        ),
        (
            "timeline",
            Field::Page {
                of: &TIMELINE,
                rows: Rows::Timeline(Scope::Session),
            },
        ),
        (
            "llmInteractionsConnection",
            Field::Page {
                of: &LLM_INTERACTIONS,
                rows: Rows::LlmInteractions(Scope::Session),
            },
        ),
        (
            "mcpInteractionsConnection",
            Field::Page {
                of: &MCP_INTERACTIONS,
                rows: Rows::McpInteractions(Scope::Session),
            },
        ),
        (
            "chatsConnection",
            Field::Page {
                of: &CHATS,
                rows: Rows::Chats {
                    include_deleted: false,
                },
            },
        ),
    ],
};

pub static STAGE: ObjectType = ObjectType {
    name: "Stage",
    fields: &[
        ("id", Field::GlobalId(NodeType::Stage)),
        ("uuid", column("id", uuid)),
        ("name", counted("stage_name", text)),
        ("stageIndex", column("stage_index", int)),
        ("expectedAgentCount", column("expected_agent_count", int)),
        (
            "parallelType",
            column("parallel_type", enumerated::<ParallelType>),
        ),
        (
            "successPolicy",
            column("success_policy", enumerated::<SuccessPolicy>),
        ),
        ("status", column("status", enumerated::<StageStatus>)),
        ("startedAt", column("started_at", time)),
        ("completedAt", column("completed_at", time)),
        ("durationMs", column("duration_ms", int)),
        ("errorMessage", counted("error_message", text)),
        ("createdAt", column("created_at", time)),
        ("updatedAt", column("updated_at", time)),
        (
            "executions",
            Field::List {
                of: &EXECUTION,
                rows: Rows::Executions { sub_agents: true },
            },
        ),
        (
            "timeline",
            Field::Page {
                of: &TIMELINE,
                rows: Rows::Timeline(Scope::Stage),
            },
        ),
        (
            "messagesConnection",
            Field::Page {
                of: &MESSAGES,
                rows: Rows::Messages(Scope::Stage),
            },
        ),
        (
            "llmInteractionsConnection",
            Field::Page {
                of: &LLM_INTERACTIONS,
                rows: Rows::LlmInteractions(Scope::Stage),
            },
        ),
        (
            "mcpInteractionsConnection",
            Field::Page {
                of: &MCP_INTERACTIONS,
                rows: Rows::McpInteractions(Scope::Stage),
            },
        ),
    ],
};

pub static EXECUTION: ObjectType = ObjectType {
    name: "AgentExecution",
    fields: &[
        ("id", Field::GlobalId(NodeType::AgentExecution)),
        ("uuid", column("id", uuid)),
        ("agentName", counted("agent_name", text)),
        ("agentIndex", column("agent_index", int)),
        ("status", column("status", enumerated::<ExecutionStatus>)),
        ("startedAt", column("started_at", time)),
        ("completedAt", column("completed_at", time)),
        ("durationMs", column("duration_ms", int)),
        ("errorMessage", counted("error_message", text)),
        ("iterationStrategy", counted("iteration_strategy", text)),
        ("llmProvider", counted("llm_provider", text)),
        ("llmModel", counted("llm_model", text)),
        ("agentType", column("agent_type", enumerated::<AgentType>)),
        ("teamName", counted("team_name", text)),
        ("task", counted("task", text)),
        ("resultSummary", counted("result_summary", text)),
        ("depth", column("depth", int)),
        ("parentId", column("parent_execution_id", execution_id)),
        ("createdAt", column("created_at", time)),
        ("updatedAt", column("updated_at", time)),
        (
            "subAgents",
            Field::List {
                of: &EXECUTION,
                rows: Rows::SubAgents,
            },
        ),
        (
            "timeline",
            Field::Page {
                of: &TIMELINE,
                rows: Rows::Timeline(Scope::Execution),
            },
        ),
        (
            "messagesConnection",
            Field::Page {
                of: &MESSAGES,
                rows: Rows::Messages(Scope::Execution),
            },
        ),
        (
            "llmInteractionsConnection",
            Field::Page {
                of: &LLM_INTERACTIONS,
                rows: Rows::LlmInteractions(Scope::Execution),
            },
        ),
        (
            "mcpInteractionsConnection",
            Field::Page {
                of: &MCP_INTERACTIONS,
                rows: Rows::McpInteractions(Scope::Execution),
            },
        ),
    ],
};

static TIMELINE_EVENT: ObjectType = ObjectType {
    name: "TimelineEvent",
    fields: &[
        ("id", Field::GlobalId(NodeType::TimelineEvent)),
        ("uuid", column("id", uuid)),
        ("sequenceNumber", column("sequence_number", int)),
        (
            "eventType",
            column("event_type", enumerated::<TimelineEventType>),
        ),
        (
            "status",
            column("status", enumerated::<TimelineEventStatus>),
        ),
        ("content", counted("content", text)),
        ("metadata", counted("metadata", raw_json)),
        ("createdAt", column("created_at", time)),
        ("updatedAt", column("updated_at", time)),
    ],
};

static MESSAGE: ObjectType = ObjectType {
    name: "Message",
    fields: &[
        ("id", Field::GlobalId(NodeType::Message)),
        ("uuid", column("id", uuid)),
        ("sequenceNumber", column("sequence_number", int)),
        ("role", column("role", enumerated::<MessageRole>)),
        ("content", counted("content", text)),
        ("toolCallId", counted("tool_call_id", text)),
        ("toolName", counted("tool_name", text)),
        ("toolCalls", counted("tool_calls", raw_json)),
        ("createdAt", column("created_at", time)),
    ],
};

static LLM_INTERACTION: ObjectType = ObjectType {
    name: "LLMInteraction",
    fields: &[
        ("id", Field::GlobalId(NodeType::LlmInteraction)),
        ("uuid", column("id", uuid)),
        (
            "interactionType",
            column("interaction_type", enumerated::<LlmInteractionType>),
        ),
        ("modelName", counted("model_name", text)),
        ("llmRequest", counted("llm_request", parsed_json)),
        ("llmResponse", counted("llm_response", parsed_json)),
        ("thinkingContent", counted("thinking_content", text)),
        (
            "responseMetadata",
            counted("response_metadata", parsed_json),
        ),
        ("inputTokens", column("input_tokens", int)),
        ("cachedInputTokens", column("cached_input_tokens", int)),
        ("outputTokens", column("output_tokens", int)),
        ("totalTokens", column("total_tokens", int)),
        ("thinkingTokens", column("thinking_tokens", int)),
        ("durationMs", column("duration_ms", int)),
        ("errorMessage", counted("error_message", text)),
        ("success", is_null("error_message")),
        ("createdAt", column("created_at", time)),
        ("historyEdited", is_set("sent_message_ids")),
        (
            "lastMessage",
            Field::One {
                of: &MESSAGE,
                rows: Rows::LastMessage,
            },
        ),
        (
            "conversationConnection",
            Field::Page {
                of: &MESSAGES,
                rows: Rows::Conversation,
            },
        ),
    ],
};

static MCP_INTERACTION: ObjectType = ObjectType {
    name: "MCPInteraction",
    fields: &[
        ("id", Field::GlobalId(NodeType::McpInteraction)),
        ("uuid", column("id", uuid)),
        (
            "interactionType",
            column("interaction_type", enumerated::<McpInteractionType>),
        ),
        ("serverName", counted("server_name", text)),
        ("toolName", counted("tool_name", text)),
        ("toolArguments", counted("tool_arguments", parsed_json)),
        ("toolResult", counted("tool_result", parsed_json)),
        ("availableTools", counted("available_tools", parsed_json)),
        ("durationMs", column("duration_ms", int)),
        ("errorMessage", counted("error_message", text)),
        ("success", is_null("error_message")),
        ("createdAt", column("created_at", time)),
        ("toolCallId", counted("tool_call_id", text)),
        ("attempt", column("attempt", int)),
    ],
};

static CHAT: ObjectType = ObjectType {
    name: "Chat",
    fields: &[
        ("id", Field::GlobalId(NodeType::Chat)),
        ("uuid", column("id", uuid)),
        ("createdBy", counted("created_by", text)),
        ("title", counted("title", text)),
        ("createdAt", column("created_at", time)),
        ("updatedAt", column("updated_at", time)),
        ("deletedAt", column("deleted_at", time)),
        ("deletedBy", counted("deleted_by", text)),
        (
            "questionsConnection",
            Field::Page {
                of: &QUESTIONS,
                rows: Rows::Questions,
            },
        ),
    ],
};

static QUESTION: ObjectType = ObjectType {
    name: "ChatUserMessage",
    fields: &[
        ("id", Field::GlobalId(NodeType::ChatUserMessage)),
        ("uuid", column("id", uuid)),
        ("content", counted("content", text)),
        ("author", counted("author", text)),
        ("createdBy", counted("created_by", text)),
        ("createdAt", column("created_at", time)),
    ],
};

static CHATS: ConnectionType = ConnectionType {
    name: "ChatConnection",
    edge: "ChatEdge",
    node: &CHAT,
};

static QUESTIONS: ConnectionType = ConnectionType {
    name: "ChatQuestionConnection",
    edge: "ChatQuestionEdge",
    node: &QUESTION,
};

pub static SESSIONS: ConnectionType = ConnectionType {
    name: "SessionConnection",
    edge: "SessionEdge",
    node: &SESSION,
};

static TIMELINE: ConnectionType = ConnectionType {
    name: "TimelineEventConnection",
    edge: "TimelineEventEdge",
    node: &TIMELINE_EVENT,
};

static MESSAGES: ConnectionType = ConnectionType {
    name: "MessageConnection",
    edge: "MessageEdge",
    node: &MESSAGE,
};

static LLM_INTERACTIONS: ConnectionType = ConnectionType {
    name: "LlmInteractionConnection",
    edge: "LlmInteractionEdge",
    node: &LLM_INTERACTION,
};

static MCP_INTERACTIONS: ConnectionType = ConnectionType {
    name: "McpInteractionConnection",
    edge: "McpInteractionEdge",
    node: &MCP_INTERACTION,
};

impl ObjectType {
    pub fn field(&self, name: &str) -> Option<&'static Field> {
        self.fields
            .iter()
            .find(|(field, _)| *field == name)
            .map(|(_, f)| f)
    }
}
