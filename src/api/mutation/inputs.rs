//! Mutation inputs. Each converts into the store's command, resolving IDs (a global ID or a
//! bare UUID) on the way.

use async_graphql::{ID, InputObject, Json};
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use rust_decimal::prelude::FromPrimitive as _;
use serde_json::Value;
use uuid::Uuid;

use crate::api::ids::{NodeType, decode_as};
use crate::api::types::ChainVersionRef;
use crate::error::{Error, Result};
use crate::model::*;
use crate::store::ChainKey;
use crate::store::prices::NewPrice;
use crate::store::write::{
    chains::NewChain,
    chats::{NewChat, NewChatMessage},
    executions::{self, NewExecution},
    interactions::{NewLlmInteraction, NewMcpInteraction, check_cost},
    limits,
    messages::NewMessage,
    notifications::NewNotification,
    sessions::NewSession,
    stages::NewStage,
    timeline::{Append, Finish, NewEvent},
};

fn uuid(node_type: NodeType, id: &ID) -> Result<Uuid> {
    decode_as(node_type, id)
}

fn optional_uuid(node_type: NodeType, id: Option<&ID>) -> Result<Option<Uuid>> {
    id.map(|id| uuid(node_type, id)).transpose()
}

/// A GraphQL `Int` stored in a 32-bit column. Read as 64 bits, so that a larger value is refused
/// naming its field (async-graphql's own refusal names only the input type).
fn int32(field: &str, value: i64) -> Result<i32> {
    i32::try_from(value).map_err(|_| {
        Error::bad_input(format!(
            "`{field}` is {value}, outside the range {} to {}",
            i32::MIN,
            i32::MAX
        ))
    })
}

fn optional_int32(field: &str, value: Option<i64>) -> Result<Option<i32>> {
    value.map(|v| int32(field, v)).transpose()
}

fn json_or(value: Option<Json<Value>>, default: Value) -> Value {
    value.map_or(default, |j| j.0)
}

/// A new session, created from an alert.
#[derive(InputObject)]
pub struct CreateSessionInput {
    /// Client-chosen UUID (UUIDv7 recommended) that makes retries safe: the same request under
    /// the same id returns the same session; a different one is a CONFLICT.
    pub id: Option<Uuid>,
    /// Kind of alert (1–200 characters).
    pub alert_type: String,
    /// The alert as received (JSON, at most 256 KiB).
    pub alert_data: Option<Json<Value>>,
    /// The registered chain version that will process it: the session keeps it for good, and
    /// is found by it (`sessions(filter: { chain })`, `Chain.sessionsConnection`). Its name is
    /// the session's `chainId`.
    pub chain: Option<ChainVersionRef>,
    /// The name of the chain that will process it (1–200 characters), for a client that
    /// names no version: the session records the name only (`chain` is null). With `chain`,
    /// it may be left out; given, it must be `chain.name`. One of the two is required.
    pub chain_id: Option<String>,
    /// What this session changes of its chain version's settings (a JSON object, at most
    /// 16 KiB; only with `chain`), kept as sent beside the version's definition.
    pub chain_overrides: Option<Json<Value>>,
    /// Who or what submitted the alert (at most 200 characters).
    pub author: Option<String>,
    /// Runbook the agents follow (at most 2,000 characters).
    pub runbook_url: Option<String>,
    /// Who creates it (at most 200 characters). Only without authentication (`--auth none`);
    /// otherwise it is the caller's identity, and setting it is a BAD_USER_INPUT.
    pub created_by: Option<String>,
    /// Why, for the status history (at most 2,000 characters).
    pub reason: Option<String>,
}

impl CreateSessionInput {
    /// The command, created by `created_by` (already resolved against the caller).
    pub fn into_command(self, created_by: Option<String>) -> Result<NewSession> {
        let (chain_id, chain_version) = match (self.chain_id, self.chain) {
            (None, None) => {
                return Err(Error::bad_input(
                    "give `chain` (a registered chain version) or `chainId` (a chain's name)",
                ));
            }
            (Some(name), None) => (name, None),
            (named, Some(chain)) => {
                if named.as_ref().is_some_and(|name| *name != chain.name) {
                    return Err(Error::bad_input(
                        "`chainId` names another chain than `chain.name`; give `chain` alone",
                    ));
                }
                (chain.name, Some(chain.version))
            }
        };
        Ok(NewSession {
            created_by,
            id: self.id,
            alert_type: self.alert_type,
            alert_data: json_or(self.alert_data, serde_json::json!({})),
            chain_id,
            author: self.author,
            runbook_url: self.runbook_url,
            chain_version,
            chain_overrides: self.chain_overrides.map(|j| j.0),
        })
    }
}

