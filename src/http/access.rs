//! Who may reach the API, checked at the edge before any GraphQL is parsed: the caller's
//! identity, the request's media type (no cross-site form or `no-cors` posts), the browser
//! origin of WebSocket and SSE requests, and — without authentication — the Host a browser
//! thinks it is talking to (no DNS rebinding).

use std::net::IpAddr;
use std::sync::Arc;

use anyhow::Context as _;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::Response;

use super::AppState;
use super::options::HttpOptions;
use super::refusal::error_response;
use super::serve::peer_of;
use super::throttle::Refusal;
use crate::api::runner::limits::figure;
use crate::auth::{AuthMode, Rejection};

/// Authenticates a GraphQL request before its body is read, and hands the handler its
/// [`Identity`] (a request extension). A plain GET without `query` (a browser asking for
/// GraphiQL) needs none.
pub async fn authenticated(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let wants_page = request.method() == Method::GET && !carries_operation(request.uri());
    if !wants_page {
        let client = peer_of(&request).map(|peer| peer.ip());
        match state.auth.authenticate(request.headers(), client).await {
            Ok(identity) => {
                request.extensions_mut().insert(identity);
            }
            Err(rejection) => return rejected(&rejection),
        }
    }
    next.run(request).await
}

/// Whether a GET asks for an operation: its query, or a persisted query's hash alone (in
/// `extensions`). Without either it asks for GraphiQL.
pub fn carries_operation(uri: &Uri) -> bool {
    uri.query()
        .unwrap_or_default()
        .split('&')
        .any(|pair| pair.starts_with("query=") || pair.starts_with("extensions="))
}

