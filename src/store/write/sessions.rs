//! Sessions: created from an alert, then moved through their lifecycle.
//!
//! The session rule (also in the schema's descriptions): a session is created `pending`; it
//! becomes `in_progress` when started, or implicitly when its first agent execution starts; it
//! ends `completed` (explicitly, once no execution is running), `failed` or `timed_out`
//! (explicitly; executions still running end with it). A cancellation request cancels pending
//! executions at once and makes the session `cancelling` while any execution is still active,
//! `cancelled` as soon as none is. Repeating a move to the state a session is already in is a
//! harmless retry; every other move out of a final state is a conflict.

use chrono::Utc;
use serde::Serialize;
use serde_json::Value as Json;
use sqlx::PgConnection;
use uuid::Uuid;

use super::chains;
use super::feed::status_may_have_changed;
use super::lifecycle::{finish_locked, running_executions, set_session_status};
use super::locks::lock_streams_of;
use super::notifications::{self, NewNotification};
use super::{
    check_json, check_name, check_optional, check_required, ensure_not_deleted, fetch_session,
    id_taken, is_finished_session, is_retry, limits, lock_session, snake,
};
use crate::error::{Error, Result};
use crate::model::{ExecutionStatus, SessionStatus};
use crate::store::audit::{self, Origin};
use crate::store::records::session_columns;
use crate::store::traced::traced;
use crate::store::{ChainKey, SessionRow};

#[derive(Debug, Clone, Serialize)]
pub struct NewSession {
    pub id: Option<Uuid>,
    pub alert_type: String,
    pub alert_data: Json,
    /// The chain's name.
    pub chain_id: String,
    pub author: Option<String>,
    pub runbook_url: Option<String>,
    pub created_by: Option<String>,
    // Left out of the retry hash when absent, so a create sent before chain versions existed
    // hashes as it did then.
    /// The registered version of the chain it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chain_version: Option<String>,
    /// What it changes of the version's settings (only with a version).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chain_overrides: Option<Json>,
}

impl NewSession {
    /// The registered chain version it names, if any.
    pub fn chain(&self) -> Option<ChainKey> {
        self.chain_version.as_ref().map(|version| ChainKey {
            name: self.chain_id.clone(),
            version: version.clone(),
        })
    }

    pub(crate) fn check(&self) -> Result<()> {
        check_name("alertType", &self.alert_type)?;
        match self.chain() {
            Some(key) => chains::check_key("chain.", &key)?,
            None => check_name("chainId", &self.chain_id)?,
        }
        match (&self.chain_overrides, &self.chain_version) {
            (Some(_), None) => {
                return Err(Error::bad_input(
                    "`chainOverrides` change a registered chain version's settings: they need \
                     `chain`",
                ));
            }
            (Some(overrides), Some(_)) => chains::check_overrides(overrides)?,
            (None, _) => {}
        }
        check_optional("author", self.author.as_deref(), limits::NAME)?;
        check_optional("runbookUrl", self.runbook_url.as_deref(), limits::URL)?;
        check_optional("createdBy", self.created_by.as_deref(), limits::NAME)?;
        check_json("alertData", &self.alert_data, limits::SMALL_JSON)
    }
}

pub async fn create(
    conn: &mut PgConnection,
    new: &NewSession,
    origin: &Origin,
) -> Result<SessionRow> {
    new.check()?;
    let id = new.id.unwrap_or_else(Uuid::now_v7);
    if is_retry(conn, new.id, id, ("createSession", "sessions"), new).await? {
        return fetch_session(conn, id).await;
    }
    let row = sqlx::query_as(concat!(
        "INSERT INTO sessions (id, alert_type, alert_data, chain_id, author, runbook_url, \
            created_by, chain_version, chain_overrides) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING ",
        session_columns!()
    ))
    .bind(id)
    .bind(&new.alert_type)
    .bind(&new.alert_data)
    .bind(&new.chain_id)
    .bind(&new.author)
    .bind(&new.runbook_url)
    .bind(&new.created_by)
    .bind(&new.chain_version)
    .bind(&new.chain_overrides)
    .fetch_one(traced(&mut *conn))
    .await
    .map_err(|e| refused_insert(e, id, new.chain()))?;
    status_may_have_changed(conn, id).await?;
    audit::record(conn, origin, &audit::created(&row)).await?;
    Ok(row)
}