/// A chain version to register.
#[derive(InputObject)]
pub struct RegisterChainInput {
    /// The chain's name (1–200 characters; what sessions' `chainId` holds).
    pub name: String,
    /// The version (1–100 letters, digits, `.`, `_`, `+` or `-`, starting with a letter or
    /// digit: `1.4.0`, `v2`, `2024-06-01`, a commit hash).
    pub version: String,
    /// The definition: a JSON object of at most 64 KiB whose `stages` lists the chain's
    /// stages in order, at least one, each an object with a `name` (1–200 characters);
    /// anything else in it is the chain's own.
    pub definition: Json<Value>,
}

impl RegisterChainInput {
    /// The command, registered by `created_by` (the caller).
    pub fn into_command(self, created_by: Option<String>) -> NewChain {
        NewChain {
            key: ChainKey {
                name: self.name,
                version: self.version,
            },
            definition: self.definition.0,
            created_by,
        }
    }
}

/// A new stage of a session's chain, or a chat's answering stage.
#[derive(InputObject)]
pub struct CreateStageInput {
    /// Client-chosen UUID that makes retries safe.
    pub id: Option<Uuid>,
    /// The session (global ID or UUID).
    pub session_id: ID,
    /// Position in the chain (0, 1, 2, …; unique in the session). A chat's answering stage
    /// takes the next index after the largest, so a chat cannot follow a stage at 2147483647.
    pub stage_index: i64,
    /// Stage name (1–200 characters).
    pub name: String,
    /// How many agents run in it (default 1; at least 1).
    #[graphql(default = 1)]
    pub expected_agent_count: i64,
    /// Required with several agents, absent with one.
    pub parallel_type: Option<ParallelType>,
    /// Required with several agents, absent with one.
    pub success_policy: Option<SuccessPolicy>,
    /// The chat this stage answers in (only on a finished session).
    pub chat_id: Option<ID>,
    /// The chat question this stage answers.
    pub chat_user_message_id: Option<ID>,
}

impl CreateStageInput {
    pub fn into_command(self) -> Result<NewStage> {
        Ok(NewStage {
            id: self.id,
            session_id: uuid(NodeType::Session, &self.session_id)?,
            stage_index: int32("stageIndex", self.stage_index)?,
            name: self.name,
            expected_agent_count: int32("expectedAgentCount", self.expected_agent_count)?,
            parallel_type: self.parallel_type,
            success_policy: self.success_policy,
            chat_id: optional_uuid(NodeType::Chat, self.chat_id.as_ref())?,
            chat_user_message_id: optional_uuid(
                NodeType::ChatUserMessage,
                self.chat_user_message_id.as_ref(),
            )?,
        })
    }
}

/// A new agent execution in a stage (or a sub-agent of an orchestrator execution).
#[derive(InputObject)]
pub struct CreateAgentExecutionInput {
    /// Client-chosen UUID that makes retries safe.
    pub id: Option<Uuid>,
    /// The stage it runs in.
    pub stage_id: ID,
    /// Agent name (1–200 characters).
    pub agent_name: String,
    /// Position among the stage's agents (1…N, unique in the stage).
    pub agent_index: i64,
    /// How the agent iterates, e.g. "react" (1–100 characters).
    pub iteration_strategy: String,
    /// LLM provider (at most 200 characters).
    pub llm_provider: Option<String>,
    /// LLM model (at most 200 characters).
    pub llm_model: Option<String>,
    /// For a sub-agent: the orchestrator execution that spawns it (same stage). Trees are at
    /// most 10 deep.
    pub parent_execution_id: Option<ID>,
    /// Where the agent stands in its tree. Default: `GLOBAL_SUPERVISOR` for a top-level agent,
    /// `WORKER` for a sub-agent.
    pub agent_type: Option<AgentType>,
    /// Its team (1–200 characters): required of team supervisors and workers (a sub-agent
    /// without one joins its parent's team, or the team named after its parent), refused for
    /// the global supervisor.
    pub team_name: Option<String>,
    /// The task it was given (seed 003's inherited context).
    pub task: Option<String>,
}

