//! Every HTTP request, seen from outside: its request id (the client's `x-request-id`, or a new
//! one, echoed back), its place in the caller's trace (`traceparent`), a span around it, and
//! its count and latency in the metrics.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::header::{HOST, USER_AGENT};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::Response;
use opentelemetry::propagation::Extractor;
use opentelemetry::trace::TraceContextExt as _;
use tracing::Instrument as _;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use super::serve::peer_of;
use crate::observe::metrics::{HTTP_REQUEST_DURATION, HTTP_REQUESTS};
use crate::observe::request::RequestInfo;

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
/// Longest client-chosen request id kept; a longer one (or one with other than visible ASCII)
/// is replaced, so log lines stay bounded.
const MAX_REQUEST_ID_LEN: usize = 128;
/// Longest user agent kept (`audit_records.user_agent`).
const MAX_USER_AGENT_LEN: usize = 500;

pub async fn observed(mut request: Request, next: Next) -> Response {
    let started = Instant::now();
    let id = request_id(request.headers());
    let method = method_label(request.method());
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |path| path.as_str())
        .to_owned();
    let span = tracing::info_span!(
        "http_request",
        otel.name = format!("{method} {route}"),
        otel.kind = "server",
        http.request.method = %method,
        http.route = %route,
        http.response.status_code = tracing::field::Empty,
        request_id = %id,
    );
    let parent = opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&Headers(request.headers()))
    });
    let caller_trace = parent.span().span_context().clone();
    if caller_trace.is_valid() {
        // Without a trace exporter there is no OpenTelemetry layer to attach to: nothing to do.
        let _ = span.set_parent(parent);
    }
    // The span's own trace when traces are exported (the caller's, if it sent one), else the
    // caller's: either way, log lines can be matched to the trace.
    let own_trace = span.context().span().span_context().clone();
    let trace_id = [own_trace, caller_trace]
        .into_iter()
        .find(|context| context.is_valid())
        .map(|context| Arc::from(context.trace_id().to_string()));
    let client = peer_of(&request);
    let user_agent = user_agent(request.headers());
    let host = host(&request);
    request.extensions_mut().insert(RequestInfo {
        id: Arc::from(id.as_str()),
        client,
        user_agent,
        trace_id,
        host,
        transport: "http",
    });

    let mut response = next.run(request).instrument(span.clone()).await;
    let status = response.status().as_u16();
    span.record("http.response.status_code", status);
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    metrics::histogram!(HTTP_REQUEST_DURATION, "route" => route.clone(), "method" => method)
        .record(started.elapsed().as_secs_f64());
    metrics::counter!(HTTP_REQUESTS, "route" => route, "method" => method, "status" => status.to_string())
        .increment(1);
    response
}

/// The request's method as a label value: the standard ones, else `other` (any token is a
/// method to hyper, and a label value per made-up method would grow the metrics for good).
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        _ => "other",
    }
}

/// The host the request names, if it is a plain one.
fn host(request: &Request) -> Option<Arc<str>> {
    let host = match request.headers().get(HOST) {
        Some(value) => value.to_str().ok()?,
        None => request.uri().authority()?.as_str(),
    };
    plain_host(host).map(Arc::from)
}

/// `host` if it is a plain name or address with an optional port: safe to write into a URL or
/// a header as it is.
pub(super) fn plain_host(host: &str) -> Option<&str> {
    let plain = !host.is_empty()
        && host.len() <= 255
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b));
    plain.then_some(host)
}

/// The client's request id if it is a reasonable one, else a new one.
fn request_id(headers: &HeaderMap) -> String {
    headers
        .get(&REQUEST_ID)
        .and_then(|value| value.to_str().ok())
        .filter(|id| {
            !id.is_empty()
                && id.len() <= MAX_REQUEST_ID_LEN
                && id.bytes().all(|b| b.is_ascii_graphic())
        })
        .map_or_else(|| uuid::Uuid::now_v7().to_string(), str::to_owned)
}

/// The client's `user-agent`, if it is text, cut to a bounded length.
fn user_agent(headers: &HeaderMap) -> Option<Arc<str>> {
    let text = headers.get(USER_AGENT)?.to_str().ok()?;
    let end = (0..=text.len().min(MAX_USER_AGENT_LEN))
        .rev()
        .find(|&i| text.is_char_boundary(i))?;
    Some(Arc::from(&text[..end]))
}

/// The request's headers, as OpenTelemetry's propagator reads them.
struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}
