//! A session's event stream as plain Server-Sent Events, for clients with no GraphQL library (a
//! browser's `EventSource`, curl): `GET /sessions/{id}/events`, one seed 004 JSON envelope per
//! event, its `id:` the event's sequence, so a reconnecting `EventSource` resumes by itself
//! (`Last-Event-ID`; or `?after=N`). Credentials: the `Authorization` header, or `?ticket=` from
//! the `createEventStreamTicket` mutation (an `EventSource` cannot send headers).
//!
//! Query parameters: `after`, `ticket`, `categories` (comma-separated, e.g. `llm,lifecycle`),
//! `agents` and `stages` (comma-separated IDs), `topology=true` (start with the agent tree).
//! Who may read it is checked as for the session's export ([`SessionReader`]); the parameters
//! are in [`params`], the JSON (the shared typed event's SSE rendering) in [`render`].
//!
//! Like the GraphQL streams: refused from another site's page (403), counted against its
//! caller's rate, streams and subscriptions (429), and its credentials are looked up only
//! within its address's rate of look-ups.

mod params;
mod render;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;

use axum::Extension;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use futures::StreamExt as _;

use super::AppState;
use super::serve::stopping;
use super::session_reader::{SessionReader, bad_request, logged, refuse};
use super::streaming::sse_response;
use super::throttle::Refusal;
use crate::error::Error;
use crate::live::NoSlot;
use crate::live::events;
use crate::observe::metrics::OpenStream;
use params::Params;
use render::{failure, to_event};

/// `GET /sessions/{id}/events`.
pub async fn stream(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(params): Query<HashMap<String, String>>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let peer = peer.map(|Extension(ConnectInfo(peer))| peer);
    let SessionReader {
        session,
        identity,
        caller,
    } = match SessionReader::of(&state, &id, &params, peer, &headers, &uri).await {
        Ok(reader) => reader,
        Err(refused) => return refused,
    };
    let Params {
        after,
        filter,
        topology,
    } = match Params::of(&params, &headers) {
        Ok(params) => params,
        Err(message) => return bad_request(&message),
    };
    let share = match state.streams.take(&caller) {
        Ok(share) => share,
        Err(full) => return Refusal::from(full).response(),
    };
    let slot = match state.slots.take("events", &caller) {
        Ok(slot) => slot,
        Err(refused) => {
            // The caller's own share is its doing; the process's is not.
            let status = match refused {
                NoSlot::CallerFull(_) => StatusCode::TOO_MANY_REQUESTS,
                NoSlot::ProcessFull(_) => StatusCode::SERVICE_UNAVAILABLE,
            };
            let public = Error::from(refused).public();
            return refuse(status, public.code, &public.message);
        }
    };
    // The session is looked up once the caller holds its places: a caller at its caps costs
    // no statement.
    match state.store.membership(session, None, None).await {
        Ok(found) if found.session_exists => {}
        Ok(_) => {
            return refuse(
                StatusCode::NOT_FOUND,
                "NOT_FOUND",
                &format!("session {session} does not exist"),
            );
        }
        Err(err) => {
            let public = logged("the event stream", &err);
            return refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                public.code,
                &public.message,
            );
        }
    }
    let envelopes = events::stream(
        state.store.clone(),
        state.hub.clone(),
        session,
        after,
        filter,
        topology,
    );
    let auth = state.auth.clone();
    let mut closing = state.closing.clone();
    let lifetime = state.live.stream_lifetime;
    let body = async_stream::stream! {
        let _open = (OpenStream::new("events"), share, slot);
        let lapsed = auth.until_lapsed(&identity);
        let ends = tokio::time::sleep(lifetime);
        futures::pin_mut!(envelopes, lapsed, ends);
        loop {
            tokio::select! {
                // The server stops, or the stream has lived its time: the client reconnects,
                // resuming from the last id it received.
                () = stopping(&mut closing) => break,
                () = &mut ends => break,
                () = &mut lapsed => {
                    yield Ok::<_, Infallible>(failure("UNAUTHENTICATED", "the credentials of this stream were revoked or expired"));
                    break;
                }
                next = envelopes.next() => match next {
                    Some(Ok(envelope)) => yield Ok(to_event(&envelope)),
                    Some(Err(err)) => {
                        let public = logged("the event stream", &err);
                        yield Ok(failure(public.code, &public.message));
                        break;
                    }
                    None => break,
                },
            }
        }
    };
    sse_response(body)
}
