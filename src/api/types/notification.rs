//! A notification of a session: what the outbox holds for a delivery worker; and the list of
//! notifications across sessions.

use std::sync::Arc;

use async_graphql::connection::PageInfo;
use async_graphql::{ComplexObject, Context, ID, Object, SimpleObject};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{ChatUserMessage, Session, loaders, required};
use crate::api::Limits;
use crate::api::cost;
use crate::api::ids::{self, NodeType};
use crate::api::pagination::{PageArgs, edges_of};
use crate::api::scalars::{JsonRef, Text};
use crate::cursor::{decode_notification_cursor, notification_cursor};
use crate::model::{NotificationStatus, NotificationType};
use crate::store::notifications::NotificationFilter;
use crate::store::{Key, NotificationRow, Store};
use async_graphql::Result;

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
    /// Its session (deleted or not).
    async fn session(&self, ctx: &Context<'_>) -> Result<Session> {
        let row = loaders(ctx).sessions.load_one(self.0.session_id).await?;
        Ok(Session(required(row, "session")?))
    }
    /// The chat question whose answer it is about (null for a session's own).
    async fn chat_question(&self, ctx: &Context<'_>) -> Result<Option<ChatUserMessage>> {
        let Some(question) = self.0.chat_question_id else {
            return Ok(None);
        };
        let key = Key::new(self.0.session_id, question);
        let row = loaders(ctx).chat_user_messages.load_one(key).await?;
        Ok(Some(ChatUserMessage(required(row, "chat question")?)))
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

/// A page of notifications across sessions, newest first.
#[derive(SimpleObject)]
#[graphql(complex)]
pub struct NotificationConnection {
    /// The notifications of this page, each with its cursor.
    edges: Vec<NotificationEdge>,
    /// Where this page is: whether notifications lie before and after it, and the cursors to
    /// page on from either end.
    page_info: PageInfo,
    #[graphql(skip)]
    filter: NotificationFilter,
}

/// A notification in the list of notifications, and its cursor.
#[derive(SimpleObject)]
pub struct NotificationEdge {
    /// Pass as `after` or `before` to page on after or before this notification (in this list
    /// only).
    cursor: String,
    /// The notification.
    node: Notification,
}

#[ComplexObject]
impl NotificationConnection {
    /// How many notifications match the filter, across all pages (counted only when asked
    /// for).
    #[graphql(complexity = "cost::aggregate(cost::COUNT, child_complexity)")]
    async fn total_count(&self, ctx: &Context<'_>) -> Result<i64> {
        Ok(ctx
            .data_unchecked::<Store>()
            .count_notifications(&self.filter)
            .await?)
    }
}

/// A page of the notifications matching `filter`, newest first.
pub(crate) async fn list_notifications(
    ctx: &Context<'_>,
    filter: NotificationFilter,
    args: PageArgs,
) -> Result<NotificationConnection> {
    let slice = args.slice(ctx.data_unchecked::<Limits>(), decode_notification_cursor)?;
    let page = ctx
        .data_unchecked::<Store>()
        .list_notifications(&filter, &slice)
        .await?;
    let (edges, page_info) = edges_of(
        page,
        |row| NotificationEdge {
            cursor: notification_cursor((row.created_at, row.id)),
            node: Notification(Arc::new(row)),
        },
        |e| &e.cursor,
    );
    Ok(NotificationConnection {
        edges,
        page_info,
        filter,
    })
}
