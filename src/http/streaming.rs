//! Subscriptions over plain HTTP, for clients that cannot use WebSocket: GraphQL over
//! Server-Sent Events (the graphql-sse protocol, distinct connections mode) and multipart HTTP
//! (`multipart/mixed`, as Apollo clients speak it). A stream opened with a token ends, with an
//! `UNAUTHENTICATED` error, once that token is revoked or expires. Each caller may have
//! `--max-streams-per-identity` open; a query or mutation answered this way is bounded like a
//! request (see [`super::bounded`]).

use std::convert::Infallible;
use std::time::Duration;

use async_graphql::Request;
use async_graphql::http::create_multipart_mixed_stream;
use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt as _};

use super::AppState;
use super::bounded::operation_stream;
use super::serve::stopping;
use super::throttle::{Admission, Refusal};
use crate::api::runner::coded_error;
use crate::auth::Identity;
use crate::live::LiveOptions;
use crate::observe::metrics::OpenStream;

/// How often an idle stream carries a heartbeat, so proxies keep it open.
const HEARTBEAT: Duration = Duration::from_secs(15);

/// Runs the operation and streams each result as an SSE `next` event, then `complete`.
pub fn sse(
    state: &AppState,
    request: Request,
    identity: Identity,
    admission: &Admission,
) -> Response {
    let results = match results(state, request, identity, admission, "sse") {
        Ok(results) => results,
        Err(refusal) => return refusal.response(),
    };
    let events = results
        .map(|response| {
            let data = serde_json::to_string(&response).unwrap_or_else(|_| "{}".to_owned());
            Ok::<_, Infallible>(Event::default().event("next").data(data))
        })
        .chain(futures::stream::once(async {
            Ok(Event::default().event("complete").data(""))
        }));
    sse_response(events)
}

/// Server-Sent Events with a heartbeat while idle (so proxies keep the stream open), which
/// buffering proxies (nginx) are told to pass through as they come.
pub fn sse_response(
    events: impl Stream<Item = Result<Event, Infallible>> + Send + 'static,
) -> Response {
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(HEARTBEAT))
        .into_response();
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// Runs the operation and streams each result as a part of a `multipart/mixed` response.
pub fn multipart(
    state: &AppState,
    request: Request,
    identity: Identity,
    admission: &Admission,
) -> Response {
    let results = match results(state, request, identity, admission, "multipart") {
        Ok(results) => results,
        Err(refusal) => return refusal.response(),
    };
    let body = Body::from_stream(
        create_multipart_mixed_stream(results, HEARTBEAT).map(Ok::<_, std::io::Error>),
    );
    let mut response = Response::new(body);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("multipart/mixed; boundary=graphql"),
    );
    response
}

/// The operation's results as `identity`, until its credentials lapse; refused when its caller
/// has all the streams it may have open.
fn results(
    state: &AppState,
    request: Request,
    identity: Identity,
    admission: &Admission,
    transport: &'static str,
) -> Result<impl Stream<Item = async_graphql::Response> + Send + Unpin + 'static, Refusal> {
    let share = state.streams.take(&admission.caller)?;
    let caller = &admission.caller;
    let results = operation_stream(
        &state.runner,
        &state.throttle,
        request.data(identity.clone()).data(caller.clone()),
        None,
        caller,
        admission.take_place(),
    );
    let auth = state.auth.clone();
    let mut closing = state.closing.clone();
    let LiveOptions {
        stream_idle,
        stream_lifetime,
        ..
    } = state.live;
    Ok(Box::pin(async_stream::stream! {
        let _open = (OpenStream::new(transport), share);
        let lapsed = auth.until_lapsed(&identity);
        let ends = tokio::time::Instant::now() + stream_lifetime;
        let idle = tokio::time::sleep(stream_idle);
        futures::pin_mut!(lapsed, results, idle);
        loop {
            tokio::select! {
                // The server stops: end the stream (clients resume from their cursor).
                () = stopping(&mut closing) => break,
                next = results.next() => match next {
                    Some(response) => {
                        idle.as_mut().reset(tokio::time::Instant::now() + stream_idle);
                        yield response;
                    }
                    None => break,
                },
                () = &mut lapsed => {
                    yield closing_response(
                        "UNAUTHENTICATED",
                        "the credentials of this stream were revoked or expired",
                    );
                    break;
                }
                () = &mut idle => {
                    yield closing_response(
                        STREAM_EXPIRED,
                        &format!("nothing was delivered for {stream_idle:?}; subscribe again with your cursor"),
                    );
                    break;
                }
                () = tokio::time::sleep_until(ends) => {
                    yield closing_response(
                        STREAM_EXPIRED,
                        &format!("streams last at most {stream_lifetime:?}; subscribe again with your cursor"),
                    );
                    break;
                }
            }
        }
    }))
}

/// Code of the last result of a stream that was open too long, or idle too long.
pub const STREAM_EXPIRED: &str = "STREAM_EXPIRED";

/// The last result of a stream the server ends.
fn closing_response(code: &str, message: &str) -> async_graphql::Response {
    async_graphql::Response::from_errors(vec![coded_error(code, message)])
}