/// A 401 (with `WWW-Authenticate`), 403, 429 (with `Retry-After`) or 503, shaped as a GraphQL
/// response.
pub fn rejected(rejection: &Rejection) -> Response {
    let status = match rejection {
        Rejection::Unauthenticated => StatusCode::UNAUTHORIZED,
        Rejection::Forbidden(_) => StatusCode::FORBIDDEN,
        Rejection::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Rejection::Limited {
            message,
            retry_after_secs,
        } => {
            return Refusal::TooMany {
                retry_after_secs: *retry_after_secs,
                message: message.clone(),
            }
            .response();
        }
    };
    let mut response = error_response(status, rejection.code(), rejection.message());
    if status == StatusCode::UNAUTHORIZED {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}

/// A body over `--max-body-bytes` (refused by the body limit with a bare 413), as a GraphQL
/// error that names the limit.
pub fn body_too_large(max_body_bytes: usize, response: Response) -> Response {
    if response.status() != StatusCode::PAYLOAD_TOO_LARGE {
        return response;
    }
    error_response(
        StatusCode::PAYLOAD_TOO_LARGE,
        "PAYLOAD_TOO_LARGE",
        &format!(
            "the request body exceeds the limit of {} bytes (--max-body-bytes)",
            figure(max_body_bytes)
        ),
    )
}

/// POSTs must be `application/json`: every other type a browser may send cross-site without a
/// preflight (`text/plain`, forms, multipart) is refused with 415 before the body is read.
pub async fn require_json(request: Request, next: Next) -> Response {
    if request.method() == Method::POST && !is_json(request.headers()) {
        return error_response(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UNSUPPORTED_MEDIA_TYPE",
            "a GraphQL POST must have Content-Type: application/json",
        );
    }
    next.run(request).await
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

/// Which browser origins may open a stream (WebSocket, SSE): the server's own, and the ones
/// allowed for CORS.
pub struct OriginPolicy {
    /// The origin browsers see the server at, when configured (behind a TLS proxy).
    public_origin: Option<String>,
    /// `CASEFILE_CORS_ALLOW_ORIGINS`, normalized (`*` only with API tokens).
    allowed: Vec<String>,
    any: bool,
}

fn normalize_origin(origin: &str) -> String {
    origin.trim().trim_end_matches('/').to_ascii_lowercase()
}

impl OriginPolicy {
    pub fn new(options: &HttpOptions, mode: AuthMode) -> anyhow::Result<OriginPolicy> {
        let allowed: Vec<String> = options
            .cors_allow_origins
            .iter()
            .map(|o| normalize_origin(o))
            .filter(|o| !o.is_empty())
            .collect();
        // Browsers attach nothing to a request that an API token is needed for; without tokens,
        // `*` would let every site act with the visitor's access (a local casefile, SSO cookies).
        anyhow::ensure!(
            mode == AuthMode::Tokens || !allowed.iter().any(|o| o == "*"),
            "CASEFILE_CORS_ALLOW_ORIGINS=* is allowed only with --auth tokens: without tokens any \
             web page could use the visitor's access. List the origins instead"
        );
        let public_origin = options
            .public_origin
            .as_deref()
            .map(|origin| {
                let origin = normalize_origin(origin);
                anyhow::ensure!(
                    origin.starts_with("http://") || origin.starts_with("https://"),
                    "--public-origin must look like https://casefile.example.com, not {origin:?}"
                );
                Ok(origin)
            })
            .transpose()
            .context("invalid CASEFILE_PUBLIC_ORIGIN")?;
        Ok(OriginPolicy {
            public_origin,
            any: allowed.iter().any(|o| o == "*"),
            allowed,
        })
    }

    /// `--public-origin`, normalized.
    pub fn public_origin(&self) -> Option<&str> {
        self.public_origin.as_deref()
    }

    /// The origins CORS allows (normalized as the stream check compares them).
    pub fn cors_origins(&self) -> &[String] {
        &self.allowed
    }

    /// Whether a request to `uri` with these headers may open a stream. Requests without
    /// `Origin` are not from a browser page and pass.
    pub fn allows(&self, headers: &HeaderMap, uri: &Uri) -> bool {
        let Some(origin) = headers.get(header::ORIGIN) else {
            return true;
        };
        let Ok(origin) = origin.to_str().map(normalize_origin) else {
            return false;
        };
        if self.any || self.allowed.contains(&origin) {
            return true;
        }
        match &self.public_origin {
            Some(public) => &origin == public,
            None => host(headers, uri).is_some_and(|host| {
                let host = host.to_ascii_lowercase();
                origin == format!("http://{host}") || origin == format!("https://{host}")
            }),
        }
    }

    /// The response refusing a stream from another origin.
    pub fn refused() -> Response {
        error_response(
            StatusCode::FORBIDDEN,
            "FORBIDDEN",
            "cross-origin request refused: the Origin is neither this server's nor an allowed one \
             (CASEFILE_CORS_ALLOW_ORIGINS, CASEFILE_PUBLIC_ORIGIN)",
        )
    }
}

/// The Host a request names: its header, or (HTTP/2) its URI's authority.
fn host<'a>(headers: &'a HeaderMap, uri: &'a Uri) -> Option<&'a str> {
    match headers.get(header::HOST) {
        Some(value) => value.to_str().ok(),
        None => uri.authority().map(|a| a.as_str()),
    }
}

/// Without authentication, the Host names a browser may use: IP addresses, loopback names and
/// the configured ones. A DNS-rebinding page reaches the server under its own domain name, so
/// its requests carry that name and are refused.
#[derive(Clone)]
pub struct HostPolicy {
    extra: Arc<Vec<String>>,
}

impl HostPolicy {
    pub fn new(extra: &[String]) -> HostPolicy {
        HostPolicy {
            extra: Arc::new(
                extra
                    .iter()
                    .map(|h| h.trim().to_ascii_lowercase())
                    .filter(|h| !h.is_empty())
                    .collect(),
            ),
        }
    }

    fn allows(&self, host_header: &str) -> bool {
        let host = host_header.trim().to_ascii_lowercase();
        // Strip the port: `[::1]:8080`, `localhost:8080`, `127.0.0.1`.
        let name = if let Some(rest) = host.strip_prefix('[') {
            rest.split(']').next().unwrap_or_default().to_owned()
        } else {
            host.rsplit_once(':')
                .filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()))
                .map_or(host.clone(), |(name, _)| name.to_owned())
        };
        name == "localhost"
            || name.ends_with(".localhost")
            || name.parse::<IpAddr>().is_ok()
            || self.extra.iter().any(|h| *h == name || *h == host)
    }
}

