//! The closed vocabularies of the data model. Each is a `text` column with a CHECK constraint in
//! the database (snake_case values) and an enum in GraphQL (UPPER_CASE values).

use async_graphql::Enum;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// How the database spells a value of one of these enums (snake_case).
pub fn db_name(value: impl Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        _ => String::from("?"),
    }
}

/// The enum value the database spells `name`, if any.
pub fn from_db_name<T: DeserializeOwned>(name: &str) -> Option<T> {
    serde_json::from_value(serde_json::Value::String(name.to_owned())).ok()
}

/// Lifecycle of an investigation session.
#[derive(
    Enum, sqlx::Type, serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash,
)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    /// Created from an alert, not yet started.
    Pending,
    /// The chain is running.
    InProgress,
    /// Cancellation was requested; running work is being stopped.
    Cancelling,
    /// The chain finished and produced its analysis.
    Completed,
    /// The chain failed; see `errorMessage`.
    Failed,
    /// Cancelled before it finished.
    Cancelled,
    /// Exceeded its time limit.
    TimedOut,
}

/// What a caller may do; each role may also do everything of the roles before it.
#[derive(
    Enum,
    sqlx::Type,
    serde::Serialize,
    serde::Deserialize,
    clap::ValueEnum,
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Queries and subscriptions.
    Reader,
    /// Also what a notification delivery worker does: claim due notifications and report how
    /// each went (`claimNotifications`, `markNotificationSent`, `markNotificationDelivered`,
    /// `markNotificationFailed`), and nothing that records or changes an investigation.
    Notifier,
    /// Also what a person does from a dashboard: open chats and post to their own, request a
    /// session's cancellation.
    Operator,
    /// Also every mutation an orchestrator or agent uses to record its work.
    Writer,
    /// Everything: also deleting and restoring sessions and managing API tokens.
    Admin,
}

/// What a session status history entry records.
#[derive(
    Enum, sqlx::Type, serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash,
)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum SessionChangeAction {
    /// The session was created.
    Created,
    /// Its status changed.
    StatusChanged,
    /// It was soft-deleted (its status stays).
    Deleted,
    /// It was restored after a delete.
    Restored,
}

/// Who or what started a purge.
#[derive(Enum, sqlx::Type, serde::Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum PurgeTrigger {
    /// `casefile purge --execute`.
    Command,
    /// The server's retention schedule (`--retention-…`).
    Schedule,
}

/// How a purge ended, or that it is still running (or was cut off: its process died).
#[derive(Enum, sqlx::Type, serde::Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum PurgeStatus {
    /// Still deleting. (One whose process died is marked `FAILED` by the next purge, an hour
    /// after its last progress.)
    Running,
    /// Everything its policy selected (and no other process held) is gone.
    Completed,
    /// It stopped on an error, or was stopped; `errorMessage` says why.
    Failed,
}

/// Lifecycle of a stage; aggregated from its agent executions.
#[derive(
    Enum, sqlx::Type, serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash,
)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum StageStatus {
    /// No agent has started yet.
    Pending,
    /// At least one agent is pending or active.
    Active,
    /// Succeeded under its success policy.
    Completed,
    /// Did not succeed under its success policy; see `errorMessage`.
    Failed,
    /// Every agent timed out.
    TimedOut,
    /// Every agent was cancelled.
    Cancelled,
}

/// Lifecycle of one agent execution.
#[derive(
    Enum, sqlx::Type, serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash,
)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum ExecutionStatus {
    /// Not yet started.
    Pending,
    /// Running.
    Active,
    /// Finished successfully.
    Completed,
    /// Failed; see `errorMessage`.
    Failed,
    /// Exceeded its time limit.
    TimedOut,
    /// Cancelled.
    Cancelled,
}

/// Where an agent stands in its tree (seed 004's `agent_type`).
#[derive(
    Enum, sqlx::Type, serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash,
)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum AgentType {
    /// The root of a tree: it dispatches teams; it has no team.
    GlobalSupervisor,
    /// Leads a team: it dispatches the team's workers.
    TeamSupervisor,
    /// Does the work of a team.
    Worker,
}

/// How the agents of a multi-agent stage relate.
#[derive(
    Enum, sqlx::Type, serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash,
)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum ParallelType {
    /// Different agents investigate different aspects in parallel.
    MultiAgent,
    /// Several replicas of the same agent run in parallel.
    Replica,
}

/// When a multi-agent stage counts as completed.
#[derive(
    Enum, sqlx::Type, serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash,
)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum SuccessPolicy {
    /// Every agent must complete.
    All,
    /// One completed agent is enough.
    Any,
}

/// What a timeline event shows.
#[derive(
    Enum, sqlx::Type, serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash,
)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum TimelineEventType {
    /// The model's reasoning ("thinking").
    LlmThinking,
    /// Text the model answered with.
    LlmResponse,
    /// The model asked for a tool call.
    LlmToolCall,
    /// An MCP tool was called.
    McpToolCall,
    /// A summary of a (long) MCP tool result.
    McpToolSummary,
    /// A person's question in a follow-up chat.
    UserQuestion,
    /// The short summary of the whole investigation.
    ExecutiveSummary,
    /// The final analysis of an agent or of the session.
    FinalAnalysis,
    /// A warning the orchestrator recorded (an MCP server unavailable, a fallback model used);
    /// `metadata.code` says which.
    SystemWarning,
    /// An error the orchestrator recorded; `metadata.code` says which.
    SystemError,
}

