//! Who opens the stream: the `Authorization` header, or `?ticket=` from the
//! `createEventStreamTicket` mutation (an `EventSource` cannot send headers).

use std::collections::HashMap;
use std::net::IpAddr;

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use uuid::Uuid;

use super::refuse;
use crate::auth::{Authenticator, Identity, Rejection};
use crate::http::access::rejected;

/// The caller's identity, from its ticket when it gives one (a ticket is for one session), else
/// from its headers; or the response that refuses it.
pub(super) async fn identify(
    auth: &Authenticator,
    params: &HashMap<String, String>,
    headers: &HeaderMap,
    session: Uuid,
    client: Option<IpAddr>,
) -> Result<Identity, Response> {
    match params.get("ticket") {
        Some(ticket) => match auth.redeem_ticket(ticket, session, client).await {
            Ok(identity) => Ok(identity),
            Err(Rejection::Unauthenticated) => Err(refuse(
                StatusCode::UNAUTHORIZED,
                "UNAUTHENTICATED",
                "the stream ticket is unknown, expired, or for another session",
            )),
            Err(rejection) => Err(rejected(&rejection)),
        },
        None => auth
            .authenticate(headers, client)
            .await
            .map_err(|rejection| rejected(&rejection)),
    }
}
