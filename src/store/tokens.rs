//! API tokens: created, listed, revoked, and looked up by the SHA-256 of their secret.
//!
//! Every change that matters to verification sends `NOTIFY casefile_tokens` (a trigger, see
//! migration 0005), so every casefile process on the database drops the tokens it has cached.

use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgConnection, PgExecutor, PgPool};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::model::Role;
use crate::store::Store;
use crate::store::audit::{self, Origin};
use crate::store::traced::traced;
use crate::store::write::is_plain_name;

/// The channel every process listens on to forget cached tokens (the trigger's).
pub const CHANGES_CHANNEL: &str = "casefile_tokens";

/// A token as listed: never its secret.
#[derive(Debug, Clone, FromRow)]
pub struct ApiTokenRow {
    pub id: Uuid,
    pub name: String,
    pub role: Role,
    pub created_by: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub revoked_by: Option<String>,
}

const COLUMNS: &str = "id, name, role, created_by, created_at, expires_at, last_used_at, \
                       revoked_at, revoked_by";

/// A token to store.
#[derive(Debug, Clone)]
pub struct NewToken<'a> {
    pub name: &'a str,
    pub role: Role,
    pub secret_hash: &'a [u8; 32],
    pub expires_at: Option<DateTime<Utc>>,
    pub created_by: Option<&'a str>,
}

/// What a presented secret is, when it is an API token or a share link at all.
#[derive(Debug, Clone, FromRow)]
pub struct TokenGrant {
    pub id: Uuid,
    /// Who it is: `token:NAME`, or `share:ID` for a share link.
    pub actor: String,
    pub role: Role,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    /// The one session a share link opens (none: an API token).
    pub session_id: Option<Uuid>,
}

/// Token names: letters, digits, `.`, `_` and `-`, starting with a letter or digit, at most 100.
pub fn check_name(name: &str) -> Result<()> {
    if is_plain_name(name, 100, &['.', '_', '-']) {
        Ok(())
    } else {
        Err(Error::bad_input(format!(
            "token name {name:?} must be 1–100 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )))
    }
}

pub async fn create(
    conn: &mut PgConnection,
    new: &NewToken<'_>,
    origin: &Origin,
) -> Result<ApiTokenRow> {
    check_name(new.name)?;
    let row = sqlx::query_as::<_, ApiTokenRow>(&format!(
        "INSERT INTO api_tokens (id, name, role, secret_hash, expires_at, created_by) \
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (name) DO NOTHING RETURNING {COLUMNS}"
    ))
    .bind(Uuid::now_v7())
    .bind(new.name)
    .bind(new.role)
    .bind(&new.secret_hash[..])
    .bind(new.expires_at)
    .bind(new.created_by)
    .fetch_optional(traced(&mut *conn))
    .await?
    .ok_or_else(|| {
        Error::Conflict(format!(
            "a token named {:?} already exists (names are never reused, revoked ones included)",
            new.name
        ))
    })?;
    audit::record(conn, origin, &audit::created(&row)).await?;
    Ok(row)
}

/// Every token, oldest first; revoked ones only when asked for.
pub async fn list(
    executor: impl PgExecutor<'_>,
    include_revoked: bool,
) -> Result<Vec<ApiTokenRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM api_tokens WHERE $1 OR revoked_at IS NULL ORDER BY created_at, id"
    ))
    .bind(include_revoked)
    .fetch_all(executor)
    .await?)
}

impl Store {
    /// Every token, oldest first (revoked ones too, if asked), read on the operation's own
    /// connection.
    pub async fn tokens(&self, include_revoked: bool) -> Result<Vec<ApiTokenRow>> {
        list(self.reader().await?.traced(), include_revoked).await
    }
}

