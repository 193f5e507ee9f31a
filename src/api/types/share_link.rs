//! Share links as read: who made each, for how long, and whether it still opens its session.

use std::sync::Arc;

use async_graphql::{ID, Object};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::api::ids::{self, NodeType};
use crate::api::scalars::Text;
use crate::store::share_links::ShareLinkRow;

pub struct ShareLink(pub Arc<ShareLinkRow>);

/// A read-only link to one session (its secret is shown once, when created, and never stored):
/// whoever holds it reads that session, its records and its live streams, and nothing else.
#[Object]
impl ShareLink {
    /// The link (what `revokeShareLink` names).
    async fn id(&self) -> Uuid {
        self.0.id
    }
    /// The session it opens.
    async fn session_id(&self) -> ID {
        ids::encode(NodeType::Session, self.0.session_id)
    }
    /// What it is for, as its creator said.
    async fn note(&self) -> Option<Text<'_>> {
        self.0.note.as_deref().map(Text)
    }
    /// Who created it.
    async fn created_by(&self) -> Option<Text<'_>> {
        self.0.created_by.as_deref().map(Text)
    }
    /// When it was created.
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    /// When it stops working.
    async fn expires_at(&self) -> DateTime<Utc> {
        self.0.expires_at
    }
    /// When it was last used (written at most once a minute).
    async fn last_used_at(&self) -> Option<DateTime<Utc>> {
        self.0.last_used_at
    }
    /// When it was revoked (null: it was not).
    async fn revoked_at(&self) -> Option<DateTime<Utc>> {
        self.0.revoked_at
    }
    /// Who revoked it.
    async fn revoked_by(&self) -> Option<Text<'_>> {
        self.0.revoked_by.as_deref().map(Text)
    }
}