impl CreateAgentExecutionInput {
    pub fn into_command(self) -> Result<NewExecution> {
        Ok(NewExecution {
            id: self.id,
            stage_id: uuid(NodeType::Stage, &self.stage_id)?,
            agent_name: self.agent_name,
            agent_index: int32("agentIndex", self.agent_index)?,
            iteration_strategy: self.iteration_strategy,
            llm_provider: self.llm_provider,
            llm_model: self.llm_model,
            parent_execution_id: optional_uuid(
                NodeType::AgentExecution,
                self.parent_execution_id.as_ref(),
            )?,
            agent_type: self.agent_type,
            team_name: self.team_name,
            task: self.task,
        })
    }
}

/// The final status of an agent execution.
#[derive(async_graphql::Enum, Clone, Copy, PartialEq, Eq)]
pub enum ExecutionOutcome {
    /// Finished successfully.
    Completed,
    /// Failed.
    Failed,
    /// Exceeded its time limit.
    TimedOut,
    /// Cancelled.
    Cancelled,
}

impl From<ExecutionOutcome> for ExecutionStatus {
    fn from(o: ExecutionOutcome) -> Self {
        match o {
            ExecutionOutcome::Completed => Self::Completed,
            ExecutionOutcome::Failed => Self::Failed,
            ExecutionOutcome::TimedOut => Self::TimedOut,
            ExecutionOutcome::Cancelled => Self::Cancelled,
        }
    }
}

/// Ends an agent execution.
#[derive(InputObject)]
pub struct FinishAgentExecutionInput {
    /// The execution.
    pub id: ID,
    /// How it ended.
    pub status: ExecutionOutcome,
    /// Why it failed, timed out or was cancelled (not for COMPLETED; at most 1,000,000 characters).
    pub error_message: Option<String>,
    /// What it returns to its parent (seed 003's result summary; at most 1,000,000
    /// characters).
    pub result_summary: Option<String>,
    /// For the execution answering a chat question: notifications about the answer (each
    /// names the question), written with it, in its transaction (none when this is a retry).
    /// Refused on any other execution.
    pub notify: Option<Vec<NotifyInput>>,
}

impl FinishAgentExecutionInput {
    /// The command; `notify` without `maxAttempts` gets `default_max_attempts`.
    pub fn into_command(self, default_max_attempts: i32) -> Result<executions::Finish> {
        Ok(executions::Finish {
            id: decode_as(NodeType::AgentExecution, &self.id)?,
            status: self.status.into(),
            error_message: self.error_message,
            result_summary: self.result_summary,
            notify: NotifyInput::into_new(self.notify, default_max_attempts),
        })
    }
}

/// How serious a system notice is.
#[derive(async_graphql::Enum, Clone, Copy, PartialEq, Eq)]
pub enum SystemNoticeLevel {
    /// Something degraded, the run goes on (a fallback model used).
    Warning,
    /// Something failed (an MCP server unavailable).
    Error,
}

/// A warning or error the orchestrator records for an agent (an MCP server unavailable, a
/// fallback model used): a timeline event of type `SYSTEM_WARNING` or `SYSTEM_ERROR`, and a
/// `SYSTEM` `WARNING` / `ERROR` event in the session's stream.
#[derive(InputObject)]
pub struct RecordSystemNoticeInput {
    /// Client-chosen UUID that makes retries safe.
    pub id: Option<Uuid>,
    /// The agent execution it concerns (it must be running).
    pub execution_id: ID,
    /// How serious it is.
    pub level: SystemNoticeLevel,
    /// Machine-readable, e.g. `MCP_SERVER_UNAVAILABLE` (1–100 letters, digits, `_`, `.`, `-`).
    pub code: String,
    /// For people (1–10,000 characters).
    pub message: String,
    /// More details (JSON object, at most 256 KiB); `code` is added to it.
    pub details: Option<Json<Value>>,
}

