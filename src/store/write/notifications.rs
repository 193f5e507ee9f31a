//! The notification outbox. casefile sends nothing: a notification is inserted in the
//! transaction of the write that causes it (so it exists exactly when that write committed),
//! and delivery workers claim due ones with a lease and report each outcome.
//!
//! Locks: a notification row is a leaf. Creation runs under its session's lock; a claim locks
//! the rows it takes (`SKIP LOCKED`, so workers never wait on one another); a report locks the
//! one row it names. None of them waits on a session's lock while holding a notification.

use serde::Serialize;
use serde_json::{Value as Json, json};
use sqlx::PgConnection;
use uuid::Uuid;

use super::{check_json, check_required, check_text, limits, snake};
use crate::error::{Error, Result};
use crate::model::{NotificationStatus, NotificationType};
use crate::store::NotificationRow;
use crate::store::audit::{self, Change, Origin};
use crate::store::traced::traced;

/// Attempts a notification gets when its writer names none, by default
/// (`--notification-max-attempts`).
pub const DEFAULT_MAX_ATTEMPTS: i32 = 5;
/// Most attempts a writer may ask for.
pub const MAX_ATTEMPTS: i32 = 100;
/// Most notifications one claim takes.
pub const MAX_CLAIM: i32 = 100;
/// Longest lease, in seconds.
pub const MAX_LEASE_SECONDS: i32 = 3_600;
/// A destination: characters (`notifications.destination`).
pub const DESTINATION: usize = 2_000;
/// A reported error: characters (`notifications.last_error`).
pub const ERROR: usize = 10_000;
/// The wait after a notification's first failed attempt, in seconds, by default; it doubles
/// with each further one, up to [`BACKOFF_CAP_SECONDS`].
pub const BACKOFF_BASE_SECONDS: i32 = 30;
/// Longest wait between attempts, in seconds, by default.
pub const BACKOFF_CAP_SECONDS: i32 = 3_600;

/// The wait after a failed attempt: `base_seconds` after the first, doubling with each
/// further one, at most `max_seconds`.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub base_seconds: i32,
    pub max_seconds: i32,
}

/// A notification a write asks for.
#[derive(Debug, Clone, Serialize)]
pub struct NewNotification {
    pub notification_type: NotificationType,
    pub destination: String,
    pub integration_data: Option<Json>,
    /// What the writer asked for, or the server's default.
    pub max_attempts: i32,
}

/// Refuses bad notifications before anything is written.
pub fn check(notify: &[NewNotification]) -> Result<()> {
    for n in notify {
        check_required("destination", &n.destination, DESTINATION)?;
        if let Some(data) = &n.integration_data {
            if !data.is_object() {
                return Err(Error::bad_input("`integrationData` must be a JSON object"));
            }
            check_json("integrationData", data, limits::SMALL_JSON)?;
        }
        if !(1..=MAX_ATTEMPTS).contains(&n.max_attempts) {
            return Err(Error::bad_input(format!(
                "`maxAttempts` must be 1–{MAX_ATTEMPTS}; got {}",
                n.max_attempts
            )));
        }
    }
    Ok(())
}

/// Adds `notify` to a session whose lock the caller holds, due at once; each names
/// `chat_question` when it is about that question's answer.
pub(crate) async fn create(
    conn: &mut PgConnection,
    session_id: Uuid,
    chat_question: Option<Uuid>,
    notify: &[NewNotification],
) -> Result<()> {
    for n in notify {
        sqlx::query(
            "INSERT INTO notifications (session_id, id, type, destination, integration_data, \
                max_attempts, next_attempt_at, chat_question_id) \
             VALUES ($1, $2, $3, $4, coalesce($5, '{}'::jsonb), $6, now(), $7)",
        )
        .bind(session_id)
        .bind(Uuid::now_v7())
        .bind(n.notification_type)
        .bind(&n.destination)
        .bind(&n.integration_data)
        .bind(n.max_attempts)
        .bind(chat_question)
        .execute(traced(&mut *conn))
        .await?;
    }
    Ok(())
}

/// What a worker asks to claim.
pub struct ClaimRequest {
    pub claim_id: Uuid,
    /// Only these types (all when empty).
    pub types: Vec<NotificationType>,
    pub limit: i32,
    pub lease_seconds: i32,
}

