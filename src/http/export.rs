//! `GET /sessions/{id}/export`: the whole session as one JSON document
//! ([`crate::store::export`]), streamed as it is read, for a post-mortem or a BI tool. Readers
//! of the session may export it (a share link: its one session), checked as for its event
//! stream ([`SessionReader`]); `?ticket=` lets a download link carry the credential. A long
//! response, it counts against the caller's open streams.
//!
//! A failure after the first bytes cannot change the status: the response is cut off without
//! its last chunk, which every HTTP client reports as an incomplete body, never as a document.

use std::collections::HashMap;
use std::net::SocketAddr;

use axum::Extension;
use axum::body::Body;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse as _, Response};

use super::AppState;
use super::session_reader::{SessionReader, logged, refuse};
use super::throttle::Refusal;
use crate::error::Error;
use crate::observe::metrics::OpenStream;
use crate::store::export::DocumentWriter;

pub async fn export(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(params): Query<HashMap<String, String>>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let peer = peer.map(|Extension(ConnectInfo(peer))| peer);
    let reader = match SessionReader::of(&state, &id, &params, peer, &headers, &uri).await {
        Ok(reader) => reader,
        Err(refused) => return refused,
    };
    let share = match state.streams.take(&reader.caller) {
        Ok(share) => share,
        Err(full) => return Refusal::from(full).response(),
    };
    let session = reader.session;
    let (written, mut chunks) = DocumentWriter::spawn_session(&state.store, session);
    // The first chunk says whether there is a document: the session is read before anything
    // is written, so a missing one is a 404 and a failure a 503, with nothing sent yet.
    let first = match chunks.recv().await {
        Some(chunk) => chunk,
        None => {
            let err = match written.await {
                Ok(Err(err)) => err,
                Ok(Ok(_)) => Error::Internal("the export wrote nothing".to_owned()),
                Err(panicked) => Error::Internal(format!("the export panicked: {panicked}")),
            };
            let public = logged("an export", &err);
            let status = match public.code {
                "NOT_FOUND" => StatusCode::NOT_FOUND,
                _ => StatusCode::SERVICE_UNAVAILABLE,
            };
            return refuse(status, public.code, &public.message);
        }
    };
    let body = async_stream::stream! {
        let _open = (OpenStream::new("export"), share);
        yield Ok::<_, std::io::Error>(first);
        while let Some(chunk) = chunks.recv().await {
            yield Ok(chunk);
        }
        // The channel closed: the document is whole, or it failed part way.
        let failure = match written.await {
            Ok(Ok(_)) => None,
            Ok(Err(err)) => Some(logged("an export", &err).message),
            Err(panicked) => Some(format!("the export panicked: {panicked}")),
        };
        if let Some(message) = failure {
            yield Err(std::io::Error::other(message));
        }
    };
    let mut response = Body::from_stream(body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let disposition = format!("attachment; filename=\"casefile-session-{session}.json\"");
    headers.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::try_from(disposition).expect("a UUID is a valid header value"),
    );
    response
}
