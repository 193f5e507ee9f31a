//! Share links: a secret that opens one session, read-only (seed 003's `share_secret_key`).
//! Created, revoked and listed here; looked up with API tokens by the SHA-256 of their secret
//! (`tokens::find`): one kind of bearer secret, one cache. Every change
//! that matters to verification sends `NOTIFY casefile_tokens` (a trigger, migration 0095), so
//! every process forgets what it cached, as for API tokens.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgConnection};
use uuid::Uuid;

use super::Store;
use super::audit::{self, Origin};
use super::traced::traced;
use super::write::{check_optional, ensure_not_deleted, lock_session};
use crate::error::{Error, Result};

/// A link as listed: never its secret.
#[derive(Debug, Clone, FromRow)]
pub struct ShareLinkRow {
    pub id: Uuid,
    pub session_id: Uuid,
    pub note: Option<String>,
    pub created_by: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub revoked_by: Option<String>,
}

const COLUMNS: &str = "id, session_id, note, created_by, created_at, expires_at, last_used_at, \
                       revoked_at, revoked_by";

/// A note: characters.
pub const NOTE: usize = 500;

/// A link to store.
pub struct NewShareLink<'a> {
    pub session_id: Uuid,
    pub secret_hash: &'a [u8; 32],
    pub expires_at: DateTime<Utc>,
    pub note: Option<&'a str>,
    pub created_by: Option<&'a str>,
}

/// Stores a link to a session that exists and is not deleted, audited.
pub async fn create(
    conn: &mut PgConnection,
    new: &NewShareLink<'_>,
    origin: &Origin,
) -> Result<ShareLinkRow> {
    check_optional("note", new.note, NOTE)?;
    if new.note.is_some_and(|note| note.trim().is_empty()) {
        return Err(Error::bad_input("`note` must not be blank"));
    }
    ensure_not_deleted(&lock_session(conn, new.session_id).await?)?;
    let row: ShareLinkRow = sqlx::query_as(&format!(
        "INSERT INTO share_links (id, session_id, secret_hash, note, created_by, expires_at) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING {COLUMNS}"
    ))
    .bind(Uuid::now_v7())
    .bind(new.session_id)
    .bind(&new.secret_hash[..])
    .bind(new.note)
    .bind(new.created_by)
    .bind(new.expires_at)
    .fetch_one(traced(&mut *conn))
    .await?;
    audit::record(conn, origin, &audit::created(&row)).await?;
    Ok(row)
}

/// Revokes a link (revoking a revoked link changes nothing), audited.
pub async fn revoke(conn: &mut PgConnection, id: Uuid, origin: &Origin) -> Result<ShareLinkRow> {
    let before: ShareLinkRow = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM share_links WHERE id = $1 FOR UPDATE"
    ))
    .bind(id)
    .fetch_optional(traced(&mut *conn))
    .await?
    .ok_or_else(|| Error::not_found(format!("share link {id} does not exist")))?;
    if before.revoked_at.is_some() {
        return Ok(before);
    }
    let after: ShareLinkRow = sqlx::query_as(&format!(
        "UPDATE share_links SET revoked_at = now(), revoked_by = $2 WHERE id = $1 \
         RETURNING {COLUMNS}"
    ))
    .bind(id)
    .bind(&origin.actor)
    .fetch_one(traced(&mut *conn))
    .await?;
    audit::record(conn, origin, &audit::changed(Some(&before), &after)).await?;
    Ok(after)
}

impl Store {
    /// The links of sessions, oldest first, revoked and expired ones included.
    pub async fn share_links_by_session(
        &self,
        sessions: &[Uuid],
    ) -> Result<HashMap<Uuid, Vec<Arc<ShareLinkRow>>>> {
        let rows: Vec<ShareLinkRow> = sqlx::query_as(&format!(
            "SELECT {COLUMNS} FROM share_links WHERE session_id = ANY($1) \
             ORDER BY session_id, created_at, id"
        ))
        .bind(sessions)
        .fetch_all(self.reader().await?.traced())
        .await?;
        let mut links: HashMap<Uuid, Vec<Arc<ShareLinkRow>>> = HashMap::new();
        for row in rows {
            links.entry(row.session_id).or_default().push(Arc::new(row));
        }
        Ok(links)
    }
}
