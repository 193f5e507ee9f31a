//! The audit trail as read: a record of who changed what, from where, and the fields it
//! changed; the admin's log across everything, and a session's own trail.

use std::sync::Arc;

use async_graphql::connection::PageInfo;
use async_graphql::{Context, ID, InputObject, Json, Object, SimpleObject};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use uuid::Uuid;

use crate::api::Limits;
use crate::api::guards::caller;
use crate::api::ids::{self, NodeType, decode_as};
use crate::api::pagination::{PageArgs, edges_of};
use crate::api::scalars::Text;
use crate::cursor::{audit_cursor, decode_audit_cursor};
use crate::model::Role;
use crate::store::Store;
use crate::store::audit::log::{AuditFilter, AuditRecordRow};
use crate::store::write::{check_name, check_time};
use async_graphql::Result;

/// An audit record (its row).
pub struct AuditRecord(pub Arc<AuditRecordRow>);

/// One control-plane change: who made it, from which request and client, what it changed
/// and how. Data-plane recording (appends, messages, interactions, timeline events) leaves
/// none: those records are their own trail.
#[Object]
impl AuditRecord {
    /// The record (UUIDv7).
    async fn id(&self) -> Uuid {
        self.0.id
    }
    /// When the change was made (its transaction's start).
    async fn at(&self) -> DateTime<Utc> {
        self.0.at
    }
    /// Who made it, as `createdBy` records it (`token:<name>`, a proxy's user); null for a
    /// caller without an identity.
    async fn actor(&self) -> Option<Text<'_>> {
        self.0.actor.as_deref().map(Text)
    }
    /// The mutation, as the schema names it (`completeSession`); an `ingest` operation is
    /// named as its own mutation. Changes not made through a mutation are named by what made
    /// them: `purge` (retention), `restore` (finished records written whole: the demo's).
    async fn action(&self) -> Text<'_> {
        Text(&self.0.action)
    }
    /// What was changed: `Session`, `Stage`, `AgentExecution`, `Chat`, `ChatUserMessage`,
    /// `Notification`, `NotificationClaim`, `EventStreamTicket`, `Chain`, `ModelPrice`,
    /// `ApiToken`, `Purge`.
    async fn target_type(&self) -> Text<'_> {
        Text(&self.0.target_type)
    }
    /// Which one: its id (a uuid, or a price's number).
    async fn target_id(&self) -> Text<'_> {
        Text(&self.0.target_id)
    }
    /// The session it belongs to, if any.
    async fn session_id(&self) -> Option<ID> {
        self.0
            .session_id
            .map(|id| ids::encode(NodeType::Session, id))
    }
    /// The request that made it (`x-request-id`, or the id the server gave the request).
    async fn request_id(&self) -> Option<Text<'_>> {
        self.0.request_id.as_deref().map(Text)
    }
    /// The client's address. Admins only: null for other callers.
    async fn client_address(&self, ctx: &Context<'_>) -> Result<Option<Text<'_>>> {
        let shown = for_admins(ctx)?.then(|| self.0.client_address.as_deref().map(Text));
        Ok(shown.flatten())
    }
    /// The client's user agent (at most 500 characters). Admins only: null for other callers.
    async fn user_agent(&self, ctx: &Context<'_>) -> Result<Option<Text<'_>>> {
        let shown = for_admins(ctx)?.then(|| self.0.user_agent.as_deref().map(Text));
        Ok(shown.flatten())
    }
    /// The fields it changed, each before and after (a new record's from null). Large values
    /// (texts, alert data, definitions) are given as `{characters, sha256}`; secrets never.
    async fn changes(&self) -> Result<Vec<AuditChange>> {
        Ok(serde_json::from_str(self.0.changes.get())?)
    }
}

/// Whether the caller is an admin.
fn for_admins(ctx: &Context<'_>) -> Result<bool> {
    Ok(caller(ctx)?.role >= Role::Admin)
}

/// One changed field.
#[derive(SimpleObject, Deserialize)]
pub struct AuditChange {
    /// The field, as the API names it.
    field: String,
    /// Its value before (null: none, or a new record).
    before: Json<serde_json::Value>,
    /// Its value after.
    after: Json<serde_json::Value>,
}

/// Narrows the audit log; all given conditions must hold. Each is read along an index.
#[derive(InputObject, Default)]
pub struct AuditLogFilter {
    /// Made by exactly this identity (`token:ops`).
    actor: Option<String>,
    /// Exactly this action (`deleteSession`).
    action: Option<String>,
    /// Of exactly this target type (`Session`).
    target_type: Option<String>,
    /// Of this session.
    session_id: Option<ID>,
    /// Made at or after this instant.
    after: Option<DateTime<Utc>>,
    /// Made before this instant.
    before: Option<DateTime<Utc>>,
}

impl AuditLogFilter {
    pub(crate) fn validate(self) -> crate::error::Result<AuditFilter> {
        for (field, value) in [
            ("actor", &self.actor),
            ("action", &self.action),
            ("targetType", &self.target_type),
        ] {
            if let Some(value) = value {
                check_name(field, value)?;
            }
        }
        for (field, value) in [("after", self.after), ("before", self.before)] {
            if let Some(value) = value {
                check_time(field, value)?;
            }
        }
        Ok(AuditFilter {
            actor: self.actor,
            action: self.action,
            target_type: self.target_type,
            session_id: self
                .session_id
                .map(|id| decode_as(NodeType::Session, &id))
                .transpose()?,
            after: self.after,
            before: self.before,
        })
    }
}

/// A page of the audit log, newest first.
#[derive(SimpleObject)]
pub struct AuditRecordConnection {
    /// The records of this page, each with its cursor.
    edges: Vec<AuditRecordEdge>,
    /// Where this page is: whether records lie before and after it, and the cursors to page
    /// on from either end.
    page_info: PageInfo,
}

/// An audit record in a log, and its cursor.
#[derive(SimpleObject)]
pub struct AuditRecordEdge {
    /// Pass as `after` or `before` to page on after or before this record.
    cursor: String,
    /// The record.
    node: AuditRecord,
}

/// A page of the records `filter` selects, newest first.
pub(crate) async fn audit_log(
    ctx: &Context<'_>,
    filter: AuditFilter,
    args: PageArgs,
) -> Result<AuditRecordConnection> {
    let slice = args.slice(ctx.data_unchecked::<Limits>(), decode_audit_cursor)?;
    let page = ctx
        .data_unchecked::<Store>()
        .audit_log(&filter, &slice)
        .await?;
    let (edges, page_info) = edges_of(
        page,
        |row| AuditRecordEdge {
            cursor: audit_cursor((row.at, row.id)),
            node: AuditRecord(Arc::new(row)),
        },
        |e| &e.cursor,
    );
    Ok(AuditRecordConnection { edges, page_info })
}