/// Refuses requests whose Host is not an allowed one (403).
pub async fn check_host(
    State(policy): State<HostPolicy>,
    request: Request<Body>,
    next: Next,
) -> Response {
    let allowed = host(request.headers(), request.uri()).is_some_and(|host| policy.allows(host));
    if !allowed {
        return error_response(
            StatusCode::FORBIDDEN,
            "FORBIDDEN",
            "this Host is not allowed: without authentication casefile answers only to IP \
             addresses and loopback names (add others with --allowed-host)",
        );
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_addresses_loopback_names_and_configured_hosts_pass() {
        let policy = HostPolicy::new(&["casefile.internal".to_owned()]);
        for host in [
            "localhost",
            "localhost:8080",
            "app.localhost:3000",
            "127.0.0.1:8080",
            "127.0.0.2",
            "[::1]:8080",
            "10.0.0.1:8080",
            "[fd00::1]:8080",
            "casefile.internal:8080",
        ] {
            assert!(policy.allows(host), "{host}");
        }
        // Domain names are what a DNS-rebinding page arrives under.
        for host in [
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example",
            "localhost.",
        ] {
            assert!(!policy.allows(host), "{host}");
        }
    }

    #[test]
    fn origins() {
        let options = HttpOptions {
            cors_allow_origins: vec!["https://app.example.com".to_owned()],
            ..HttpOptions::default()
        };
        let policy = OriginPolicy::new(&options, AuthMode::None).unwrap();
        let headers = |origin: &str, host: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::ORIGIN, origin.parse().unwrap());
            h.insert(header::HOST, host.parse().unwrap());
            h
        };
        let uri = Uri::from_static("/graphql/ws");
        assert!(policy.allows(&headers("http://127.0.0.1:8080", "127.0.0.1:8080"), &uri));
        assert!(policy.allows(&headers("https://App.example.com/", "127.0.0.1:8080"), &uri));
        assert!(!policy.allows(&headers("https://evil.example", "127.0.0.1:8080"), &uri));
        assert!(
            policy.allows(&HeaderMap::new(), &uri),
            "no Origin: not a browser page"
        );

        let behind_proxy = OriginPolicy::new(
            &HttpOptions {
                public_origin: Some("https://casefile.example.com/".to_owned()),
                ..HttpOptions::default()
            },
            AuthMode::Proxy,
        )
        .unwrap();
        assert!(behind_proxy.allows(
            &headers("https://casefile.example.com", "10.0.0.5:8080"),
            &uri
        ));
        assert!(!behind_proxy.allows(&headers("http://10.0.0.5:8080", "10.0.0.5:8080"), &uri));
        // HTTP/2 has no Host header: the authority is the host.
        let mut h2 = HeaderMap::new();
        h2.insert(header::ORIGIN, "http://127.0.0.1:8080".parse().unwrap());
        let authority: Uri = "http://127.0.0.1:8080/graphql".parse().unwrap();
        assert!(policy.allows(&h2, &authority));

        let any = |mode| {
            OriginPolicy::new(
                &HttpOptions {
                    cors_allow_origins: vec!["*".to_owned()],
                    ..HttpOptions::default()
                },
                mode,
            )
        };
        assert!(any(AuthMode::Tokens).is_ok());
        assert!(
            any(AuthMode::None).is_err(),
            "any site could act as a local user"
        );
        assert!(
            any(AuthMode::Proxy).is_err(),
            "any site could act with SSO cookies"
        );
    }
}