impl RecordSystemNoticeInput {
    pub fn into_command(self) -> Result<NewEvent> {
        let code = self.code.trim();
        let valid = !code.is_empty()
            && code.len() <= 100
            && code
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if !valid {
            return Err(Error::bad_input(
                "`code` must be 1–100 letters, digits, '_', '.' or '-'",
            ));
        }
        let chars = self.message.chars().count();
        if self.message.trim().is_empty() || chars > 10_000 {
            return Err(Error::bad_input(
                "`message` must be 1–10,000 characters, not only whitespace",
            ));
        }
        let mut metadata = match self.details.map(|d| d.0) {
            None => serde_json::Map::new(),
            Some(Value::Object(map)) => map,
            Some(_) => return Err(Error::bad_input("`details` must be a JSON object")),
        };
        metadata.insert("code".into(), Value::String(code.to_owned()));
        Ok(NewEvent {
            id: self.id,
            execution_id: uuid(NodeType::AgentExecution, &self.execution_id)?,
            event_type: match self.level {
                SystemNoticeLevel::Warning => TimelineEventType::SystemWarning,
                SystemNoticeLevel::Error => TimelineEventType::SystemError,
            },
            status: TimelineEventStatus::Completed,
            content: self.message,
            metadata: Value::Object(metadata),
        })
    }
}

/// Starts a pending agent execution.
#[derive(InputObject)]
pub struct StartAgentExecutionInput {
    /// The execution.
    pub id: ID,
}

/// A new timeline event, created when streaming starts (or complete, for an instant event).
#[derive(InputObject)]
pub struct CreateTimelineEventInput {
    /// Client-chosen UUID that makes retries safe.
    pub id: Option<Uuid>,
    /// The agent execution that produces it.
    pub execution_id: ID,
    /// What it shows.
    pub event_type: TimelineEventType,
    /// `STREAMING` (default) to append content next, or `COMPLETED` for an instant event.
    #[graphql(default_with = "TimelineEventStatus::Streaming")]
    pub status: TimelineEventStatus,
    /// Initial content (at most 1,000,000 characters).
    #[graphql(default)]
    pub content: String,
    /// Type-specific details (JSON, at most 256 KiB).
    pub metadata: Option<Json<Value>>,
}

impl CreateTimelineEventInput {
    pub fn into_command(self) -> Result<NewEvent> {
        Ok(NewEvent {
            id: self.id,
            execution_id: uuid(NodeType::AgentExecution, &self.execution_id)?,
            event_type: self.event_type,
            status: self.status,
            content: self.content,
            metadata: json_or(self.metadata, serde_json::json!({})),
        })
    }
}

/// A piece of a streaming event's content.
#[derive(InputObject)]
pub struct AppendTimelineContentInput {
    /// The streaming event.
    pub event_id: ID,
    /// Where `delta` starts, in characters (Unicode code points) from the start of the content:
    /// the length of everything appended before (0 or more). Resending an applied chunk is
    /// harmless; a gap is refused.
    pub offset: i64,
    /// The text to append (1–65,536 characters).
    pub delta: String,
}

impl AppendTimelineContentInput {
    pub fn into_command(self) -> Result<Append> {
        Ok(Append {
            event_id: uuid(NodeType::TimelineEvent, &self.event_id)?,
            offset: i64::from(int32("offset", self.offset)?),
            delta: self.delta,
        })
    }
}

/// Ends a streaming timeline event.
#[derive(InputObject)]
pub struct FinishTimelineEventInput {
    /// The event.
    pub event_id: ID,
    /// How it ended (not `STREAMING`).
    pub status: TimelineEventStatus,
    /// The final content (at most 1,000,000 characters); when absent, what was streamed.
    pub content: Option<String>,
    /// Replaces the metadata when given (JSON, at most 256 KiB).
    pub metadata: Option<Json<Value>>,
    /// The LLM call behind it (same session).
    pub llm_interaction_id: Option<ID>,
    /// The MCP call behind it (same session).
    pub mcp_interaction_id: Option<ID>,
}

impl FinishTimelineEventInput {
    pub fn into_command(self) -> Result<Finish> {
        Ok(Finish {
            event_id: uuid(NodeType::TimelineEvent, &self.event_id)?,
            status: self.status,
            content: self.content,
            metadata: self.metadata.map(|j| j.0),
            llm_interaction_id: optional_uuid(
                NodeType::LlmInteraction,
                self.llm_interaction_id.as_ref(),
            )?,
            mcp_interaction_id: optional_uuid(
                NodeType::McpInteraction,
                self.mcp_interaction_id.as_ref(),
            )?,
        })
    }
}

