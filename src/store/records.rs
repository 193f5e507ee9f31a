//! Rows as stored: one struct per table.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde_json::Value as Json;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::sync::Arc;

use sqlx::postgres::PgRow;
use sqlx::{FromRow, Row as _};
use uuid::Uuid;

use crate::model::*;
use crate::pricing::PricingSnapshot;

/// JSON kept as the database sent it: checked, but not built into a tree unless a client asks
/// for it (most reads of a row do not).
pub type RawJson = sqlx::types::Json<Box<RawValue>>;

/// `value` as kept in a row.
pub fn raw_json(value: &Json) -> RawJson {
    sqlx::types::Json(serde_json::value::to_raw_value(value).expect("a JSON value serializes"))
}

/// A table whose rows are addressed by a uuid `id`.
pub trait Record:
    for<'r> FromRow<'r, sqlx::postgres::PgRow> + Clone + Send + Sync + Unpin + 'static
{
    /// The table (or view) its rows are in; statements read them from [`Record::source`].
    const TABLE: &'static str;
    /// What one row is called in messages.
    const NAME: &'static str;
    /// The columns read: every one, but for tables whose large columns are read apart, only
    /// when a query asks for them.
    const COLUMNS: &'static str;
    /// Large columns a page of these records reads only when a key of its statement asks
    /// for them ([`super::Payloads`]): an LLM call's request's, then the rest.
    const PAYLOADS: [&'static [&'static str]; 2] = [&[], &[]];
    /// What a statement reads its rows from: those of the session `session` (an expression of
    /// the statement: `$1`, `k.session_id`), or of any session (`None`). The table, unless its
    /// rows are read through more (a streaming timeline event's text so far).
    fn source(session: Option<&str>) -> Cow<'static, str> {
        let _ = session;
        Cow::Borrowed(Self::TABLE)
    }
    fn id(&self) -> Uuid;
    /// The session it belongs to; none for a chain version, which belongs to every session
    /// that ran it.
    fn session(&self) -> Option<Uuid>;
}

/// A record's key on a distributed database: its id within its session (ids are unique per
/// session; `session_id` is the column the tables are sharded by, docs/scale-out.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub session: Uuid,
    pub id: Uuid,
}

impl Key {
    pub fn new(session: Uuid, id: Uuid) -> Self {
        Key { session, id }
    }
}

/// A record of a table sharded by session (every table of records but `sessions` itself): it
/// is found by its [`Key`], which names the session.
pub trait InSession: Record {
    fn session_id(&self) -> Uuid;
    fn key(&self) -> Key {
        Key::new(self.session_id(), self.id())
    }
}

macro_rules! record {
    ($row:ty, $table:literal, $name:literal) => {
        record!($row, $table, $name, "*");
    };
    ($row:ty, $table:literal, $name:literal, source $source:path) => {
        record!(@impl $row, $table, $name, "*", $source);
    };
    ($row:ty, $table:literal, $name:literal, $columns:expr) => {
        record!(@impl $row, $table, $name, $columns,);
    };
    (@impl $row:ty, $table:literal, $name:literal, $columns:expr, $($source:path)?) => {
        impl Record for $row {
            const TABLE: &'static str = $table;
            const NAME: &'static str = $name;
            const COLUMNS: &'static str = $columns;
            $(
                fn source(session: Option<&str>) -> Cow<'static, str> {
                    Cow::Owned($source(session))
                }
            )?
            fn id(&self) -> Uuid {
                self.id
            }
            fn session(&self) -> Option<Uuid> {
                Some(self.session_id)
            }
        }
        impl InSession for $row {
            fn session_id(&self) -> Uuid {
                self.session_id
            }
        }
    };
}

/// The columns of a session row: all but its search document, which only searches read (and
/// which can be large).
macro_rules! session_columns {
    () => {
        "id, alert_type, alert_data, status, chain_id, author, runbook_url, final_analysis, \
         executive_summary, error_message, started_at, completed_at, created_at, updated_at, \
         deleted_at, duration_ms, created_by, chain_version, chain_overrides"
    };
}
pub(crate) use session_columns;
pub const SESSION_COLUMNS: &str = session_columns!();