/// Claims up to `limit` due notifications for `lease_seconds`: pending ones whose backoff has
/// ended and claimed ones whose lease ran out, oldest due first. Rows another claim has locked
/// are skipped, so concurrent workers take disjoint sets. A claim id already used returns what
/// it claimed (a retry after a lost answer), whatever happened to them since.
pub async fn claim(
    conn: &mut PgConnection,
    request: &ClaimRequest,
    origin: &Origin,
) -> Result<Vec<NotificationRow>> {
    if !(1..=MAX_CLAIM).contains(&request.limit) {
        return Err(Error::bad_input(format!(
            "`limit` must be 1–{MAX_CLAIM}; got {}",
            request.limit
        )));
    }
    if !(1..=MAX_LEASE_SECONDS).contains(&request.lease_seconds) {
        return Err(Error::bad_input(format!(
            "`leaseSeconds` must be 1–{MAX_LEASE_SECONDS}; got {}",
            request.lease_seconds
        )));
    }
    let before: Vec<NotificationRow> =
        sqlx::query_as("SELECT * FROM notifications WHERE claim_id = $1 ORDER BY session_id, id")
            .bind(request.claim_id)
            .fetch_all(traced(&mut *conn))
            .await?;
    if !before.is_empty() {
        return Ok(before);
    }
    let types: Vec<String> = request.types.iter().map(|t| snake(*t)).collect();
    let claimed: Vec<NotificationRow> = sqlx::query_as(
        "WITH due AS ( \
            SELECT session_id, id FROM notifications \
            WHERE status IN ('pending', 'sending') AND next_attempt_at <= now() \
              AND (cardinality($2::text[]) = 0 OR type = ANY($2)) \
            ORDER BY next_attempt_at, id LIMIT $3::int FOR UPDATE SKIP LOCKED) \
         UPDATE notifications n SET status = 'sending', claim_id = $1, attempts = attempts + 1, \
            next_attempt_at = now() + make_interval(secs => $4::int) \
         FROM due WHERE n.session_id = due.session_id AND n.id = due.id \
         RETURNING n.*",
    )
    .bind(request.claim_id)
    .bind(&types)
    .bind(request.limit)
    .bind(request.lease_seconds)
    .fetch_all(traced(&mut *conn))
    .await?;
    if !claimed.is_empty() {
        audit::record(conn, origin, &claimed_change(request, &types, &claimed)).await?;
    }
    Ok(claimed)
}

/// A claim, as its one audit record shows it (across sessions, so kept with none): what it
/// took, by key, and for how long. A claim of nothing is not recorded: workers poll.
fn claimed_change(
    request: &ClaimRequest,
    types: &[String],
    claimed: &[NotificationRow],
) -> Change<'static> {
    let keys: Vec<Json> = claimed
        .iter()
        .map(|n| json!({ "sessionId": n.session_id, "id": n.id }))
        .collect();
    Change {
        target_type: "NotificationClaim",
        target_id: request.claim_id.to_string(),
        session_id: None,
        before: None,
        after: vec![
            ("notifications", Json::Array(keys)),
            ("types", json!(types)),
            ("leaseSeconds", json!(request.lease_seconds)),
        ],
    }
}

/// Records a report's change of a notification by `origin`, and gives it.
async fn reported(
    conn: &mut PgConnection,
    origin: &Origin,
    before: &NotificationRow,
    after: NotificationRow,
) -> Result<NotificationRow> {
    audit::record(conn, origin, &audit::changed(Some(before), &after)).await?;
    Ok(after)
}

/// Locks a notification.
async fn lock(conn: &mut PgConnection, session_id: Uuid, id: Uuid) -> Result<NotificationRow> {
    sqlx::query_as(
        "SELECT * FROM notifications WHERE session_id = $1 AND id = $2 FOR NO KEY UPDATE",
    )
    .bind(session_id)
    .bind(id)
    .fetch_optional(traced(conn))
    .await?
    .ok_or_else(|| {
        Error::NotFound(format!(
            "notification {id} of session {session_id} not found"
        ))
    })
}