impl TimelineEventType {
    /// Every type, in declaration order.
    pub const ALL: [TimelineEventType; 10] = [
        Self::LlmThinking,
        Self::LlmResponse,
        Self::LlmToolCall,
        Self::McpToolCall,
        Self::McpToolSummary,
        Self::UserQuestion,
        Self::ExecutiveSummary,
        Self::FinalAnalysis,
        Self::SystemWarning,
        Self::SystemError,
    ];
}

/// Lifecycle of a timeline event: created streaming, immutable once finished.
#[derive(
    Enum, sqlx::Type, serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash,
)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum TimelineEventStatus {
    /// Content is still being appended.
    Streaming,
    /// Finished with its final content.
    Completed,
    /// The step it shows failed.
    Failed,
    /// The step it shows was cancelled.
    Cancelled,
    /// The step it shows timed out.
    TimedOut,
}

/// A record's status after a change and before it (`None` when the change created it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition<S> {
    pub to: S,
    pub from: Option<S>,
}

/// The status a session event records, typed by the record whose status it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Session(Transition<SessionStatus>),
    Stage(Transition<StageStatus>),
    Execution(Transition<ExecutionStatus>),
    /// A timeline event's status as it was created or finished (it keeps no previous one).
    Event(TimelineEventStatus),
    Notification(Transition<NotificationStatus>),
}

/// Who speaks in an LLM conversation message.
#[derive(
    Enum, sqlx::Type, serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash,
)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum MessageRole {
    /// Instructions that frame the conversation.
    System,
    /// Input given to the model.
    User,
    /// The model's reply (may request tool calls).
    Assistant,
    /// The result of a tool call, answering `toolCallId`.
    Tool,
}

/// Why an LLM was called.
#[derive(
    Enum, sqlx::Type, serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash,
)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
#[graphql(name = "LLMInteractionType")]
pub enum LlmInteractionType {
    /// One iteration of an agent's reasoning loop.
    Iteration,
    /// The call that produced a final analysis.
    FinalAnalysis,
    /// The call that produced the executive summary.
    ExecutiveSummary,
    /// An answer in a follow-up chat.
    ChatResponse,
}

/// What an MCP interaction did.
#[derive(
    Enum, sqlx::Type, serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash,
)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
#[graphql(name = "MCPInteractionType")]
pub enum McpInteractionType {
    /// A tool was called.
    ToolCall,
    /// The server's tools were listed.
    ToolList,
}

/// Where an LLM interaction's cost comes from.
#[derive(
    Enum, sqlx::Type, serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash,
)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum CostSource {
    /// Computed by casefile from the price list's price for the model (and the execution's
    /// provider) in effect at the interaction's time: split into input and output, with the
    /// `pricingSnapshot` used.
    PriceList,
    /// Sent by the client, kept as sent: a total that cannot be split into input and output.
    /// Every cost recorded before casefile had prices is one.
    Client,
    /// The model had no price in effect at the interaction's time (for the execution's
    /// provider, nor for any provider), and the client sent no cost: it has no cost.
    NoPrice,
    /// No token counts and no cost were recorded: there was nothing to price.
    NoTokens,
    /// Recorded before casefile had prices, with token counts and no cost: never priced (a
    /// stored interaction is never priced afterwards).
    NotPriced,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_names_round_trip() {
        assert_eq!(db_name(SessionStatus::InProgress), "in_progress");
        assert_eq!(db_name(ExecutionStatus::TimedOut), "timed_out");
        assert_eq!(
            from_db_name::<SessionStatus>("cancelling"),
            Some(SessionStatus::Cancelling)
        );
        assert_eq!(from_db_name::<SessionStatus>("exploded"), None);
    }
}

/// Where a notification goes (seed 000, Q5.1).
#[derive(
    Enum, sqlx::Type, serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash,
)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum NotificationType {
    /// A Slack message (`destination`: the channel).
    Slack,
    /// An email (`destination`: the address).
    Email,
    /// A PagerDuty event (`destination`: the service's routing key).
    Pagerduty,
    /// An HTTP POST (`destination`: the URL).
    Webhook,
    /// A Microsoft Teams message (`destination`: the channel or webhook).
    Msteams,
}

/// Where a notification's delivery stands (seed 000, Q5.4).
#[derive(
    Enum, sqlx::Type, serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash,
)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum NotificationStatus {
    /// Waiting to be claimed (again, after a failed attempt, once its backoff ends).
    Pending,
    /// Claimed by a delivery worker, until its lease runs out.
    Sending,
    /// Handed to the destination.
    Sent,
    /// The destination confirmed it.
    Delivered,
    /// Given up on: its last attempt failed.
    Failed,
}