/// The columns of a timeline event row, likewise without its search document.
macro_rules! timeline_event_columns {
    () => {
        "id, session_id, stage_id, execution_id, sequence_number, event_type, status, content, \
         metadata, llm_interaction_id, mcp_interaction_id, created_at, updated_at"
    };
}
pub(crate) use timeline_event_columns;

#[derive(Debug, Clone, FromRow, serde::Serialize, serde::Deserialize)]
pub struct SessionRow {
    pub id: Uuid,
    pub alert_type: String,
    pub alert_data: RawJson,
    pub status: SessionStatus,
    pub chain_id: String,
    pub author: Option<String>,
    pub runbook_url: Option<String>,
    pub final_analysis: Option<String>,
    pub executive_summary: Option<String>,
    pub error_message: Option<String>,
    pub started_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub deleted_at: Option<DateTime<Utc>>,
    pub duration_ms: Option<i64>,
    pub created_by: Option<String>,
    /// The registered version of the chain `chain_id` names (null: a name only).
    pub chain_version: Option<String>,
    /// What this session changed of its chain version's settings, as the client sent it.
    pub chain_overrides: Option<RawJson>,
}

impl SessionRow {
    /// The registered chain version it ran, if it names one.
    pub fn chain(&self) -> Option<ChainKey> {
        self.chain_version.as_ref().map(|version| ChainKey {
            name: self.chain_id.clone(),
            version: version.clone(),
        })
    }
}

impl Record for SessionRow {
    const TABLE: &'static str = "sessions";
    const NAME: &'static str = "session";
    const COLUMNS: &'static str = SESSION_COLUMNS;
    fn id(&self) -> Uuid {
        self.id
    }
    fn session(&self) -> Option<Uuid> {
        Some(self.id)
    }
}

/// A registered chain version, by its name and version (its natural key: the same in every
/// database, so an imported session names it as its source did).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChainKey {
    pub name: String,
    pub version: String,
}

/// A chain version: its definition, stored once however many sessions ran it, and never
/// changed.
#[derive(Debug, Clone, FromRow, serde::Serialize, serde::Deserialize)]
pub struct ChainRow {
    pub id: Uuid,
    pub name: String,
    pub version: String,
    pub definition: RawJson,
    /// The length of the definition's `stages`.
    pub stage_count: i32,
    pub created_at: DateTime<Utc>,
    pub created_by: Option<String>,
    pub deprecated_at: Option<DateTime<Utc>>,
    pub deprecated_by: Option<String>,
}

impl ChainRow {
    pub fn key(&self) -> ChainKey {
        ChainKey {
            name: self.name.clone(),
            version: self.version.clone(),
        }
    }
}

impl Record for ChainRow {
    const TABLE: &'static str = "chains";
    const NAME: &'static str = "chain";
    const COLUMNS: &'static str = "id, name, version, definition, stage_count, created_at, \
        created_by, deprecated_at, deprecated_by";
    fn id(&self) -> Uuid {
        self.id
    }
    fn session(&self) -> Option<Uuid> {
        None
    }
}

/// One entry of a session's status history.
#[derive(Debug, Clone, FromRow, serde::Serialize, serde::Deserialize)]
pub struct SessionStatusChangeRow {
    pub id: i64,
    pub session_id: Uuid,
    pub action: SessionChangeAction,
    pub from_status: Option<SessionStatus>,
    pub to_status: SessionStatus,
    pub actor: Option<String>,
    pub reason: Option<String>,
    pub changed_at: DateTime<Utc>,
    /// Its place in the feed of every session's changes (1, 2, 3, … in commit order): the
    /// database's to assign, so an export leaves it out.
    #[serde(skip)]
    pub feed_position: i64,
}

#[derive(Debug, Clone, FromRow, serde::Serialize, serde::Deserialize)]
pub struct StageRow {
    pub id: Uuid,
    pub session_id: Uuid,
    pub stage_name: String,
    pub stage_index: i32,
    pub expected_agent_count: i32,
    pub parallel_type: Option<ParallelType>,
    pub success_policy: Option<SuccessPolicy>,
    pub status: StageStatus,
    pub started_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub duration_ms: Option<i64>,
    pub error_message: Option<String>,
    pub chat_id: Option<Uuid>,
    pub chat_user_message_id: Option<Uuid>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}