/// A report that does not fit where the notification stands.
fn refuse(row: &NotificationRow, what: &str) -> Error {
    Error::Conflict(format!(
        "cannot mark notification {} {what}: it is {}{}",
        row.id,
        snake(row.status),
        match row.claim_id {
            Some(claim) => format!(" under claim {claim}"),
            None => String::new(),
        }
    ))
}

/// Reports that the worker of `claim_id` handed the notification over; `integration_data`
/// (what the destination answered: Slack's `thread_ts`, `permalink` …) is merged into what it
/// had. Again with the same claim: a harmless retry.
pub async fn mark_sent(
    conn: &mut PgConnection,
    (session_id, id): (Uuid, Uuid),
    claim_id: Uuid,
    integration_data: Option<&Json>,
    origin: &Origin,
) -> Result<NotificationRow> {
    if let Some(data) = integration_data {
        if !data.is_object() {
            return Err(Error::bad_input("`integrationData` must be a JSON object"));
        }
        check_json("integrationData", data, limits::SMALL_JSON)?;
    }
    let row = lock(conn, session_id, id).await?;
    match row.status {
        NotificationStatus::Sending if row.claim_id == Some(claim_id) => {}
        NotificationStatus::Sent | NotificationStatus::Delivered
            if row.claim_id == Some(claim_id) =>
        {
            return Ok(row);
        }
        _ => return Err(refuse(&row, "sent")),
    }
    let after = sqlx::query_as(
        "UPDATE notifications SET status = 'sent', sent_at = now(), next_attempt_at = NULL, \
            integration_data = integration_data || coalesce($3, '{}'::jsonb) \
         WHERE session_id = $1 AND id = $2 RETURNING *",
    )
    .bind(session_id)
    .bind(id)
    .bind(integration_data)
    .fetch_one(traced(&mut *conn))
    .await?;
    reported(conn, origin, &row, after).await
}

/// Reports that the destination confirmed a sent notification (a confirmation may come from
/// elsewhere than the sending worker, so it names no claim). Again: a harmless retry.
pub async fn mark_delivered(
    conn: &mut PgConnection,
    (session_id, id): (Uuid, Uuid),
    origin: &Origin,
) -> Result<NotificationRow> {
    let row = lock(conn, session_id, id).await?;
    match row.status {
        NotificationStatus::Sent => {}
        NotificationStatus::Delivered => return Ok(row),
        _ => return Err(refuse(&row, "delivered")),
    }
    let after = sqlx::query_as(
        "UPDATE notifications SET status = 'delivered', delivered_at = now() \
         WHERE session_id = $1 AND id = $2 RETURNING *",
    )
    .bind(session_id)
    .bind(id)
    .fetch_one(traced(&mut *conn))
    .await?;
    reported(conn, origin, &row, after).await
}

/// Reports that the attempt of `claim_id` failed with `error`: the notification is due again
/// after `backoff`, which doubles with each attempt, or failed for good once it has had its
/// attempts. Again with the same claim and error: a harmless retry.
pub async fn mark_failed(
    conn: &mut PgConnection,
    (session_id, id): (Uuid, Uuid),
    claim_id: Uuid,
    error: &str,
    backoff: Backoff,
    origin: &Origin,
) -> Result<NotificationRow> {
    check_text("error", error, ERROR)?;
    let row = lock(conn, session_id, id).await?;
    match row.status {
        NotificationStatus::Sending if row.claim_id == Some(claim_id) => {}
        NotificationStatus::Pending | NotificationStatus::Failed
            if row.claim_id == Some(claim_id) && row.last_error.as_deref() == Some(error) =>
        {
            return Ok(row);
        }
        _ => return Err(refuse(&row, "failed")),
    }
    let after = sqlx::query_as(
        "UPDATE notifications SET last_error = $3, \
            status = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'pending' END, \
            failed_at = CASE WHEN attempts >= max_attempts THEN now() END, \
            next_attempt_at = CASE WHEN attempts < max_attempts THEN now() + make_interval( \
                secs => least($4::int * power(2, attempts - 1), $5::int)) END \
         WHERE session_id = $1 AND id = $2 RETURNING *",
    )
    .bind(session_id)
    .bind(id)
    .bind(error)
    .bind(backoff.base_seconds)
    .bind(backoff.max_seconds)
    .fetch_one(traced(&mut *conn))
    .await?;
    reported(conn, origin, &row, after).await
}
