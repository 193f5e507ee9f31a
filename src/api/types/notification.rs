//! A notification of a session: what the outbox holds for a delivery worker.

use std::sync::Arc;

use async_graphql::{ID, Object};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::api::ids::{self, NodeType};
use crate::api::scalars::{JsonRef, Text};
use crate::model::{NotificationStatus, NotificationType};
use crate::store::NotificationRow;

/// A notification of a session (its row).
pub struct Notification(pub Arc<NotificationRow>);

/// A message about a session to send somewhere (Slack, email …). casefile sends nothing
/// itself: it keeps the notification, written with the change that caused it, until a
/// delivery worker claims it (`claimNotifications`) and reports how it went.
#[Object]
impl Notification {
    /// The notification (with `sessionId`, what the `mark…` mutations name).
    async fn id(&self) -> Uuid {
        self.0.id
    }
    /// Its session.
    async fn session_id(&self) -> ID {
        ids::encode(NodeType::Session, self.0.session_id)
    }
    /// Where it goes.
    #[graphql(name = "type")]
    async fn notification_type(&self) -> NotificationType {
        self.0.notification_type
    }
    /// Where to: a Slack channel, an address, a routing key, a URL.
    async fn destination(&self) -> Text<'_> {
        Text(&self.0.destination)
    }
    /// Where its delivery stands.
    async fn status(&self) -> NotificationStatus {
        self.0.status
    }
    /// What its writer gave, merged with what the worker reported when it was sent (Slack:
    /// `channel`, `thread_ts`, `message_fingerprint`, `permalink`).
    async fn integration_data(&self) -> JsonRef<'_> {
        JsonRef(&self.0.integration_data)
    }
    /// Claims so far: each claim is an attempt.
    async fn attempts(&self) -> i32 {
        self.0.attempts
    }
    /// Attempts before it is failed for good.
    async fn max_attempts(&self) -> i32 {
        self.0.max_attempts
    }
    /// When it may next be claimed: while `PENDING`, when its backoff ends; while `SENDING`,
    /// when its lease runs out. Null once sent, delivered or failed.
    async fn next_attempt_at(&self) -> Option<DateTime<Utc>> {
        self.0.next_attempt_at
    }
    /// The claim that last took it.
    async fn claim_id(&self) -> Option<Uuid> {
        self.0.claim_id
    }
    /// The error of its last failed attempt.
    async fn last_error(&self) -> Option<Text<'_>> {
        self.0.last_error.as_deref().map(Text)
    }
    /// When it was written.
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    /// When a worker reported it sent.
    async fn sent_at(&self) -> Option<DateTime<Utc>> {
        self.0.sent_at
    }
    /// When its delivery was confirmed.
    async fn delivered_at(&self) -> Option<DateTime<Utc>> {
        self.0.delivered_at
    }
    /// When it was failed for good.
    async fn failed_at(&self) -> Option<DateTime<Utc>> {
        self.0.failed_at
    }
}