record!(StageRow, "stages", "stage");

#[derive(Debug, Clone, FromRow, serde::Serialize, serde::Deserialize)]
pub struct ExecutionRow {
    pub id: Uuid,
    pub stage_id: Uuid,
    pub session_id: Uuid,
    pub parent_execution_id: Option<Uuid>,
    pub agent_name: String,
    pub agent_index: i32,
    pub status: ExecutionStatus,
    pub started_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub duration_ms: Option<i64>,
    pub error_message: Option<String>,
    pub iteration_strategy: String,
    pub llm_provider: Option<String>,
    pub llm_model: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub agent_type: AgentType,
    pub team_name: Option<String>,
    /// The task it was given (seed 003's `inherited_context`).
    pub task: Option<String>,
    /// What it returned to its parent (seed 003's `result_summary`).
    pub result_summary: Option<String>,
    /// 0 for a root; at most 10.
    pub depth: i32,
}
record!(ExecutionRow, "agent_executions", "agent execution");

#[derive(Debug, Clone, FromRow, serde::Serialize, serde::Deserialize)]
pub struct TimelineEventRow {
    pub id: Uuid,
    pub session_id: Uuid,
    pub stage_id: Uuid,
    pub execution_id: Uuid,
    pub sequence_number: i64,
    pub event_type: TimelineEventType,
    pub status: TimelineEventStatus,
    pub content: String,
    pub metadata: RawJson,
    pub llm_interaction_id: Option<Uuid>,
    pub mcp_interaction_id: Option<Uuid>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}
// Read live, so that a streaming event shows everything appended so far.
record!(
    TimelineEventRow,
    "timeline_events",
    "timeline event",
    source super::live_timeline::live_timeline
);

#[derive(Debug, Clone, FromRow, serde::Serialize, serde::Deserialize)]
pub struct MessageRow {
    pub id: Uuid,
    pub session_id: Uuid,
    pub stage_id: Uuid,
    pub execution_id: Uuid,
    pub sequence_number: i32,
    pub role: MessageRole,
    pub content: String,
    pub tool_call_id: Option<String>,
    pub tool_name: Option<String>,
    pub tool_calls: Option<RawJson>,
    pub created_at: DateTime<Utc>,
}
record!(MessageRow, "messages", "message");

/// A message as an LLM call sent it: the message, and its place in what was sent (1, 2, …),
/// which is its sequence number when the call sent the conversation up to its last message.
#[derive(Debug, Clone)]
pub struct SentMessageRow {
    pub message: Arc<MessageRow>,
    pub position: i32,
}

impl<'r> FromRow<'r, PgRow> for SentMessageRow {
    fn from_row(row: &'r PgRow) -> sqlx::Result<Self> {
        Ok(SentMessageRow {
            message: Arc::new(MessageRow::from_row(row)?),
            position: row.try_get("position")?,
        })
    }
}

impl Record for SentMessageRow {
    /// Exactly the messages each LLM call sent, named by the call (`interaction_id`), in the
    /// order sent (`position`): its execution's conversation up to its last message (see
    /// `migrations/0012_llm_conversations.sql`), or the selection it recorded
    /// (`sent_message_ids`, migration 0101). Every join names the session (the view 0012 made
    /// joins by id alone, which on a distributed database joins across shards). The last
    /// message's place is a subquery so that it bounds the index scan of the conversation, read
    /// once per call (as a join, the generic plan looked it up again for every message).
    const TABLE: &'static str = "(SELECT m.*, m.sequence_number AS position, li.id AS interaction_id \
            FROM llm_interactions li \
            JOIN messages m ON m.execution_id = li.execution_id AND m.session_id = li.session_id \
                           AND m.sequence_number <= (SELECT last.sequence_number FROM messages last \
                               WHERE last.id = li.last_message_id AND last.session_id = li.session_id) \
            WHERE li.sent_message_ids IS NULL \
        UNION ALL \
        SELECT m.*, s.position::integer, li.id \
            FROM llm_interactions li \
            CROSS JOIN LATERAL unnest(li.sent_message_ids) WITH ORDINALITY AS s(id, position) \
            JOIN messages m ON m.id = s.id AND m.session_id = li.session_id)";
    const NAME: &'static str = "message";
    const COLUMNS: &'static str = "*";
    fn id(&self) -> Uuid {
        self.message.id
    }
    fn session(&self) -> Option<Uuid> {
        Some(self.message.session_id)
    }
}

