//! Notifications: what the outbox holds about a session's end or a chat answer, and how far a
//! delivery worker got with each, timed from the clock as it stands (it does not move it).

use chrono::TimeDelta;
use serde_json::Value as Json;
use uuid::Uuid;

use super::{Demo, Session, Stage};
use crate::demo::ids::demo_id;
use crate::model::{NotificationStatus, NotificationType};
use crate::store::NotificationRow;

/// How far a notification's delivery got.
pub(in crate::demo) enum Delivery {
    /// Sent on its first attempt and confirmed.
    Delivered,
    /// Sent on its first attempt, not confirmed.
    Sent,
    /// Every attempt failed, the last with this error: failed for good.
    Failed(&'static str),
    /// Its first attempt failed with this error; due again after the backoff.
    Retrying(&'static str),
    /// Not claimed yet: due at once.
    Pending,
}

/// A notification a scenario writes.
pub(in crate::demo) struct Notify {
    pub(in crate::demo) kind: NotificationType,
    pub(in crate::demo) destination: &'static str,
    /// What its writer gave, and what the worker reported when it was sent.
    pub(in crate::demo) data: Json,
    pub(in crate::demo) max_attempts: i32,
    pub(in crate::demo) delivery: Delivery,
}

impl Demo {
    /// A notification about the session's end.
    pub(in crate::demo) fn notify(&mut self, s: Session, n: Notify) {
        self.notification(s.id, None, n);
    }

    /// A notification about the answer of the chat question `st` answers.
    pub(in crate::demo) fn notify_answer(&mut self, st: Stage, n: Notify) {
        let question = self.rows.stages[st.idx].chat_user_message_id;
        self.notification(st.session, question, n);
    }

    fn notification(&mut self, session: Uuid, question: Option<Uuid>, n: Notify) {
        let k = self.next(session, "notification");
        let at = self.now;
        let id = Self::child_id(session, "notification", k, at);
        let later = |seconds| Some(at + TimeDelta::seconds(seconds));
        let mut row = NotificationRow {
            session_id: session,
            id,
            notification_type: n.kind,
            destination: n.destination.into(),
            status: NotificationStatus::Pending,
            integration_data: crate::store::raw_json(&n.data),
            attempts: 0,
            max_attempts: n.max_attempts,
            next_attempt_at: Some(at),
            claim_id: None,
            last_error: None,
            created_at: at,
            sent_at: None,
            delivered_at: None,
            failed_at: None,
            chat_question_id: question,
        };
        let claim = Some(demo_id(&format!("{id}/claim"), at));
        match n.delivery {
            Delivery::Pending => {}
            Delivery::Delivered | Delivery::Sent => {
                row.status = NotificationStatus::Sent;
                row.attempts = 1;
                row.claim_id = claim;
                row.next_attempt_at = None;
                row.sent_at = later(2);
                if matches!(n.delivery, Delivery::Delivered) {
                    row.status = NotificationStatus::Delivered;
                    row.delivered_at = later(3);
                }
            }
            Delivery::Retrying(error) => {
                row.attempts = 1;
                row.claim_id = claim;
                row.last_error = Some(error.into());
                row.next_attempt_at = later(32);
            }
            Delivery::Failed(error) => {
                // 30 s after the first attempt, doubling: the last ends after all of them.
                let waited: i64 = (0..n.max_attempts - 1).map(|i| 30 << i).sum();
                row.status = NotificationStatus::Failed;
                row.attempts = n.max_attempts;
                row.claim_id = claim;
                row.last_error = Some(error.into());
                row.next_attempt_at = None;
                row.failed_at = later(waited + 2);
            }
        }
        self.rows.notifications.push(row);
    }
}
