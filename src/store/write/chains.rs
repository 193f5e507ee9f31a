//! Chain versions: each registered once per name and version and never changed (a session ran
//! what its version held then, so it holds it for good); an admin may deprecate one, which
//! hides it from the default list and changes nothing for the sessions that ran it.

use chrono::{DateTime, Utc};
use serde_json::Value as Json;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{check_json, check_name, check_required, id_taken, is_plain_name, limits};
use crate::error::{Error, Result};
use crate::store::audit::{self, Origin};
use crate::store::traced::traced;
use crate::store::{ChainKey, ChainRow, Record as _};

/// A chain version to register.
#[derive(Debug, Clone)]
pub struct NewChain {
    pub key: ChainKey,
    pub definition: Json,
    pub created_by: Option<String>,
}

impl NewChain {
    pub(crate) fn check(&self) -> Result<()> {
        check_key("", &self.key)?;
        check_definition(&self.definition)
    }
}

/// Checks a chain version's name (as `chainId`: 1–200 characters) and version (1–100 letters,
/// digits, `.`, `_`, `+` or `-`, starting with a letter or digit: `1.4.0`, `v2`,
/// `2024-06-01+hotfix.1`, a commit hash); `prefix` says where they sit in the input.
pub(crate) fn check_key(prefix: &str, key: &ChainKey) -> Result<()> {
    check_name(&format!("{prefix}name"), &key.name)?;
    if !is_plain_name(&key.version, limits::CHAIN_VERSION, &['.', '_', '+', '-']) {
        return Err(Error::bad_input(format!(
            "`{prefix}version` must be 1–{} letters, digits, '.', '_', '+' or '-', starting \
             with a letter or digit",
            limits::CHAIN_VERSION
        )));
    }
    Ok(())
}

/// A definition is a JSON object (at most 64 KiB) whose `stages` lists the chain's stages in
/// order, at least one, each an object with a `name`. What else it holds is the chain's own.
fn check_definition(definition: &Json) -> Result<()> {
    check_json("definition", definition, limits::CHAIN_DEFINITION)?;
    let stages = definition
        .as_object()
        .ok_or_else(|| Error::bad_input("`definition` must be a JSON object"))?
        .get("stages")
        .and_then(Json::as_array)
        .filter(|stages| !stages.is_empty())
        .ok_or_else(|| {
            Error::bad_input(
                "`definition.stages` must be a non-empty array: the chain's stages, in order",
            )
        })?;
    for (i, stage) in stages.iter().enumerate() {
        let name = stage.get("name").and_then(Json::as_str).ok_or_else(|| {
            Error::bad_input(format!(
                "`definition.stages[{i}]` must be an object with a `name` (a string)"
            ))
        })?;
        check_required(&format!("definition.stages[{i}].name"), name, limits::NAME)?;
    }
    Ok(())
}

/// A session's overrides of its chain version's settings: a JSON object of at most 16 KiB.
pub(crate) fn check_overrides(overrides: &Json) -> Result<()> {
    check_json("chainOverrides", overrides, limits::CHAIN_OVERRIDES)?;
    if !overrides.is_object() {
        return Err(Error::bad_input("`chainOverrides` must be a JSON object"));
    }
    Ok(())
}

/// Registers a chain version. Registering it again with the same definition (equal as `jsonb`:
/// key order, whitespace, duplicate keys and how a number is written do not matter) returns it
/// and writes nothing; with another definition it is a conflict: a version never changes.
/// A new version is audited.
pub async fn register(
    conn: &mut PgConnection,
    new: &NewChain,
    origin: &Origin,
) -> Result<ChainRow> {
    let (row, inserted) = insert_or_match(conn, new, Uuid::now_v7(), None).await?;
    if inserted {
        audit::record(conn, origin, &audit::created(&row)).await?;
    }
    Ok(row)
}

/// Registers a chain version of restored records with the id and registration time it had
/// where it was recorded; otherwise as [`register`] (it may be registered here already).
/// Whether it was new.
pub(crate) async fn register_as(
    conn: &mut PgConnection,
    new: &NewChain,
    was: &ChainRow,
) -> Result<bool> {
    Ok(insert_or_match(conn, new, was.id, Some(was.created_at))
        .await?
        .1)
}

/// Inserts the version unless it is registered (`created_at`: now unless given); when it is,
/// returns it if the definitions are equal, and refuses it otherwise. Whether it inserted it.
async fn insert_or_match(
    conn: &mut PgConnection,
    new: &NewChain,
    id: Uuid,
    created_at: Option<DateTime<Utc>>,
) -> Result<(ChainRow, bool)> {
    new.check()?;
    let inserted: Option<ChainRow> = sqlx::query_as(&format!(
        "INSERT INTO chains (id, name, version, definition, created_by, created_at) \
         VALUES ($1, $2, $3, $4, $5, coalesce($6, now())) \
         ON CONFLICT (name, version) DO NOTHING RETURNING {}",
        ChainRow::COLUMNS
    ))
    .bind(id)
    .bind(&new.key.name)
    .bind(&new.key.version)
    .bind(&new.definition)
    .bind(&new.created_by)
    .bind(created_at)
    .fetch_optional(traced(&mut *conn))
    .await
    .map_err(|e| id_taken(e, id))?;
    if let Some(row) = inserted {
        return Ok((row, true));
    }
    // Registered before (or by a concurrent request, which the insert waited for: this later
    // statement sees it committed).
    #[derive(sqlx::FromRow)]
    struct Registered {
        same: bool,
        #[sqlx(flatten)]
        row: ChainRow,
    }
    let registered: Registered = sqlx::query_as(&format!(
        "SELECT definition = $3 AS same, {} FROM chains WHERE name = $1 AND version = $2",
        ChainRow::COLUMNS
    ))
    .bind(&new.key.name)
    .bind(&new.key.version)
    .bind(&new.definition)
    .fetch_one(traced(conn))
    .await?;
    if !registered.same {
        return Err(Error::Conflict(format!(
            "chain {} version {} is already registered with another definition; a version \
             never changes: register the new definition as a new version",
            new.key.name, new.key.version
        )));
    }
    Ok((registered.row, false))
}

/// Deprecates a chain version (the caller of `origin` did it), audited. Deprecating it again
/// changes nothing and records nothing.
pub async fn deprecate(
    conn: &mut PgConnection,
    key: &ChainKey,
    origin: &Origin,
) -> Result<ChainRow> {
    check_key("", key)?;
    let before: ChainRow = sqlx::query_as(&format!(
        "SELECT {} FROM chains WHERE name = $1 AND version = $2 FOR UPDATE",
        ChainRow::COLUMNS
    ))
    .bind(&key.name)
    .bind(&key.version)
    .fetch_optional(traced(&mut *conn))
    .await?
    .ok_or_else(|| not_registered(key))?;
    if before.deprecated_at.is_some() {
        return Ok(before);
    }
    let after: ChainRow = sqlx::query_as(&format!(
        "UPDATE chains SET deprecated_at = now(), deprecated_by = $2 WHERE id = $1 RETURNING {}",
        ChainRow::COLUMNS
    ))
    .bind(before.id)
    .bind(&origin.actor)
    .fetch_one(traced(&mut *conn))
    .await?;
    audit::record(conn, origin, &audit::changed(Some(&before), &after)).await?;
    Ok(after)
}

/// The error of a chain version that is not registered.
pub(crate) fn not_registered(key: &ChainKey) -> Error {
    Error::not_found(format!(
        "chain {} version {} is not registered (registerChain registers it)",
        key.name, key.version
    ))
}
