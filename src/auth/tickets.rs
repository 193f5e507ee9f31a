//! Stream tickets: a browser's `EventSource` cannot send an `Authorization` header, so an
//! authenticated client mints a ticket for one session's plain event stream and puts it in the
//! stream's URL. A ticket is short-lived (it only has to be used to connect; a stream it opened
//! runs on), carries the identity that minted it (a revoked token ends its streams as it ends
//! the token's own), is stored only as a hash, and opens no other session.

use std::net::IpAddr;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{Authenticator, Identity, Rejection, tokens};
use crate::error::Result;
use crate::store::audit::Origin;
use crate::store::tickets::TicketRow;

/// How long a ticket can be used to connect.
pub const TICKET_LIFETIME: std::time::Duration = std::time::Duration::from_secs(60);

/// The prefix of a ticket's secret.
const TICKET_PREFIX: &str = "cfst_";

/// A new ticket.
pub struct Ticket {
    pub secret: String,
    pub expires_at: DateTime<Utc>,
}

impl Authenticator {
    /// A ticket to `session`'s event stream, as `identity`.
    pub async fn mint_ticket(
        &self,
        identity: &Identity,
        session: Uuid,
        origin: &Origin,
    ) -> Result<Ticket> {
        let secret = format!(
            "{TICKET_PREFIX}{}",
            tokens::generate_secret().trim_start_matches(tokens::SECRET_PREFIX)
        );
        let expires_at = Utc::now()
            + chrono::Duration::from_std(TICKET_LIFETIME).expect("a minute fits a duration");
        let row = TicketRow {
            session_id: session,
            actor: identity.actor.clone(),
            role: identity.role,
            token_hash: identity.token.map(|hash| hash.to_vec()),
            from_proxy: identity.from_proxy,
            expires_at,
        };
        self.store
            .create_ticket(&tokens::hash(&secret), &row, origin)
            .await?;
        Ok(Ticket { secret, expires_at })
    }

    /// The identity a ticket carries, when it is a live ticket to `session` (and the token it
    /// was minted with is still good); `Unauthenticated` when it is not. Every redemption is a
    /// look-up, counted against `client`'s address.
    pub async fn redeem_ticket(
        &self,
        secret: &str,
        session: Uuid,
        client: Option<IpAddr>,
    ) -> Result<Identity, Rejection> {
        if !secret.starts_with(TICKET_PREFIX) {
            return Err(Rejection::Unauthenticated);
        }
        self.may_look_up(client)?;
        let row = match self.store.ticket(&tokens::hash(secret)).await {
            Ok(Some(row)) if row.session_id == session => row,
            Ok(_) => return Err(Rejection::Unauthenticated),
            Err(err) => {
                tracing::error!("cannot check a stream ticket: {err}");
                return Err(Rejection::Unavailable);
            }
        };
        let (token, scope) = match row.token_hash {
            Some(hash) => {
                let hash: tokens::SecretHash =
                    hash.try_into().map_err(|_| Rejection::Unauthenticated)?;
                // Revoked or expired since: the ticket goes with it. A share link's ticket
                // keeps its one-session bound.
                match self.tokens.verify_hash(&hash).await {
                    Ok(Some(token)) => (Some(hash), token.scope),
                    Ok(None) => return Err(Rejection::Unauthenticated),
                    Err(err) => {
                        tracing::error!("cannot check a stream ticket's token: {err}");
                        return Err(Rejection::Unavailable);
                    }
                }
            }
            None => (None, None),
        };
        Ok(Identity {
            actor: row.actor,
            role: row.role,
            token,
            from_proxy: row.from_proxy,
            scope,
        })
    }
}
