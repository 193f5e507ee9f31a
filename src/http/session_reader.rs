//! Who reads a session on its plain HTTP routes (`GET /sessions/{id}/events`,
//! `GET /sessions/{id}/export`), checked the same way for both: not from another site's page,
//! credentials from the `Authorization` header or `?ticket=` from the `createEventStreamTicket`
//! mutation (an `EventSource` or a download link cannot send headers), within the caller's
//! rate, a reader of that session (a share link: of its one session). Each refusal is a status
//! and a GraphQL-shaped error body.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use uuid::Uuid;

use super::AppState;
use super::access::OriginPolicy;
use crate::api::ids::{NodeType, decode_as};
use crate::auth::{Authenticator, Caller, Identity, Rejection};
use crate::error::{Error, Log, Public};
use crate::http::access::rejected;
use crate::model::Role;

/// A caller who may read `session`.
pub struct SessionReader {
    pub session: Uuid,
    pub identity: Identity,
    pub caller: Caller,
}

impl SessionReader {
    /// The caller of this request, if it may read the session `id` names; else the response
    /// that refuses it.
    pub async fn of(
        state: &AppState,
        id: &str,
        params: &HashMap<String, String>,
        peer: Option<SocketAddr>,
        headers: &HeaderMap,
        uri: &Uri,
    ) -> Result<SessionReader, Response> {
        // A page on another site must not read a session with the browser's credentials.
        if !state.origins.allows(headers, uri) {
            return Err(OriginPolicy::refused());
        }
        let Ok(session) = decode_as(NodeType::Session, id) else {
            return Err(bad_request("not a session ID"));
        };
        let client = peer.map(|peer| peer.ip());
        let identity = identify(&state.auth, params, headers, session, client).await?;
        let caller = Caller::of(&identity, peer);
        if let Err(refusal) = state.throttle.check_rate(&caller) {
            return Err(refusal.response());
        }
        if identity.role < Role::Reader {
            return Err(refuse(
                StatusCode::FORBIDDEN,
                "FORBIDDEN",
                "reading needs the READER role",
            ));
        }
        if !identity.may_read(session) {
            return Err(refuse(
                StatusCode::FORBIDDEN,
                "FORBIDDEN",
                "a share link opens its one session only",
            ));
        }
        Ok(SessionReader {
            session,
            identity,
            caller,
        })
    }
}

/// A refusal: a status and a GraphQL-shaped error body.
pub fn refuse(status: StatusCode, code: &str, message: &str) -> Response {
    let body = json!({ "errors": [{ "message": message, "extensions": { "code": code } }] });
    (status, axum::Json(body)).into_response()
}

pub fn bad_request(message: &str) -> Response {
    refuse(StatusCode::BAD_REQUEST, "BAD_USER_INPUT", message)
}

/// What the client is told of an error (logged when it is ours; `what` names the route).
pub fn logged(what: &str, err: &Error) -> Public {
    let public = err.public();
    if public.log == Log::Error {
        tracing::error!("{what} failed: {err}");
    }
    public
}

/// The caller's identity, from its ticket when it gives one (a ticket is for one session), else
/// from its headers; or the response that refuses it.
async fn identify(
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
