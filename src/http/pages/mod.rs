//! The pages casefile serves to browsers: GraphiQL at `/`, for people exploring the API, and
//! the read-only page a share link opens at `/share/{session}`. Every file they load is
//! compiled into the server (under `/assets/`), so they work where there is no internet, under
//! a Content-Security-Policy that lets them load nothing from anywhere else.

mod assets;
mod graphiql;
mod share;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use axum::routing::get;

use super::AppState;
use super::observed::plain_host;
use crate::auth::AuthMode;
pub use graphiql::EXAMPLE_QUERY;

/// The pages and their files.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(graphiql_page))
        .route("/share/{session}", get(share_page))
        .route("/assets/{hash}/{name}", get(asset))
}

async fn graphiql_page(State(state): State<AppState>, headers: HeaderMap) -> Response {
    state.graphiql.response(&headers)
}

/// The same page for every session: the script reads the session from the path and the
/// secret from the fragment, which browsers never send.
async fn share_page(
    State(state): State<AppState>,
    Path(session): Path<String>,
    headers: HeaderMap,
) -> Response {
    if uuid::Uuid::parse_str(&session).is_err() {
        return StatusCode::NOT_FOUND.into_response();
    }
    state.share.response(&headers)
}

/// A page, rendered once, with its ETag and Content-Security-Policy.
#[derive(Clone)]
pub struct Page {
    html: Bytes,
    etag: HeaderValue,
    policy: &'static str,
}

impl Page {
    /// `template` with each `{{file}}` replaced by that file's current URL.
    fn new(template: &str, policy: &'static str) -> Page {
        let mut html = template.to_owned();
        for asset in assets::all() {
            html = html.replace(&format!("{{{{{}}}}}", asset.name), &asset.url());
        }
        Page {
            etag: assets::strong_etag(&assets::content_hash(html.as_bytes())),
            html: Bytes::from(html),
            policy,
        }
    }

    /// GraphiQL, for a server whose authentication is `mode`.
    pub fn graphiql(mode: AuthMode) -> Page {
        graphiql::page(mode)
    }

    /// The page a share link opens.
    pub fn share() -> Page {
        share::page()
    }

    /// The page, or 304 when the browser's copy is current. It names the files' current URLs
    /// (and GraphiQL's, this server's settings), so browsers revalidate it every time. It
    /// sends no `Referer` anywhere: a share link's page is its secret's.
    pub fn response(&self, request: &HeaderMap) -> Response {
        let mut headers = HeaderMap::new();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            content_security_policy(self.policy, request),
        );
        headers.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        );
        conditional(
            request,
            &self.etag,
            headers,
            "text/html; charset=utf-8",
            self.html.clone(),
        )
    }
}

async fn asset(Path((hash, name)): Path<(String, String)>, headers: HeaderMap) -> Response {
    assets::response(&hash, &name, &headers)
}

/// `body` as `content_type` with `headers`, or 304 without them when the browser's copy
/// (`If-None-Match`) is this one.
fn conditional(
    request: &HeaderMap,
    etag: &HeaderValue,
    mut headers: HeaderMap,
    content_type: &'static str,
    body: Bytes,
) -> Response {
    headers.insert(header::ETAG, etag.clone());
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    let current = request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|tag| tag.trim())
        .any(|tag| tag == "*" || tag.trim_start_matches("W/") == etag);
    if current {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    (headers, body).into_response()
}

/// A page's Content-Security-Policy: `policy`, and where the page may connect: this server, over
/// HTTP and WebSocket. CSP Level 3 browsers count its ws: and wss: URLs as `'self'`; older ones
/// need them spelled out, from `Host` when it is a plain name or address (HTTP/2 requests have
/// none: `'self'` alone).
fn content_security_policy(policy: &str, request: &HeaderMap) -> HeaderValue {
    let host = request
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .and_then(plain_host);
    let connect = match host {
        Some(host) => format!("connect-src 'self' ws://{host} wss://{host}"),
        None => "connect-src 'self'".to_owned(),
    };
    HeaderValue::try_from(format!("{policy}; {connect}")).expect("checked characters only")
}