/// Records the change from `before` to `after` by `origin`, and gives `after`.
async fn audited(
    conn: &mut PgConnection,
    origin: &Origin,
    before: &SessionRow,
    after: SessionRow,
) -> Result<SessionRow> {
    audit::record(conn, origin, &audit::changed(Some(before), &after)).await?;
    Ok(after)
}

/// What refused a session's insert: a chain version that is not registered (the foreign key
/// names it) is said as such; otherwise as [`id_taken`] says it.
pub(crate) fn refused_insert(err: sqlx::Error, id: Uuid, chain: Option<ChainKey>) -> Error {
    let constraint = err.as_database_error().and_then(|db| db.constraint());
    match chain {
        Some(key) if constraint == Some("sessions_chain_fkey") => chains::not_registered(&key),
        _ => id_taken(err, id),
    }
}

fn refuse(session: &SessionRow, action: &str) -> Error {
    Error::Conflict(format!(
        "cannot {action} session {}: it is {}",
        session.id,
        snake(session.status)
    ))
}

/// pending → in_progress.
pub async fn start(conn: &mut PgConnection, id: Uuid, origin: &Origin) -> Result<SessionRow> {
    let session = lock_session(conn, id).await?;
    ensure_not_deleted(&session)?;
    match session.status {
        SessionStatus::Pending => {
            let started = set_session_status(conn, id, SessionStatus::InProgress, None).await?;
            audited(conn, origin, &session, started).await
        }
        SessionStatus::InProgress => Ok(session),
        _ => Err(refuse(&session, "start")),
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Completion {
    pub final_analysis: Option<String>,
    pub executive_summary: Option<String>,
}

impl Completion {
    pub(crate) fn check(&self) -> Result<()> {
        check_optional(
            "finalAnalysis",
            self.final_analysis.as_deref(),
            limits::TEXT,
        )?;
        check_optional(
            "executiveSummary",
            self.executive_summary.as_deref(),
            limits::TEXT,
        )
    }
}

/// in_progress → completed, once no execution is running, with the notifications `notify`
/// asks for (none on a retry: they were made with the completion).
pub async fn complete(
    conn: &mut PgConnection,
    id: Uuid,
    completion: &Completion,
    notify: &[NewNotification],
    origin: &Origin,
) -> Result<SessionRow> {
    completion.check()?;
    notifications::check(notify)?;
    let session = lock_session(conn, id).await?;
    ensure_not_deleted(&session)?;
    match session.status {
        SessionStatus::InProgress => {}
        SessionStatus::Completed
            if session.final_analysis == completion.final_analysis
                && session.executive_summary == completion.executive_summary =>
        {
            return Ok(session);
        }
        _ => return Err(refuse(&session, "complete")),
    }
    let running = running_executions(conn, id).await?;
    if !running.is_empty() {
        let names: Vec<String> = running
            .iter()
            .map(|e| format!("{} ({})", e.agent_name, snake(e.status)))
            .collect();
        return Err(Error::Conflict(format!(
            "cannot complete session {id}: executions still running: {}",
            names.join(", ")
        )));
    }
    let completed: SessionRow = sqlx::query_as(concat!(
        "UPDATE sessions SET status = 'completed', completed_at = now(), updated_at = now(), \
            final_analysis = $2, executive_summary = $3 WHERE id = $1 RETURNING ",
        session_columns!()
    ))
    .bind(id)
    .bind(&completion.final_analysis)
    .bind(&completion.executive_summary)
    .fetch_one(traced(&mut *conn))
    .await?;
    status_may_have_changed(conn, id).await?;
    notifications::create(conn, id, None, notify).await?;
    audited(conn, origin, &session, completed).await
}

/// A failed or timed-out session says why.
pub(crate) fn check_failure(error_message: &str) -> Result<()> {
    check_required("errorMessage", error_message, limits::TEXT)
}

/// pending / in_progress / cancelling → failed or timed_out; running executions end with it.
pub async fn fail(
    conn: &mut PgConnection,
    id: Uuid,
    timed_out: bool,
    error_message: &str,
    notify: &[NewNotification],
    origin: &Origin,
) -> Result<SessionRow> {
    check_failure(error_message)?;
    notifications::check(notify)?;
    let (status, execution_status) = if timed_out {
        (SessionStatus::TimedOut, ExecutionStatus::TimedOut)
    } else {
        (SessionStatus::Failed, ExecutionStatus::Failed)
    };
    let session = lock_session(conn, id).await?;
    ensure_not_deleted(&session)?;
    match session.status {
        SessionStatus::Pending | SessionStatus::InProgress | SessionStatus::Cancelling => {}
        s if s == status && session.error_message.as_deref() == Some(error_message) => {
            return Ok(session);
        }
        _ => {
            return Err(refuse(
                &session,
                if timed_out { "time out" } else { "fail" },
            ));
        }
    }
    let reason = format!("session {}: {error_message}", snake(status));
    let running = running_executions(conn, id).await?;
    // All their streams at once, in key order, rather than execution by execution.
    let ids: Vec<Uuid> = running.iter().map(|e| e.id).collect();
    lock_streams_of(conn, id, &ids).await?;
    for execution in running {
        finish_locked(conn, id, execution.id, execution_status, Some(&reason)).await?;
    }
    let failed = set_session_status(conn, id, status, Some(error_message)).await?;
    notifications::create(conn, id, None, notify).await?;
    audited(conn, origin, &session, failed).await
}

/// Requests cancellation: pending executions are cancelled at once; the session is cancelled
/// when no execution is active any more, cancelling until then.
pub async fn request_cancellation(
    conn: &mut PgConnection,
    id: Uuid,
    origin: &Origin,
) -> Result<SessionRow> {
    let session = lock_session(conn, id).await?;
    ensure_not_deleted(&session)?;
    match session.status {
        SessionStatus::Pending | SessionStatus::InProgress => {}
        SessionStatus::Cancelling | SessionStatus::Cancelled => return Ok(session),
        _ => return Err(refuse(&session, "cancel")),
    }
    let mut active = false;
    for execution in running_executions(conn, id).await? {
        if execution.status == ExecutionStatus::Pending {
            finish_locked(
                conn,
                id,
                execution.id,
                ExecutionStatus::Cancelled,
                Some("session cancelled"),
            )
            .await?;
        } else {
            active = true;
        }
    }
    let status = if active {
        SessionStatus::Cancelling
    } else {
        SessionStatus::Cancelled
    };
    let moved = set_session_status(conn, id, status, None).await?;
    audited(conn, origin, &session, moved).await
}

/// Soft delete: hidden from lists, kept for restore. Only a finished session can be deleted.
pub async fn delete(conn: &mut PgConnection, id: Uuid, origin: &Origin) -> Result<SessionRow> {
    let session = lock_session(conn, id).await?;
    if session.deleted_at.is_some() {
        return Ok(session);
    }
    if !is_finished_session(session.status) {
        return Err(refuse(&session, "delete (cancel it first)"));
    }
    let deleted = sqlx::query_as(concat!(
        "UPDATE sessions SET deleted_at = $2, updated_at = now() WHERE id = $1 RETURNING ",
        session_columns!()
    ))
    .bind(id)
    .bind(Utc::now())
    .fetch_one(traced(&mut *conn))
    .await?;
    status_may_have_changed(conn, id).await?;
    audited(conn, origin, &session, deleted).await
}

/// Undoes a soft delete.
pub async fn restore(conn: &mut PgConnection, id: Uuid, origin: &Origin) -> Result<SessionRow> {
    let session = lock_session(conn, id).await?;
    if session.deleted_at.is_none() {
        return Ok(session);
    }
    let restored = sqlx::query_as(concat!(
        "UPDATE sessions SET deleted_at = NULL, updated_at = now() WHERE id = $1 RETURNING ",
        session_columns!()
    ))
    .bind(id)
    .fetch_one(traced(&mut *conn))
    .await?;
    status_may_have_changed(conn, id).await?;
    audited(conn, origin, &session, restored).await
}
