//! How the server behaves (every flag of `casefile serve` but its database and address): the
//! HTTP edge's own options, throttling and `/metrics`, and the options of the parts it runs
//! (limits, authentication, live streams, retention) flattened in.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;

use crate::api::{Limits, NotificationOptions};
use crate::auth::AuthOptions;
use crate::live::LiveOptions;
use crate::options::parse_seconds;
use crate::retention::RetentionOptions;
use crate::store::write::append_groups::AppendGroupOptions;

/// How the HTTP edge behaves.
#[derive(Debug, Clone, Args)]
pub struct HttpOptions {
    #[command(flatten)]
    pub limits: Limits,

    #[command(flatten)]
    pub auth: AuthOptions,

    #[command(flatten)]
    pub throttle: ThrottleOptions,

    #[command(flatten)]
    pub live: LiveOptions,

    #[command(flatten)]
    pub metrics: MetricsOptions,

    #[command(flatten)]
    pub retention: RetentionOptions,

    #[command(flatten)]
    pub notifications: NotificationOptions,

    #[command(flatten)]
    pub append_groups: AppendGroupOptions,

    /// The origin browsers see this server at, when it is behind a TLS-terminating proxy
    /// (`https://casefile.example.com`): what "same origin" means for WebSocket and SSE
    /// requests. Unset: `http://` and the request's Host.
    #[arg(long, env = "CASEFILE_PUBLIC_ORIGIN")]
    pub public_origin: Option<String>,

    /// Request headers browsers on allowed origins may send (comma-separated).
    #[arg(
        long = "cors-allow-header",
        env = "CASEFILE_CORS_ALLOW_HEADERS",
        value_delimiter = ',',
        default_values_t = DEFAULT_CORS_ALLOW_HEADERS.map(String::from)
    )]
    pub cors_allow_headers: Vec<String>,

    /// Browser origins allowed to call the API (comma-separated, e.g.
    /// `https://app.example.com,http://localhost:3000`; `*` allows any). Unset: same origin only.
    #[arg(
        long = "cors-allow-origin",
        env = "CASEFILE_CORS_ALLOW_ORIGINS",
        value_delimiter = ','
    )]
    pub cors_allow_origins: Vec<String>,

    /// Live updates a subscriber may have pending before it is closed and told to resume from
    /// its cursor (bounds the memory a slow client can hold).
    #[arg(long, env = "CASEFILE_SUBSCRIBER_BUFFER", default_value_t = 4096)]
    pub subscriber_buffer: usize,

    /// Seconds after which a casefile process that stopped recording its place in the shared
    /// change log (it crashed, or stalls) no longer keeps the log from being pruned. One that
    /// comes back later resumes its subscribers from the data.
    #[arg(
        long = "change-log-reader-timeout-secs",
        env = "CASEFILE_CHANGE_LOG_READER_TIMEOUT_SECS",
        default_value = "300",
        value_parser = parse_seconds
    )]
    pub change_log_reader_timeout: Duration,

    /// Seconds a client may take to send its request headers; a slower one is dropped.
    #[arg(
        long = "header-read-timeout-secs",
        env = "CASEFILE_HEADER_READ_TIMEOUT_SECS",
        default_value = "10",
        value_parser = parse_seconds
    )]
    pub header_read_timeout: Duration,

    /// Seconds between the server's keepalive pings on a WebSocket (a ping frame, plus `ping` on
    /// graphql-transport-ws or `ka` on graphql-ws). A client heard nothing from for two
    /// intervals (no message, no pong), or that has not sent `connection_init` by then, is closed.
    #[arg(
        long,
        env = "CASEFILE_WS_KEEPALIVE_SECS",
        default_value = "15",
        value_parser = parse_seconds
    )]
    pub ws_keepalive: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        crate::options::defaults()
    }
}

/// What browser clients send: credentials, GraphQL bodies, tracing, and Apollo's client
/// identification.
const DEFAULT_CORS_ALLOW_HEADERS: [&str; 8] = [
    "authorization",
    "content-type",
    "accept",
    "traceparent",
    "tracestate",
    "x-request-id",
    "apollographql-client-name",
    "apollographql-client-version",
];

/// Where Prometheus scrapes `/metrics`.
#[derive(Debug, Clone, Args)]
pub struct MetricsOptions {
    /// Serve `/metrics` on this address instead of the main one (e.g. `0.0.0.0:9464`, reachable
    /// by the scraper but not published).
    #[arg(
        long = "metrics-listen",
        id = "metrics_listen",
        env = "CASEFILE_METRICS_LISTEN"
    )]
    pub listen: Option<SocketAddr>,

    /// Require `Authorization: Bearer <this>` on `/metrics` (default: no credentials, like most
    /// exporters).
    #[arg(
        long = "metrics-token",
        id = "metrics_token",
        env = "CASEFILE_METRICS_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
}

/// Fair use of the server by its callers.
#[derive(Debug, Clone, Args)]
pub struct ThrottleOptions {
    /// Requests per second one identity (token, proxy user, or client address without
    /// authentication) may make; 0: no limit. Over it: 429 with Retry-After.
    #[arg(long, env = "CASEFILE_RATE_LIMIT_PER_SECOND", default_value_t = 1000)]
    pub rate_limit_per_second: u32,

    /// Requests one identity may have in flight at once (a query or mutation answered as a
    /// stream, or over a WebSocket, counts until it ends). Over it: 429.
    #[arg(
        long,
        env = "CASEFILE_MAX_CONCURRENT_PER_IDENTITY",
        default_value_t = 64
    )]
    pub max_concurrent_per_identity: usize,

    /// Requests the process serves at once (as above). Over it: 503 with Retry-After.
    #[arg(long, env = "CASEFILE_MAX_CONCURRENT_REQUESTS", default_value_t = 1024)]
    pub max_concurrent_requests: usize,

    /// Seconds a query or mutation may take, on every transport (subscriptions are not bounded
    /// by it). Over it: 503, or as the last result of a stream, TIMEOUT.
    #[arg(
        long = "request-timeout-secs",
        env = "CASEFILE_REQUEST_TIMEOUT_SECS",
        default_value = "30",
        value_parser = parse_seconds
    )]
    pub request_timeout: Duration,

    /// Credential look-ups in the database (an API token not verified in the last 5 seconds,
    /// every stream ticket) one client address may cause per second; 0: no limit. Over it: 429
    /// without a look-up, so made-up tokens cannot drive the database.
    #[arg(
        long,
        env = "CASEFILE_AUTH_ATTEMPTS_PER_SECOND_PER_ADDRESS",
        default_value_t = 50
    )]
    pub auth_attempts_per_second_per_address: u32,
}
