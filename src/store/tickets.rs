//! Stream tickets (`event_stream_tickets`): a hash, the session it opens, the identity it
//! carries, and when it expires.

use chrono::{DateTime, Utc};
use sqlx::FromRow;
use uuid::Uuid;

use super::Store;
use super::audit::{self, Origin};
use super::traced::traced;
use crate::error::Result;
use crate::model::Role;

/// A ticket as stored.
#[derive(Debug, Clone, FromRow)]
pub struct TicketRow {
    pub session_id: Uuid,
    pub actor: Option<String>,
    pub role: Role,
    pub token_hash: Option<Vec<u8>>,
    pub from_proxy: bool,
    pub expires_at: DateTime<Utc>,
}

impl Store {
    /// Stores a ticket (and forgets expired ones), audited as asked for by `origin`.
    pub async fn create_ticket(
        &self,
        hash: &[u8],
        ticket: &TicketRow,
        origin: &Origin,
    ) -> Result<()> {
        let mut tx = self.begin().await?;
        sqlx::query(
            "WITH forgotten AS (DELETE FROM event_stream_tickets WHERE expires_at < now()) \
             INSERT INTO event_stream_tickets \
                 (ticket_hash, session_id, actor, role, token_hash, from_proxy, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(hash)
        .bind(ticket.session_id)
        .bind(&ticket.actor)
        .bind(ticket.role)
        .bind(&ticket.token_hash)
        .bind(ticket.from_proxy)
        .bind(ticket.expires_at)
        .execute(traced(&mut tx))
        .await?;
        audit::record(&mut tx, origin, &audit::created(ticket)).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The unexpired ticket with this hash.
    pub async fn ticket(&self, hash: &[u8]) -> Result<Option<TicketRow>> {
        Ok(sqlx::query_as(
            "SELECT session_id, actor, role, token_hash, from_proxy, expires_at \
             FROM event_stream_tickets WHERE ticket_hash = $1 AND expires_at > now()",
        )
        .bind(hash)
        .fetch_optional(self.reader().await?.traced())
        .await?)
    }
}
