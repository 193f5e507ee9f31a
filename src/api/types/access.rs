//! Who did what: the caller's identity, API tokens, and a session's status history.

use std::sync::Arc;

use async_graphql::Object;
use chrono::{DateTime, Utc};

use crate::auth::Identity;
use crate::model::{Role, SessionChangeAction, SessionStatus};
use crate::store::SessionStatusChangeRow;
use crate::store::tokens::ApiTokenRow;

pub struct Viewer(pub Identity);

/// The caller, as this request was authenticated.
#[Object]
impl Viewer {
    /// `token:NAME` for an API token, the user for a person signed in through the SSO proxy;
    /// null when the server runs without authentication (`--auth none`).
    async fn actor(&self) -> Option<&str> {
        self.0.actor.as_deref()
    }
    /// What the caller may do.
    async fn role(&self) -> Role {
        self.0.role
    }
}

pub struct ApiToken(pub ApiTokenRow);

/// An API token (its secret is shown once, when created, and never stored).
#[Object]
impl ApiToken {
    /// Unique name; what it creates is recorded as `token:NAME`.
    async fn name(&self) -> &str {
        &self.0.name
    }
    /// What it may do.
    async fn role(&self) -> Role {
        self.0.role
    }
    /// When it was created.
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    /// Who created it (null: the command line or the server's first start).
    async fn created_by(&self) -> Option<&str> {
        self.0.created_by.as_deref()
    }
    /// When it was last used (written at most once a minute).
    async fn last_used_at(&self) -> Option<DateTime<Utc>> {
        self.0.last_used_at
    }
    /// When it stops working (null: never).
    async fn expires_at(&self) -> Option<DateTime<Utc>> {
        self.0.expires_at
    }
    /// When it was revoked (null: it was not).
    async fn revoked_at(&self) -> Option<DateTime<Utc>> {
        self.0.revoked_at
    }
    /// Who revoked it.
    async fn revoked_by(&self) -> Option<&str> {
        self.0.revoked_by.as_deref()
    }
}

pub struct SessionHistoryEntry(pub Arc<SessionStatusChangeRow>);

/// One entry of a session's status history.
#[Object]
impl SessionHistoryEntry {
    /// What happened.
    async fn action(&self) -> SessionChangeAction {
        self.0.action
    }
    /// The status before (null for the creation).
    async fn from_status(&self) -> Option<SessionStatus> {
        self.0.from_status
    }
    /// The status after (for a delete or restore, the status it kept).
    async fn to_status(&self) -> SessionStatus {
        self.0.to_status
    }
    /// Who made the request that caused it (`token:NAME` or a proxy user): a change that follows
    /// from an agent's work, such as a cancelling session becoming cancelled when its last
    /// agent finishes, is recorded with that agent's identity. Null when no identity was known
    /// (`--auth none`).
    async fn actor(&self) -> Option<&str> {
        self.0.actor.as_deref()
    }
    /// The reason given with the request.
    async fn reason(&self) -> Option<&str> {
        self.0.reason.as_deref()
    }
    /// When it happened.
    async fn at(&self) -> DateTime<Utc> {
        self.0.changed_at
    }
}