/// A tool call an assistant message requested, by the id the model gave it (see
/// `migrations/0013_tool_call_links.sql`).
#[derive(Debug, Clone, FromRow)]
pub struct ToolCallRow {
    pub execution_id: Uuid,
    pub call_id: String,
    pub session_id: Uuid,
    pub message_id: Uuid,
    pub position: i32,
}

/// An LLM interaction without its payloads (tens of KB each): [`LlmRequestRow`] holds the
/// request (the prompt, the largest), [`LlmPayloadRow`] the rest.
#[derive(Debug, Clone, FromRow, serde::Serialize, serde::Deserialize)]
pub struct LlmInteractionRow {
    pub id: Uuid,
    pub session_id: Uuid,
    pub stage_id: Uuid,
    pub execution_id: Uuid,
    pub interaction_type: LlmInteractionType,
    pub model_name: String,
    pub last_message_id: Option<Uuid>,
    pub input_tokens: Option<i32>,
    pub output_tokens: Option<i32>,
    pub total_tokens: Option<i32>,
    pub thinking_tokens: Option<i32>,
    /// The total cost in US dollars: computed (the sum of the two parts below) or the client's.
    pub estimated_cost_usd: Option<Decimal>,
    pub duration_ms: Option<i64>,
    pub error_message: Option<String>,
    pub created_at: DateTime<Utc>,
    /// Part of `input_tokens`.
    pub cached_input_tokens: Option<i32>,
    /// The parts of a computed cost (`None` for any other).
    pub input_cost_usd: Option<Decimal>,
    pub output_cost_usd: Option<Decimal>,
    /// `None` for interactions recorded before prices existed (migration 0071): see
    /// [`LlmInteractionRow::cost_source`].
    pub cost_source: Option<CostSource>,
    /// The price a computed cost used.
    pub pricing_snapshot: Option<sqlx::types::Json<PricingSnapshot>>,
    /// The messages sent, in order, when they were not the conversation up to
    /// `last_message_id` (migration 0101); absent from documents exported before it.
    #[serde(default)]
    pub sent_message_ids: Option<Vec<Uuid>>,
}
/// The columns of [`LlmInteractionRow`].
macro_rules! llm_interaction_columns {
    () => {
        "id, session_id, stage_id, execution_id, interaction_type, model_name, last_message_id, \
         input_tokens, output_tokens, total_tokens, thinking_tokens, estimated_cost_usd, \
         duration_ms, error_message, created_at, cached_input_tokens, input_cost_usd, \
         output_cost_usd, cost_source, pricing_snapshot, sent_message_ids"
    };
}
record!(
    LlmInteractionRow,
    "llm_interactions",
    "LLM interaction",
    llm_interaction_columns!()
);

impl LlmInteractionRow {
    /// Where its cost comes from; for an interaction recorded before prices existed, what its
    /// columns say: a cost was the client's, and counts without one were never priced.
    pub fn cost_source(&self) -> CostSource {
        self.cost_source.unwrap_or(match self.estimated_cost_usd {
            Some(_) => CostSource::Client,
            None if self.input_tokens.is_none() && self.output_tokens.is_none() => {
                CostSource::NoTokens
            }
            None => CostSource::NotPriced,
        })
    }
}

/// The request of an LLM interaction: read only for a query that asks for it.
#[derive(Debug, Clone, FromRow)]
pub struct LlmRequestRow {
    pub id: Uuid,
    pub session_id: Uuid,
    pub llm_request: Json,
}
record!(
    LlmRequestRow,
    "llm_interactions",
    "LLM interaction",
    "id, session_id, llm_request"
);

/// The response side of an LLM interaction: read only for a query that asks for part of it.
#[derive(Debug, Clone, FromRow)]
pub struct LlmPayloadRow {
    pub id: Uuid,
    pub session_id: Uuid,
    pub llm_response: Json,
    pub thinking_content: Option<String>,
    pub response_metadata: Json,
}
record!(
    LlmPayloadRow,
    "llm_interactions",
    "LLM interaction",
    "id, session_id, llm_response, thinking_content, response_metadata"
);