/// The next message of an agent's LLM conversation (numbered by the server).
#[derive(InputObject)]
pub struct AppendMessageInput {
    /// Client-chosen UUID that makes retries safe.
    pub id: Option<Uuid>,
    /// The agent execution whose conversation it extends.
    pub execution_id: ID,
    /// Who speaks.
    pub role: MessageRole,
    /// Message text (at most 1,000,000 characters).
    pub content: String,
    /// For `TOOL` (required): the id of the tool call it answers, which an earlier `ASSISTANT`
    /// message of this conversation requested and nothing answered yet (at most 200
    /// characters).
    pub tool_call_id: Option<String>,
    /// For `TOOL`: the tool that produced it (at most 200 characters).
    pub tool_name: Option<String>,
    /// For `ASSISTANT`: the tool calls it requests (JSON, at most 4 MiB), as the model gave
    /// them: a list whose every element has a string `id` (1–200 characters, new in this
    /// conversation) and a string `name` or `function.name` (OpenAI's form), with arguments
    /// in `arguments`, `input` or `function.arguments`. Stored as sent; see
    /// `Message.requestedToolCalls` for each call linked to its result.
    pub tool_calls: Option<Json<Value>>,
}

impl AppendMessageInput {
    pub fn into_command(self) -> Result<NewMessage> {
        Ok(NewMessage {
            id: self.id,
            execution_id: uuid(NodeType::AgentExecution, &self.execution_id)?,
            role: self.role,
            content: self.content,
            tool_call_id: self.tool_call_id,
            tool_name: self.tool_name,
            tool_calls: self.tool_calls.map(|j| j.0),
        })
    }
}

/// The record of one completed LLM call.
#[derive(InputObject)]
#[graphql(name = "RecordLLMInteractionInput")]
pub struct RecordLlmInteractionInput {
    /// Client-chosen UUID that makes retries safe.
    pub id: Option<Uuid>,
    /// The agent execution that made the call.
    pub execution_id: ID,
    /// Why the model was called.
    pub interaction_type: LlmInteractionType,
    /// Model name (1–200 characters).
    pub model_name: String,
    /// The last message sent (a message of the same execution): the conversation sent is every
    /// message up to it, unless `sentMessageIds` says otherwise.
    pub last_message_id: Option<ID>,
    /// The messages sent, in the order sent, when they were not simply the conversation up to
    /// `lastMessageId`: an agent that compressed part of its history (a summary message standing
    /// in for earlier ones) or discarded steps (seed 003). Each a message of the same execution,
    /// named once, 1 to 10,000 of them; `lastMessageId` is the last of them (give it equal, or
    /// leave it out). `conversationConnection` then returns exactly these.
    pub sent_message_ids: Option<Vec<ID>>,
    /// The request sent (JSON, at most 4 MiB).
    pub llm_request: Option<Json<Value>>,
    /// The response received (JSON, at most 4 MiB).
    pub llm_response: Option<Json<Value>>,
    /// Native thinking (at most 1,000,000 characters).
    pub thinking_content: Option<String>,
    /// Grounding, tool usage and other provider metadata (JSON, at most 256 KiB).
    pub response_metadata: Option<Json<Value>>,
    /// Tokens sent (0 or more), cached ones included.
    pub input_tokens: Option<i64>,
    /// Of the input tokens, those read from the provider's cache (0 to `inputTokens`; a
    /// provider that reports them apart, such as Anthropic's `cache_read_input_tokens`, adds
    /// them to `inputTokens` too). Priced at the cached-input price.
    pub cached_input_tokens: Option<i64>,
    /// Tokens produced (0 or more), thinking included.
    pub output_tokens: Option<i64>,
    /// Total tokens (0 or more; default: input + output).
    pub total_tokens: Option<i64>,
    /// Of the output tokens, those spent thinking (0 to `outputTokens`; a provider that reports
    /// them apart, such as Gemini's `thoughts_token_count`, adds them to `outputTokens` too).
    /// Priced at the thinking price.
    pub thinking_tokens: Option<i64>,
    /// The call's cost in US dollars as the client knows it (0 to 1,000,000,000, stored rounded
    /// to 10 decimal places), kept as sent (`costSource: CLIENT`). Without it, casefile computes
    /// the cost from the price list (`setModelPrice`) at the call's time.
    pub total_cost_usd: Option<Decimal>,
    /// As `totalCostUsd`, as a float.
    #[graphql(
        deprecation = "Use `totalCostUsd` (a decimal, exact), or send no cost and let the price list price the call."
    )]
    pub estimated_cost_usd: Option<f64>,
    /// How long the call took, in milliseconds (0 or more).
    pub duration_ms: Option<i64>,
    /// Why the call failed (absent when it succeeded; at most 1,000,000 characters).
    pub error_message: Option<String>,
    /// When the call happened, for a call recorded late (a batch sent after an outage): its
    /// `createdAt`, and the time its price is looked up at. Default, and at most: now (a later
    /// time, from a clock ahead of the server's, is taken as now).
    pub called_at: Option<DateTime<Utc>>,
}

