//! The write side: every change an orchestrator and its agents record.
//!
//! Each function takes the connection of an open transaction, so a mutation (or a whole batch
//! of them) commits or rolls back as one. Locks are taken in one order — sessions (by id), then
//! event streams (by key) — so concurrent writers queue instead of deadlocking; stage,
//! execution and event rows are locked only under their session's lock. Appends to a streaming
//! event lock only its stream. A batch takes its sessions and streams up front
//! ([`locks::LockPlan`]).
//!
//! [`restore`] writes finished history whole (the demo's sessions, an imported session),
//! checked by the same functions, and `lifecycle` holds how a session's and its executions'
//! statuses move together.

pub mod append_groups;
pub mod chains;
pub mod chats;
pub mod executions;
pub(crate) mod feed;
pub mod interactions;
mod lifecycle;
pub mod locks;
pub mod messages;
pub mod notifications;
mod receipts;
pub mod restore;
pub mod sessions;
pub mod stages;
pub mod timeline;

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde_json::Value as Json;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{ExecutionRow, InSession, Record as _, SessionRow, StageRow};
use crate::error::refusals::of_its_table;
use crate::error::sqlstate::DbFailure;
use crate::error::{Error, Result};
pub(crate) use crate::model::db_name as snake;
use crate::model::{ExecutionStatus, SessionStatus, StageStatus};
use crate::store::traced::traced;

/// Size limits, stated in the schema's descriptions too. Where a column has a CHECK, the limit
/// is the column's (migrations 0001 and 0005), so the database never refuses what the API let in.
pub mod limits {
    /// Names, types, models, servers, tools, authors: characters.
    pub const NAME: usize = 200;
    /// An agent's iteration strategy: characters (`agent_executions.iteration_strategy`).
    pub const STRATEGY: usize = 100;
    /// URLs: characters.
    pub const URL: usize = 2_000;
    /// Any text field (content, analyses, error messages, thinking): characters.
    pub const TEXT: usize = 1_000_000;
    /// One appended chunk of streaming content: characters.
    pub const DELTA: usize = 65_536;
    /// Alert data and event metadata: bytes of JSON.
    pub const SMALL_JSON: usize = 262_144;
    /// LLM requests and responses, tool arguments and results: bytes of JSON.
    pub const JSON: usize = 4_194_304;
    /// A chat question: characters.
    pub const CHAT_MESSAGE: usize = 5_000;
    /// A chat's title: characters (seed 002).
    pub const CHAT_TITLE: usize = 200;
    /// A reason given for a status change, delete or restore: characters.
    pub const REASON: usize = 2_000;
    /// A chain version's name: characters (`chains.version`).
    pub const CHAIN_VERSION: usize = 100;
    /// A chain version's definition: bytes of JSON (compact). Chain definitions are a few KB
    /// (seed 000, Q4.3); this leaves room for ten times that.
    pub const CHAIN_DEFINITION: usize = 65_536;
    /// A session's overrides of its chain version's settings: bytes of JSON (compact).
    pub const CHAIN_OVERRIDES: usize = 16_384;
    /// Messages an LLM call names as sent (`sentMessageIds`).
    pub const SENT_MESSAGES: usize = 10_000;
    /// Operations in one batched ingest.
    pub const BATCH: usize = 1_000;
    /// The cost of one LLM call a client sends, in US dollars (a computed one is at most twice
    /// 2^31 tokens at the highest price: 4.3 × 10^9): far below what `numeric(20, 10)` holds.
    pub const COST_USD: i64 = 1_000_000_000;
}

/// PostgreSQL stores no NUL character in `text` (nor in `jsonb` strings).
const NUL: char = '\0';

pub(crate) fn check_text(field: &str, value: &str, max: usize) -> Result<()> {
    if value.contains(NUL) {
        return Err(Error::bad_input(format!(
            "`{field}` contains a NUL character (\\u0000), which cannot be stored"
        )));
    }
    let len = value.chars().count();
    if len > max {
        return Err(Error::bad_input(format!(
            "`{field}` is {len} characters long; at most {max} are allowed"
        )));
    }
    Ok(())
}

/// A text that must not be blank, of at most `max` characters.
pub(crate) fn check_required(field: &str, value: &str, max: usize) -> Result<()> {
    if value.trim().is_empty() {
        return Err(Error::bad_input(format!("`{field}` must not be empty")));
    }
    check_text(field, value, max)
}

pub(crate) fn check_name(field: &str, value: &str) -> Result<()> {
    check_required(field, value, limits::NAME)
}