/// An MCP interaction without its payloads, which [`McpPayloadRow`] holds.
#[derive(Debug, Clone, FromRow, serde::Serialize, serde::Deserialize)]
pub struct McpInteractionRow {
    pub id: Uuid,
    pub session_id: Uuid,
    pub stage_id: Uuid,
    pub execution_id: Uuid,
    pub interaction_type: McpInteractionType,
    pub server_name: String,
    pub tool_name: Option<String>,
    pub duration_ms: Option<i64>,
    pub error_message: Option<String>,
    pub created_at: DateTime<Utc>,
    pub tool_call_id: Option<String>,
    /// Which attempt at its tool call it was, from 1 (1 when it executes no requested call).
    pub attempt: i32,
}
/// The columns of [`McpInteractionRow`].
macro_rules! mcp_interaction_columns {
    () => {
        "id, session_id, stage_id, execution_id, interaction_type, server_name, tool_name, \
         duration_ms, error_message, created_at, tool_call_id, attempt"
    };
}
record!(
    McpInteractionRow,
    "mcp_interactions",
    "MCP interaction",
    mcp_interaction_columns!()
);

/// The arguments, result and tool list of an MCP interaction: read only when asked for.
#[derive(Debug, Clone, FromRow, serde::Serialize, serde::Deserialize)]
pub struct McpPayloadRow {
    pub id: Uuid,
    pub session_id: Uuid,
    pub tool_arguments: Json,
    pub tool_result: Json,
    pub available_tools: Json,
}
record!(
    McpPayloadRow,
    "mcp_interactions",
    "MCP interaction",
    "id, session_id, tool_arguments, tool_result, available_tools"
);

/// An LLM interaction as a page of them reads it: with the payloads the query selects, read by
/// the same statement (a payload no key asks for is not a column of it).
#[derive(Debug, Clone)]
pub struct LlmInteractionInPage {
    pub interaction: Arc<LlmInteractionRow>,
    pub request: Option<Arc<LlmRequestRow>>,
    pub payload: Option<Arc<LlmPayloadRow>>,
}

/// A column a statement may leave out, or read as null for some rows: `None` either way.
fn read_if_there<'r, T>(row: &'r PgRow, column: &str) -> sqlx::Result<Option<T>>
where
    T: sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    match row.try_get(column) {
        Err(sqlx::Error::ColumnNotFound(_)) => Ok(None),
        read => read,
    }
}

impl FromRow<'_, PgRow> for LlmInteractionInPage {
    fn from_row(row: &PgRow) -> sqlx::Result<Self> {
        let interaction = LlmInteractionRow::from_row(row)?;
        let (id, session_id) = (interaction.id, interaction.session_id);
        // The payloads are NOT NULL: null is "not asked for".
        let request = read_if_there(row, "llm_request")?.map(|llm_request| {
            Arc::new(LlmRequestRow {
                id,
                session_id,
                llm_request,
            })
        });
        let payload = match read_if_there(row, "llm_response")? {
            Some(llm_response) => Some(Arc::new(LlmPayloadRow {
                id,
                session_id,
                llm_response,
                thinking_content: row.try_get("thinking_content")?,
                response_metadata: row.try_get("response_metadata")?,
            })),
            None => None,
        };
        Ok(LlmInteractionInPage {
            interaction: Arc::new(interaction),
            request,
            payload,
        })
    }
}

impl Record for LlmInteractionInPage {
    const TABLE: &'static str = "llm_interactions";
    const NAME: &'static str = "LLM interaction";
    const COLUMNS: &'static str = llm_interaction_columns!();
    const PAYLOADS: [&'static [&'static str]; 2] = [
        &["llm_request"],
        &["llm_response", "thinking_content", "response_metadata"],
    ];
    fn id(&self) -> Uuid {
        self.interaction.id
    }
    fn session(&self) -> Option<Uuid> {
        Some(self.interaction.session_id)
    }
}