/// Revokes a token by name (revoking a revoked token changes nothing).
pub async fn revoke(conn: &mut PgConnection, name: &str, origin: &Origin) -> Result<ApiTokenRow> {
    check_name(name)?;
    let revoked: Option<ApiTokenRow> = sqlx::query_as(&format!(
        "UPDATE api_tokens SET revoked_at = now(), revoked_by = $2 \
         WHERE name = $1 AND revoked_at IS NULL RETURNING {COLUMNS}"
    ))
    .bind(name)
    .bind(&origin.actor)
    .fetch_optional(traced(&mut *conn))
    .await?;
    if let Some(after) = revoked {
        // Before, it was the same token, not revoked.
        let before = ApiTokenRow {
            revoked_at: None,
            revoked_by: None,
            ..after.clone()
        };
        audit::record(conn, origin, &audit::changed(Some(&before), &after)).await?;
        return Ok(after);
    }
    sqlx::query_as::<_, ApiTokenRow>(&format!("SELECT {COLUMNS} FROM api_tokens WHERE name = $1"))
        .bind(name)
        .fetch_optional(traced(conn))
        .await?
        .ok_or_else(|| Error::not_found(format!("no token is named {name:?}")))
}

/// The token or share link whose secret hashes to `hash`, revoked or expired ones included.
pub async fn find(pool: &PgPool, hash: &[u8; 32]) -> Result<Option<TokenGrant>> {
    Ok(sqlx::query_as(
        "SELECT id, 'token:' || name AS actor, role, expires_at, revoked_at, \
             NULL::uuid AS session_id \
         FROM api_tokens WHERE secret_hash = $1 \
         UNION ALL \
         SELECT id, 'share:' || id, 'reader', expires_at, revoked_at, session_id \
         FROM share_links WHERE secret_hash = $1",
    )
    .bind(&hash[..])
    .fetch_optional(pool)
    .await?)
}

/// Notes that a token or share link was used (callers do this at most once a minute per
/// secret; so does the statement, across processes). Ids are UUIDs: the one it names is in one
/// of the two tables.
pub async fn touch(pool: &PgPool, id: Uuid) -> Result<()> {
    sqlx::query(
        "WITH link AS (UPDATE share_links SET last_used_at = now() WHERE id = $1 \
               AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')) \
         UPDATE api_tokens SET last_used_at = now() WHERE id = $1 \
           AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')",
    )
    .bind(id)
    .execute(pool)
    .await?;
    Ok(())
}

/// What [`create_first_admin`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum FirstAdmin {
    /// A usable admin token exists already.
    Exists,
    /// Stored under this name.
    Created(String),
    /// The secret belongs to a token that can no longer be used (revoked, expired, or not an
    /// admin): it must not come back as a new admin.
    SecretSpent(String),
}

/// Stores `hash` as an admin token named `name` (or `name-2`, `name-3`… when taken) unless an
/// admin token that is neither revoked nor expired exists. Several processes starting at once
/// queue on an advisory lock, so only one of them creates it.
pub async fn create_first_admin(pool: &PgPool, name: &str, hash: &[u8; 32]) -> Result<FirstAdmin> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('casefile_first_admin'))")
        .execute(traced(&mut tx))
        .await?;
    let exists: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM api_tokens WHERE role = 'admin' AND revoked_at IS NULL \
           AND (expires_at IS NULL OR expires_at > now()))",
    )
    .fetch_one(traced(&mut tx))
    .await?;
    if exists {
        return Ok(FirstAdmin::Exists);
    }
    let spent: Option<String> =
        sqlx::query_scalar("SELECT name FROM api_tokens WHERE secret_hash = $1")
            .bind(&hash[..])
            .fetch_optional(traced(&mut tx))
            .await?;
    if let Some(spent) = spent {
        return Ok(FirstAdmin::SecretSpent(spent));
    }
    let taken: Vec<String> =
        sqlx::query_scalar("SELECT name FROM api_tokens WHERE name = $1 OR name LIKE $1 || '-%'")
            .bind(name)
            .fetch_all(traced(&mut tx))
            .await?;
    let name = std::iter::once(name.to_owned())
        .chain((2..).map(|n| format!("{name}-{n}")))
        .find(|candidate| !taken.contains(candidate))
        .expect("an unused name");
    let new = NewToken {
        name: &name,
        role: Role::Admin,
        secret_hash: hash,
        expires_at: None,
        created_by: None,
    };
    // Audited as a creation by no caller, the server's own at start.
    let origin = Origin {
        action: "createApiToken".to_owned(),
        ..Origin::default()
    };
    create(&mut tx, &new, &origin).await?;
    tx.commit().await?;
    Ok(FirstAdmin::Created(name))
}