impl RecordLlmInteractionInput {
    pub fn into_command(self) -> Result<NewLlmInteraction> {
        Ok(NewLlmInteraction {
            id: self.id,
            execution_id: uuid(NodeType::AgentExecution, &self.execution_id)?,
            interaction_type: self.interaction_type,
            model_name: self.model_name,
            last_message_id: optional_uuid(NodeType::Message, self.last_message_id.as_ref())?,
            llm_request: json_or(self.llm_request, serde_json::json!({})),
            llm_response: json_or(self.llm_response, serde_json::json!({})),
            thinking_content: self.thinking_content,
            response_metadata: json_or(self.response_metadata, serde_json::json!({})),
            input_tokens: optional_int32("inputTokens", self.input_tokens)?,
            output_tokens: optional_int32("outputTokens", self.output_tokens)?,
            total_tokens: optional_int32("totalTokens", self.total_tokens)?,
            thinking_tokens: optional_int32("thinkingTokens", self.thinking_tokens)?,
            cost_usd: client_cost(self.total_cost_usd, self.estimated_cost_usd)?,
            duration_ms: self.duration_ms,
            error_message: self.error_message,
            cached_input_tokens: optional_int32("cachedInputTokens", self.cached_input_tokens)?,
            called_at: self.called_at,
            sent_message_ids: self
                .sent_message_ids
                .map(|ids| {
                    ids.iter()
                        .map(|id| uuid(NodeType::Message, id))
                        .collect::<Result<Vec<_>>>()
                })
                .transpose()?,
        })
    }
}

/// The cost a client sent, exact or as a float (deprecated): the float read without its binary
/// noise (0.1 is 0.1), never computed with.
fn client_cost(exact: Option<Decimal>, float: Option<f64>) -> Result<Option<Decimal>> {
    match (exact, float) {
        (Some(_), Some(_)) => Err(Error::bad_input(
            "give the cost once: `totalCostUsd` (or the deprecated `estimatedCostUsd`), not both",
        )),
        (Some(cost), None) => {
            check_cost("totalCostUsd", cost)?;
            Ok(Some(cost))
        }
        (None, Some(cost)) => {
            let exact = Decimal::from_f64(cost).ok_or_else(|| {
                Error::bad_input(format!(
                    "`estimatedCostUsd` must be between 0 and {}, got {cost}",
                    limits::COST_USD
                ))
            })?;
            check_cost("estimatedCostUsd", exact)?;
            Ok(Some(exact))
        }
        (None, None) => Ok(None),
    }
}

/// The record of one completed MCP call.
#[derive(InputObject)]
#[graphql(name = "RecordMCPInteractionInput")]
pub struct RecordMcpInteractionInput {
    /// Client-chosen UUID that makes retries safe.
    pub id: Option<Uuid>,
    /// The agent execution that made the call.
    pub execution_id: ID,
    /// A tool call or a tool listing.
    pub interaction_type: McpInteractionType,
    /// MCP server (1–200 characters).
    pub server_name: String,
    /// Tool called (required for `TOOL_CALL`; 1–200 characters).
    pub tool_name: Option<String>,
    /// Arguments passed (JSON, at most 4 MiB).
    pub tool_arguments: Option<Json<Value>>,
    /// What the tool returned (JSON, at most 4 MiB).
    pub tool_result: Option<Json<Value>>,
    /// For a listing: the tools offered (JSON, at most 4 MiB).
    pub available_tools: Option<Json<Value>>,
    /// How long the call took, in milliseconds (0 or more).
    pub duration_ms: Option<i64>,
    /// Why the call failed (absent when it succeeded; at most 1,000,000 characters).
    pub error_message: Option<String>,
    /// For a `TOOL_CALL`: the id of the call it executed, which an earlier `ASSISTANT` message
    /// of the same agent's conversation requested in its `toolCalls` (1–200 characters). Links
    /// the interaction to the request, its answer and its timeline events. A call executed
    /// again (a retry) is recorded as its next attempt (`attempt`, numbered by the server in the
    /// order recorded); give `id` so that a resent recording adds no attempt.
    pub tool_call_id: Option<String>,
}