/// An MCP interaction as a page of them reads it: with its payloads when the query selects
/// them (see [`LlmInteractionInPage`]).
#[derive(Debug, Clone)]
pub struct McpInteractionInPage {
    pub interaction: Arc<McpInteractionRow>,
    pub payload: Option<Arc<McpPayloadRow>>,
}

impl FromRow<'_, PgRow> for McpInteractionInPage {
    fn from_row(row: &PgRow) -> sqlx::Result<Self> {
        let interaction = McpInteractionRow::from_row(row)?;
        let payload = match read_if_there(row, "tool_arguments")? {
            Some(tool_arguments) => Some(Arc::new(McpPayloadRow {
                id: interaction.id,
                session_id: interaction.session_id,
                tool_arguments,
                tool_result: row.try_get("tool_result")?,
                available_tools: row.try_get("available_tools")?,
            })),
            None => None,
        };
        Ok(McpInteractionInPage {
            interaction: Arc::new(interaction),
            payload,
        })
    }
}

impl Record for McpInteractionInPage {
    const TABLE: &'static str = "mcp_interactions";
    const NAME: &'static str = "MCP interaction";
    const COLUMNS: &'static str = mcp_interaction_columns!();
    const PAYLOADS: [&'static [&'static str]; 2] =
        [&[], &["tool_arguments", "tool_result", "available_tools"]];
    fn id(&self) -> Uuid {
        self.interaction.id
    }
    fn session(&self) -> Option<Uuid> {
        Some(self.interaction.session_id)
    }
}

#[derive(Debug, Clone, FromRow, serde::Serialize, serde::Deserialize)]
pub struct ChatRow {
    pub id: Uuid,
    pub session_id: Uuid,
    pub created_by: Option<String>,
    /// 1–200 characters, set and changed by its owner.
    pub title: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// When its owner or an admin deleted it (hidden from lists unless asked for); absent in
    /// exports made before chats could be deleted, which read as not deleted.
    pub deleted_at: Option<DateTime<Utc>>,
    /// Who deleted it (null under `--auth none`, and once it is restored).
    pub deleted_by: Option<String>,
}
record!(ChatRow, "chats", "chat");

#[derive(Debug, Clone, FromRow, serde::Serialize, serde::Deserialize)]
pub struct ChatUserMessageRow {
    pub id: Uuid,
    pub chat_id: Uuid,
    pub session_id: Uuid,
    pub content: String,
    pub author: Option<String>,
    pub created_at: DateTime<Utc>,
    pub created_by: Option<String>,
}
record!(ChatUserMessageRow, "chat_user_messages", "chat message");

/// Token and cost totals of a set of LLM interactions.
#[derive(Debug, Clone, Default, FromRow)]
pub struct TokenUsageRow {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub total_tokens: i64,
    pub thinking_tokens: i64,
    pub cached_input_tokens: i64,
    /// Every cost, computed or the client's.
    pub estimated_cost_usd: Decimal,
    /// The parts of the computed costs.
    pub input_cost_usd: Decimal,
    pub output_cost_usd: Decimal,
    pub interaction_count: i64,
    /// Interactions whose model had no price (`CostSource::NoPrice`).
    pub unpriced_count: i64,
}

/// How much a session holds.
#[derive(Debug, Clone, Default, FromRow)]
pub struct SessionCountsRow {
    pub stage_count: i64,
    pub execution_count: i64,
    pub timeline_event_count: i64,
    pub message_count: i64,
    pub llm_interaction_count: i64,
    pub mcp_interaction_count: i64,
}

/// A notification of a session, and where its delivery stands.
#[derive(Debug, Clone, FromRow, serde::Serialize, serde::Deserialize)]
pub struct NotificationRow {
    pub session_id: Uuid,
    pub id: Uuid,
    #[sqlx(rename = "type")]
    pub notification_type: NotificationType,
    pub destination: String,
    pub status: NotificationStatus,
    pub integration_data: RawJson,
    pub attempts: i32,
    pub max_attempts: i32,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub claim_id: Option<Uuid>,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub sent_at: Option<DateTime<Utc>>,
    pub delivered_at: Option<DateTime<Utc>>,
    pub failed_at: Option<DateTime<Utc>>,
    /// The chat question whose answer it is about.
    pub chat_question_id: Option<Uuid>,
}
record!(NotificationRow, "notifications", "notification");
