//! The page: GraphiQL's files, and this server's settings as JSON data for `start.js`.

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::Response;
use serde_json::json;

use super::{EXAMPLE_QUERY, assets};
use crate::auth::AuthMode;

const TEMPLATE: &str = include_str!("page.html");

/// Loads nothing from anywhere but this server. Styles: GraphiQL's and casefile's files (React
/// and CodeMirror set styles through the DOM, which a policy does not restrict), and the one
/// `<style>` GraphiQL's dialogs add while open (react-remove-scroll-bar's; its text only varies
/// with the page's scroll bar, which this page never has). Fonts and images: the data URLs
/// inside GraphiQL's CSS.
const POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self' 'sha256-nzTgYzXYDNe6BAHiiI7NNlfK8n/auuOAhh2t92YvuXo='; \
    font-src data:; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The rendered page with its ETag.
#[derive(Clone)]
pub struct Page {
    html: Bytes,
    etag: HeaderValue,
}

impl Page {
    /// The page for a server whose authentication is `mode`: with API tokens, the headers
    /// editor starts with an `Authorization` header to fill in (behind an SSO proxy, the proxy
    /// signs people in).
    pub fn new(mode: AuthMode) -> Page {
        let headers = match mode {
            AuthMode::None | AuthMode::Proxy => "",
            AuthMode::Tokens => "{\n  \"Authorization\": \"Bearer <your casefile API token>\"\n}",
        };
        let config = json!({
            "endpoint": "/graphql",
            "subscriptionEndpoint": "/graphql/ws",
            "defaultQuery": EXAMPLE_QUERY,
            "defaultHeaders": headers,
        });
        // Inside <script>, "</script>" would end the JSON: no '<' at all ('<' only occurs in
        // JSON strings, where \u003c means the same).
        let config = config.to_string().replace('<', "\\u003c");
        let mut html = TEMPLATE.replace("{{config}}", &config);
        for asset in assets::all() {
            html = html.replace(&format!("{{{{{}}}}}", asset.name), &asset.url());
        }
        Page {
            etag: assets::strong_etag(&assets::content_hash(html.as_bytes())),
            html: Bytes::from(html),
        }
    }

    /// The page, or 304 when the browser's copy is current. It names the files' current URLs
    /// and this server's settings, so browsers revalidate it every time.
    pub fn response(&self, request: &HeaderMap) -> Response {
        let mut headers = HeaderMap::new();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        headers.insert(header::CONTENT_SECURITY_POLICY, policy(request));
        super::conditional(
            request,
            &self.etag,
            headers,
            "text/html; charset=utf-8",
            self.html.clone(),
        )
    }
}

/// [`POLICY`], and where the page may connect: this server, over HTTP and WebSocket. CSP Level 3
/// browsers count its ws: and wss: URLs as `'self'`; older ones need them spelled out, from
/// `Host` when it is a plain name or address (HTTP/2 requests have none: `'self'` alone).
fn policy(request: &HeaderMap) -> HeaderValue {
    let host = request
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| {
            !h.is_empty()
                && h.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b))
        });
    let connect = match host {
        Some(host) => format!("connect-src 'self' ws://{host} wss://{host}"),
        None => "connect-src 'self'".to_owned(),
    };
    HeaderValue::try_from(format!("{POLICY}; {connect}")).expect("checked characters only")
}
