//! Idempotent creates: a client-supplied id is claimed together with a hash of the request.

use serde::Serialize;
use sha2::{Digest, Sha256};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::store::traced::traced;

/// Whether a create should happen.
enum Claim {
    /// First time this id is seen: create the record.
    New,
    /// The same request was made before: return the record it made.
    Retry,
}

/// Whether a create is a retry of one already made: with a client-supplied id, claims it for
/// `operation` with this exact `request` (a different request under it is a conflict), and
/// refuses a first claim of an id a record of `table` already has. Without one, a create is
/// always new.
pub async fn is_retry(
    conn: &mut PgConnection,
    client_id: Option<Uuid>,
    session_id: Uuid,
    (operation, table): (&str, &'static str),
    request: &impl Serialize,
) -> Result<bool> {
    let Some(id) = client_id else {
        return Ok(false);
    };
    match claim(conn, id, session_id, operation, request).await? {
        Claim::Retry => Ok(true),
        Claim::New => {
            refuse_taken_id(conn, table, id).await?;
            Ok(false)
        }
    }
}

/// Claims `id` for `operation` with this exact `request`. A concurrent retry waits on the
/// receipt's key until the first commits, then sees it.
async fn claim(
    conn: &mut PgConnection,
    id: Uuid,
    session_id: Uuid,
    operation: &str,
    request: &impl Serialize,
) -> Result<Claim> {
    let hash = request_hash(request)?;
    let inserted = sqlx::query(
        "INSERT INTO create_receipts (id, session_id, operation, request_hash) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(id)
    .bind(session_id)
    .bind(operation)
    .bind(hash.as_slice())
    .execute(traced(&mut *conn))
    .await?
    .rows_affected();
    if inserted == 1 {
        return Ok(Claim::New);
    }
    let (previous_operation, previous_hash): (String, Vec<u8>) =
        sqlx::query_as("SELECT operation, request_hash FROM create_receipts WHERE id = $1")
            .bind(id)
            .fetch_one(traced(conn))
            .await?;
    if previous_operation == operation && previous_hash == hash.as_slice() {
        Ok(Claim::Retry)
    } else {
        Err(Error::Conflict(format!(
            "id {id} was already used by a different request ({previous_operation})"
        )))
    }
}

/// What a receipt keeps of a request, to tell a retry from a different request under its id.
pub(crate) fn request_hash(request: &impl Serialize) -> Result<Vec<u8>> {
    let json = serde_json::to_vec(request).map_err(|e| Error::Internal(e.to_string()))?;
    Ok(Sha256::digest(json).to_vec())
}

/// Refuses a client-chosen `id` that a record of `table` already has, in any session. Keys
/// hold ids unique within a session (`docs/scale-out.md`); ids stay unique across sessions by
/// how they are made (UUIDv7) and, for the ids clients choose, by this look-up: the one look-up
/// by id alone a create makes, and only when the client chose the id (concurrent creates of
/// one id queue on its receipt first).
pub(crate) async fn refuse_taken_id(
    conn: &mut PgConnection,
    table: &'static str,
    id: Uuid,
) -> Result<()> {
    let taken: bool = sqlx::query_scalar(&format!(
        "SELECT EXISTS (SELECT FROM {table} WHERE id = $1)"
    ))
    .bind(id)
    .fetch_one(traced(conn))
    .await?;
    if taken {
        return Err(Error::Conflict(format!(
            "id {id} is already used by another record"
        )));
    }
    Ok(())
}
