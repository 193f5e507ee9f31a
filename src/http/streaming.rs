//! Subscriptions over plain HTTP, for clients that cannot use WebSocket: GraphQL over
//! Server-Sent Events (the graphql-sse protocol, distinct connections mode) and multipart HTTP
//! (`multipart/mixed`, as Apollo clients speak it).

use std::convert::Infallible;
use std::time::Duration;

use async_graphql::Request;
use async_graphql::http::create_multipart_mixed_stream;
use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;

use super::AppState;
use crate::api::Loaders;

/// How often an idle stream carries a heartbeat, so proxies keep it open.
const HEARTBEAT: Duration = Duration::from_secs(15);

/// Runs the operation and streams each result as an SSE `next` event, then `complete`.
pub fn sse(state: &AppState, request: Request) -> Response {
    let results = state
        .schema
        .execute_stream(request.data(Loaders::uncached(&state.store)));
    let events = results
        .map(|response| {
            let data = serde_json::to_string(&response).unwrap_or_else(|_| "{}".to_owned());
            Ok::<_, Infallible>(Event::default().event("next").data(data))
        })
        .chain(futures::stream::once(async {
            Ok(Event::default().event("complete").data(""))
        }));
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(HEARTBEAT))
        .into_response();
    // Tell buffering proxies (nginx) to pass events through as they come.
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// Runs the operation and streams each result as a part of a `multipart/mixed` response.
pub fn multipart(state: &AppState, request: Request) -> Response {
    let results = state
        .schema
        .execute_stream(request.data(Loaders::uncached(&state.store)));
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
