//! The records purges leave (retention): who deleted what, when, and by which policy.

use async_graphql::{Json, Object};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::model::{PurgeStatus, PurgeTrigger};
use crate::store::retention::PurgeRow;

pub struct Purge(pub PurgeRow);

/// A purge that ran: `casefile purge --execute`, or the server's retention schedule when it
/// deleted anything. Its counts grow with each batch, so an interrupted purge says how far it
/// got.
#[Object]
impl Purge {
    /// Its id (UUIDv7).
    async fn uuid(&self) -> Uuid {
        self.0.id
    }
    /// Who ran it: `cli:USER` (or `--actor`) for the command, `schedule:HOST` for a server.
    async fn actor(&self) -> &str {
        &self.0.actor
    }
    /// What started it.
    async fn trigger(&self) -> PurgeTrigger {
        self.0.trigger
    }
    /// Its policy: for each of `deletedBefore`, `finishedBefore`, `receiptsBefore` and
    /// `auditBefore` given,
    /// the cutoff `instant` (RFC 3339) and, when given as one, its `age` (`30d`).
    async fn criteria(&self) -> Json<&serde_json::Value> {
        Json(&self.0.criteria)
    }
    /// Whether it finished.
    async fn status(&self) -> PurgeStatus {
        self.0.status
    }
    /// Sessions it hard-deleted, each with everything under it.
    async fn sessions_deleted(&self) -> i64 {
        self.0.sessions_deleted
    }
    /// Idempotency receipts it forgot.
    async fn receipts_deleted(&self) -> i64 {
        self.0.receipts_deleted
    }
    /// Audit records it forgot (older than the audit retention).
    async fn audit_records_deleted(&self) -> i64 {
        self.0.audit_records_deleted
    }
    /// Why it failed or stopped (null otherwise).
    async fn error_message(&self) -> Option<&str> {
        self.0.error_message.as_deref()
    }
    /// When it started.
    async fn started_at(&self) -> DateTime<Utc> {
        self.0.started_at
    }
    /// When it last made progress: its start, then each batch's commit. A purge still
    /// `RUNNING` an hour after it is marked `FAILED` by the next purge (its process died).
    async fn last_progress_at(&self) -> DateTime<Utc> {
        self.0.heartbeat_at
    }
    /// When it ended (null while it runs).
    async fn finished_at(&self) -> Option<DateTime<Utc>> {
        self.0.finished_at
    }
}