/// Whether `text` is 1 to `max` ASCII letters, digits and `extra` characters, starting with a
/// letter or digit (token names, chain versions).
pub(crate) fn is_plain_name(text: &str, max: usize, extra: &[char]) -> bool {
    text.len() <= max
        && text.starts_with(|c: char| c.is_ascii_alphanumeric())
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || extra.contains(&c))
}

/// An amount of US dollars from 0 to `max`, `unit` naming what it is per (`""`: a whole cost).
pub(crate) fn check_amount(field: &str, value: Decimal, max: i64, unit: &str) -> Result<()> {
    if value.is_sign_negative() && !value.is_zero() || value > Decimal::from(max) {
        return Err(Error::bad_input(format!(
            "`{field}` must be between 0 and {max}{unit}, got {value}"
        )));
    }
    Ok(())
}

pub(crate) fn check_optional(field: &str, value: Option<&str>, max: usize) -> Result<()> {
    value.map_or(Ok(()), |v| check_text(field, v, max))
}

pub(crate) fn check_json(field: &str, value: &Json, max: usize) -> Result<()> {
    let len = serde_json::to_vec(value).map_or(usize::MAX, |v| v.len());
    if len > max {
        return Err(Error::bad_input(format!(
            "`{field}` is {len} bytes of JSON; at most {max} are allowed"
        )));
    }
    if has_nul(value) {
        return Err(Error::bad_input(format!(
            "`{field}` contains a NUL character (\\u0000) in a string or key, which cannot be stored"
        )));
    }
    Ok(())
}

/// The earliest instant PostgreSQL's `timestamptz` holds (4714-11-24 BC, Julian day 0); the
/// latest is beyond what a client can send.
fn earliest_time() -> DateTime<Utc> {
    NaiveDate::from_ymd_opt(-4713, 11, 24)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .expect("a valid date")
        .and_utc()
}

/// Whether PostgreSQL can store (and compare with) this instant.
pub(crate) fn storable_time(value: DateTime<Utc>) -> bool {
    value >= earliest_time()
}

pub(crate) fn check_time(field: &str, value: DateTime<Utc>) -> Result<()> {
    if storable_time(value) {
        return Ok(());
    }
    Err(Error::bad_input(format!(
        "`{field}` is {value}; the earliest date allowed is 4714-11-24 BC"
    )))
}

/// Whether a string or key anywhere in `value` holds a NUL (walked without recursion).
fn has_nul(value: &Json) -> bool {
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        match value {
            Json::String(s) if s.contains(NUL) => return true,
            Json::Array(items) => pending.extend(items),
            Json::Object(map) => {
                if map.keys().any(|k| k.contains(NUL)) {
                    return true;
                }
                pending.extend(map.values());
            }
            _ => {}
        }
    }
    false
}

/// A record by its key (id within its session), as it is now (the record a retried create
/// returns).
pub(crate) async fn fetch<R: InSession>(
    conn: &mut PgConnection,
    session_id: Uuid,
    id: Uuid,
) -> Result<R> {
    by_key(conn, session_id, id, "").await
}

/// A record by its key, locked until the transaction ends (tables only, not views).
async fn lock<R: InSession>(conn: &mut PgConnection, session_id: Uuid, id: Uuid) -> Result<R> {
    by_key(conn, session_id, id, "FOR NO KEY UPDATE").await
}

/// A record by its key, read through its record's columns, with `locking` (a locking clause,
/// or "").
async fn by_key<R: InSession>(
    conn: &mut PgConnection,
    session_id: Uuid,
    id: Uuid,
    locking: &str,
) -> Result<R> {
    sqlx::query_as(&format!(
        "SELECT {} FROM {} t WHERE id = $1 AND session_id = $2 {locking}",
        R::COLUMNS,
        R::source(Some("$2"))
    ))
    .bind(id)
    .bind(session_id)
    .fetch_optional(traced(conn))
    .await?
    .ok_or_else(|| Error::not_found(format!("{} {id} does not exist", R::NAME)))
}

/// A session, with `locking` (a locking clause, or "").
async fn session_by_id(conn: &mut PgConnection, id: Uuid, locking: &str) -> Result<SessionRow> {
    sqlx::query_as(&format!(
        "SELECT {} FROM sessions WHERE id = $1 {locking}",
        SessionRow::COLUMNS
    ))
    .bind(id)
    .fetch_optional(traced(conn))
    .await?
    .ok_or_else(|| Error::not_found(format!("session {id} does not exist")))
}

/// A session as it is now.
pub(crate) async fn fetch_session(conn: &mut PgConnection, id: Uuid) -> Result<SessionRow> {
    session_by_id(conn, id, "").await
}