impl RecordMcpInteractionInput {
    pub fn into_command(self) -> Result<NewMcpInteraction> {
        Ok(NewMcpInteraction {
            id: self.id,
            execution_id: uuid(NodeType::AgentExecution, &self.execution_id)?,
            interaction_type: self.interaction_type,
            server_name: self.server_name,
            tool_name: self.tool_name,
            tool_arguments: json_or(self.tool_arguments, serde_json::json!({})),
            tool_result: json_or(self.tool_result, serde_json::json!({})),
            available_tools: json_or(self.available_tools, serde_json::json!([])),
            duration_ms: self.duration_ms,
            error_message: self.error_message,
            tool_call_id: self.tool_call_id,
        })
    }
}

/// A follow-up chat on a finished session.
#[derive(InputObject)]
pub struct OpenChatInput {
    /// Client-chosen UUID that makes retries safe.
    pub id: Option<Uuid>,
    /// The finished session.
    pub session_id: ID,
    /// Who opens it, and so owns it (at most 200 characters). Only without authentication
    /// (`--auth none`); otherwise it is the caller's identity, and setting it is a
    /// BAD_USER_INPUT.
    pub created_by: Option<String>,
    /// Its title (1–200 characters, not only whitespace); its owner can change it later.
    pub title: Option<String>,
}

impl OpenChatInput {
    /// The command, opened by `created_by` (already resolved against the caller).
    pub fn into_command(self, created_by: Option<String>) -> Result<NewChat> {
        Ok(NewChat {
            id: self.id,
            session_id: uuid(NodeType::Session, &self.session_id)?,
            created_by,
            title: self.title,
        })
    }
}

/// A chat's new title.
#[derive(InputObject)]
pub struct RenameChatInput {
    /// The chat.
    pub id: ID,
    /// The new title (1–200 characters, not only whitespace), or null to remove it.
    pub title: Option<String>,
}

/// A chat to delete or restore, and why.
#[derive(InputObject)]
pub struct ChatDeletionInput {
    /// The chat.
    pub id: ID,
    /// Why, for the session's audit trail (at most 2,000 characters).
    pub reason: Option<String>,
}

/// A question in a chat. Creates the question, its answering stage (next stage index) with one
/// pending agent execution, and the `USER_QUESTION` timeline event.
#[derive(InputObject)]
pub struct PostChatMessageInput {
    /// Client-chosen UUID that makes retries safe.
    pub id: Option<Uuid>,
    /// The chat.
    pub chat_id: ID,
    /// The question: not empty, not only whitespace, at most 5,000 characters.
    pub content: String,
    /// Who asks, as a display name (at most 200 characters).
    pub author: Option<String>,
    /// Who posts it (at most 200 characters). Only without authentication (`--auth none`);
    /// otherwise it is the caller's identity, and setting it is a BAD_USER_INPUT.
    pub created_by: Option<String>,
    /// UUID for the answering stage (generated when absent).
    pub stage_id: Option<Uuid>,
    /// UUID for the answering agent execution (generated when absent).
    pub execution_id: Option<Uuid>,
    /// The answering agent (default "ChatAgent"; 1–200 characters).
    #[graphql(default_with = "String::from(\"ChatAgent\")")]
    pub agent_name: String,
    /// Its iteration strategy (default "react"; 1–100 characters).
    #[graphql(default_with = "String::from(\"react\")")]
    pub iteration_strategy: String,
    /// Its LLM provider (at most 200 characters).
    pub llm_provider: Option<String>,
    /// Its LLM model (at most 200 characters).
    pub llm_model: Option<String>,
}

impl PostChatMessageInput {
    /// The command, posted by `created_by` (already resolved against the caller).
    pub fn into_command(self, created_by: Option<String>) -> Result<NewChatMessage> {
        Ok(NewChatMessage {
            id: self.id,
            created_by,
            chat_id: uuid(NodeType::Chat, &self.chat_id)?,
            content: self.content,
            author: self.author,
            stage_id: self.stage_id,
            execution_id: self.execution_id,
            agent_name: self.agent_name,
            iteration_strategy: self.iteration_strategy,
            llm_provider: self.llm_provider,
            llm_model: self.llm_model,
        })
    }
}

