//! How a session's and its agent executions' statuses move together: the session follows its
//! executions (`in_progress` when the first one starts, `cancelled` when a cancelling session's
//! last one ends) and they follow it (a failing or cancelled session ends the ones still
//! running). The session and execution writers both take this from here, so the rule is in
//! one place.

use sqlx::PgConnection;
use uuid::Uuid;

use super::feed::status_may_have_changed;
use super::stages::refresh;
use super::timeline::close_streaming_events;
use super::{is_finished_session, lock_session};
use crate::error::Result;
use crate::model::{ExecutionStatus, SessionStatus};
use crate::store::records::session_columns;
use crate::store::traced::traced;
use crate::store::{ExecutionRow, SessionRow};

/// Moves a session to `status`: it has started once it is in progress, and completed once the
/// status is final.
pub(crate) async fn set_session_status(
    conn: &mut PgConnection,
    id: Uuid,
    status: SessionStatus,
    error_message: Option<&str>,
) -> Result<SessionRow> {
    let finished = is_finished_session(status);
    let moved = sqlx::query_as(concat!(
        "UPDATE sessions SET status = $2, \
            started_at = CASE WHEN $2 = 'in_progress' THEN coalesce(started_at, now()) ELSE started_at END, \
            completed_at = CASE WHEN $3 THEN now() ELSE completed_at END, \
            error_message = coalesce($4, error_message), updated_at = now() \
         WHERE id = $1 RETURNING ", session_columns!()),
    )
    .bind(id)
    .bind(status)
    .bind(finished)
    .bind(error_message)
    .fetch_one(traced(&mut *conn))
    .await?;
    status_may_have_changed(conn, id).await?;
    Ok(moved)
}

/// Called when an execution starts: a pending session is now in progress.
pub(crate) async fn note_execution_started(
    conn: &mut PgConnection,
    session: &SessionRow,
) -> Result<()> {
    if session.status == SessionStatus::Pending {
        set_session_status(conn, session.id, SessionStatus::InProgress, None).await?;
    }
    Ok(())
}

/// Called when an execution finishes: a cancelling session with nothing left running is now
/// cancelled.
pub(crate) async fn note_execution_finished(
    conn: &mut PgConnection,
    session_id: Uuid,
) -> Result<()> {
    let session = lock_session(conn, session_id).await?;
    if session.status == SessionStatus::Cancelling
        && running_executions(conn, session_id).await?.is_empty()
    {
        set_session_status(conn, session_id, SessionStatus::Cancelled, None).await?;
    }
    Ok(())
}

/// Executions of a session that are still pending or active.
pub(crate) async fn running_executions(
    conn: &mut PgConnection,
    session_id: Uuid,
) -> Result<Vec<ExecutionRow>> {
    Ok(sqlx::query_as(
        "SELECT * FROM agent_executions WHERE session_id = $1 AND status IN ('pending', 'active') \
         ORDER BY created_at, id FOR NO KEY UPDATE",
    )
    .bind(session_id)
    .fetch_all(traced(conn))
    .await?)
}

/// Finishes an execution whose session and own row the caller has locked: closes its streaming
/// timeline events with the same outcome, then re-aggregates its stage.
pub(crate) async fn finish_locked(
    conn: &mut PgConnection,
    session_id: Uuid,
    id: Uuid,
    status: ExecutionStatus,
    error_message: Option<&str>,
) -> Result<ExecutionRow> {
    close_streaming_events(conn, session_id, id, status).await?;
    let finished: ExecutionRow = sqlx::query_as(
        "UPDATE agent_executions SET status = $2, error_message = $3, completed_at = now(), \
            duration_ms = CASE WHEN started_at IS NULL THEN NULL \
                ELSE (EXTRACT(EPOCH FROM (now() - started_at)) * 1000)::bigint END, \
            updated_at = now() \
         WHERE id = $1 AND session_id = $4 RETURNING *",
    )
    .bind(id)
    .bind(status)
    .bind(error_message)
    .bind(session_id)
    .fetch_one(traced(&mut *conn))
    .await?;
    refresh(conn, session_id, finished.stage_id).await?;
    Ok(finished)
}