/// Locks a session for a change to it or beneath it.
pub(crate) async fn lock_session(conn: &mut PgConnection, id: Uuid) -> Result<SessionRow> {
    session_by_id(conn, id, "FOR NO KEY UPDATE").await
}

pub(crate) async fn lock_stage(
    conn: &mut PgConnection,
    session_id: Uuid,
    id: Uuid,
) -> Result<StageRow> {
    lock(conn, session_id, id).await
}

pub(crate) async fn lock_execution(
    conn: &mut PgConnection,
    session_id: Uuid,
    id: Uuid,
) -> Result<ExecutionRow> {
    lock(conn, session_id, id).await
}

/// Locks an execution of this session and what is above it, in lock order, for recording
/// work under it. Refuses finished executions and sessions that no longer accept work; a
/// pending execution is started (its first record means it is running).
pub(crate) async fn lock_running_execution(
    conn: &mut PgConnection,
    session_id: Uuid,
    id: Uuid,
    what: &str,
) -> Result<(SessionRow, ExecutionRow)> {
    let session = lock_session(conn, session_id).await?;
    let execution = lock_execution(conn, session_id, id).await?;
    if is_finished_execution(execution.status) {
        return Err(Error::Conflict(format!(
            "cannot add {what}: agent execution {id} is already {}",
            snake(execution.status)
        )));
    }
    if execution.status == ExecutionStatus::Pending {
        let execution = executions::start_locked(conn, &session, execution).await?;
        return Ok((lock_session(conn, session_id).await?, execution));
    }
    Ok((session, execution))
}

pub(crate) fn is_finished_session(status: SessionStatus) -> bool {
    matches!(
        status,
        SessionStatus::Completed
            | SessionStatus::Failed
            | SessionStatus::Cancelled
            | SessionStatus::TimedOut
    )
}

pub(crate) fn is_finished_stage(status: StageStatus) -> bool {
    !matches!(status, StageStatus::Pending | StageStatus::Active)
}

pub(crate) fn is_finished_execution(status: ExecutionStatus) -> bool {
    !matches!(status, ExecutionStatus::Pending | ExecutionStatus::Active)
}

/// Refuses writes to a soft-deleted session.
pub(crate) fn ensure_not_deleted(session: &SessionRow) -> Result<()> {
    if session.deleted_at.is_some() {
        return Err(Error::Conflict(format!(
            "session {} is deleted; restore it first",
            session.id
        )));
    }
    Ok(())
}

/// Maps a violated uniqueness of the id (the primary key, or a key that starts with it) to a
/// conflict on the client-supplied id. Any other violation (a stage index taken by a writer
/// outside casefile, say) is left to the edge, which names its rule.
pub(crate) fn id_taken(err: sqlx::Error, id: Uuid) -> Error {
    match &err {
        sqlx::Error::Database(db)
            if DbFailure::of(&err) == Some(DbFailure::Taken)
                && db.table().zip(db.constraint()).is_some_and(is_id_key) =>
        {
            Error::Conflict(format!("id {id} is already used by another record"))
        }
        _ => Error::Database(err),
    }
}

/// `sessions_pkey`, `stages_id_session_id_key`, …: the keys whose first column is `id` (or a
/// partition's copy of one).
fn is_id_key((table, constraint): (&str, &str)) -> bool {
    of_its_table(constraint)
        .strip_prefix(of_its_table(table))
        .is_some_and(|rest| rest == "_pkey" || rest.starts_with("_id_"))
}

pub(crate) use receipts::{is_retry, refuse_taken_id};

/// How a transaction that names who is making its changes, and why, begins: [`feed::BEGIN`]
/// and the two settings the trigger keeping every session's status history
/// (`session_status_changes`) reads. Sent with the `BEGIN` (no round trip of their own), as
/// `SET LOCAL` statements, which a distributed database passes on to the nodes where that
/// trigger runs (`set_config()`, a function call, it does not; docs/scale-out.md).
pub(crate) fn begin_naming(actor: Option<&str>, reason: Option<&str>) -> Result<String> {
    Ok(format!(
        "{}; SET LOCAL casefile.actor = {}; SET LOCAL casefile.reason = {}",
        feed::BEGIN,
        setting_literal("actor", actor.unwrap_or_default())?,
        setting_literal("reason", reason.unwrap_or_default())?,
    ))
}

/// `value` as a string constant of a statement: the escape form (`E'…'`), whose backslashes
/// escape whatever `standard_conforming_strings` says. A NUL would end the statement's text
/// where it stands, so it is refused.
fn setting_literal(name: &str, value: &str) -> Result<String> {
    check_text(name, value, usize::MAX)?;
    Ok(format!(
        "E'{}'",
        value.replace('\\', "\\\\").replace('\'', "''")
    ))
}