/// Completes a session.
#[derive(InputObject)]
pub struct CompleteSessionInput {
    /// The session.
    pub id: ID,
    /// The investigation's conclusion (at most 1,000,000 characters).
    pub final_analysis: Option<String>,
    /// A short summary of it (at most 1,000,000 characters).
    pub executive_summary: Option<String>,
    /// Why, for the status history (at most 2,000 characters).
    pub reason: Option<String>,
    /// Notifications to send about it: written with the completion, in its transaction (none
    /// when this is a retry of a completion already made).
    pub notify: Option<Vec<NotifyInput>>,
}

/// Fails a session, or times it out.
#[derive(InputObject)]
pub struct FailSessionInput {
    /// The session.
    pub id: ID,
    /// Why (1–1,000,000 characters).
    pub error_message: String,
    /// Why it was ended by hand, for the status history (at most 2,000 characters).
    pub reason: Option<String>,
    /// Notifications to send about it: written with the failure, in its transaction (none
    /// when this is a retry of a failure already recorded).
    pub notify: Option<Vec<NotifyInput>>,
}

/// A notification to send; a delivery worker sends it (`claimNotifications`).
#[derive(InputObject)]
pub struct NotifyInput {
    /// Where it goes.
    #[graphql(name = "type")]
    pub notification_type: NotificationType,
    /// Where to: a Slack channel, an email address, a PagerDuty routing key, a URL (1–2,000
    /// characters).
    pub destination: String,
    /// What the worker needs beyond the destination, as a JSON object (Slack: `channel`,
    /// `thread_ts` to answer in a thread, `message_fingerprint`; at most 262,144 bytes).
    pub integration_data: Option<Json<Value>>,
    /// Attempts before it is failed for good (1–100; default: the server's
    /// `--notification-max-attempts`, 5 unless set).
    pub max_attempts: Option<i32>,
}

impl NotifyInput {
    /// The notifications asked for; those naming no `maxAttempts` get `default_max_attempts`
    /// (`--notification-max-attempts`).
    pub fn into_new(
        list: Option<Vec<NotifyInput>>,
        default_max_attempts: i32,
    ) -> Vec<NewNotification> {
        list.unwrap_or_default()
            .into_iter()
            .map(|n| NewNotification {
                notification_type: n.notification_type,
                destination: n.destination,
                integration_data: n.integration_data.map(|j| j.0),
                max_attempts: n.max_attempts.unwrap_or(default_max_attempts),
            })
            .collect()
    }
}

/// Names a notification a delivery worker claimed.
#[derive(InputObject)]
pub struct NotificationRef {
    /// Its session.
    pub session_id: ID,
    /// The notification (`Notification.id`).
    pub id: Uuid,
}

impl NotificationRef {
    pub fn key(&self) -> Result<(Uuid, Uuid)> {
        Ok((uuid(NodeType::Session, &self.session_id)?, self.id))
    }
}

/// A price of the price list, in US dollars per million tokens (each 0 to 1,000,000, at most
/// 10 decimal places).
#[derive(InputObject)]
pub struct SetModelPriceInput {
    /// The model, as LLM interactions name it (`modelName`, matched exactly; 1–200 characters).
    pub model: String,
    /// The provider it applies to, as agent executions name it (`llmProvider`, matched
    /// exactly; 1–200 characters). Without it, the price applies to every provider that has
    /// no price of its own for the model.
    pub provider: Option<String>,
    /// From when it applies (default: now). An instant in the past applies to interactions
    /// recorded from now on with an earlier `calledAt`; those already stored keep their cost.
    pub effective_from: Option<DateTime<Utc>>,
    /// Per million input tokens that were not read from a cache.
    pub input_per_million_usd: Decimal,
    /// Per million output tokens that were not thinking.
    pub output_per_million_usd: Decimal,
    /// Per million cached input tokens (default: the input price).
    pub cached_input_per_million_usd: Option<Decimal>,
    /// Per million thinking tokens (default: the output price).
    pub thinking_per_million_usd: Option<Decimal>,
}

impl SetModelPriceInput {
    /// The command, set by `created_by` (the caller).
    pub fn into_command(self, created_by: Option<String>) -> NewPrice {
        NewPrice {
            model_name: self.model,
            provider: self.provider,
            effective_from: self.effective_from,
            input_per_million: self.input_per_million_usd,
            output_per_million: self.output_per_million_usd,
            cached_input_per_million: self.cached_input_per_million_usd,
            thinking_per_million: self.thinking_per_million_usd,
            created_by,
        }
    }
}
