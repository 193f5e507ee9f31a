//! Command line and environment configuration (every flag has an environment variable).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::model::Role;
use crate::observe::logging::LogFormat;

/// casefile: stores and serves the records of AI-agent investigation sessions over GraphQL.
#[derive(Debug, Parser)]
#[command(name = "casefile", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,

    /// Log line format: text (for people) or json (one object per line, for collectors).
    /// Default: text on a terminal, json otherwise.
    #[arg(long, global = true, env = "CASEFILE_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the GraphQL server (migrations are applied at start-up).
    Serve(Box<ServeArgs>),
    /// Apply pending database migrations and exit.
    Migrate(DatabaseArgs),
    /// Print the GraphQL schema (SDL) the server serves.
    Schema,
    /// Load the demo investigation sessions (idempotent) and exit.
    Demo(DatabaseArgs),
    /// Play a live investigation against a running server (through its GraphQL API), to watch.
    Simulate(SimulateArgs),
    /// Manage API tokens (create, list, revoke).
    #[command(subcommand)]
    Token(TokenCommand),
    /// Hard-delete old sessions (with everything under them) and idempotency receipts, in small
    /// batches. A dry run by default: it prints what would go; `--execute` deletes.
    Purge(PurgeArgs),
}

/// What `casefile purge` deletes. Sessions matching either criterion go.
#[derive(Debug, Clone, Args)]
pub struct PurgeArgs {
    /// Sessions soft-deleted before this: an age (`30d`, `12h`) or an instant
    /// (`2026-01-01T00:00:00Z`).
    #[arg(long, value_parser = parse_cutoff)]
    pub deleted_before: Option<Cutoff>,

    /// Sessions that finished (completed, failed, timed out or cancelled) before this, and whose
    /// chats have had no activity since: an age or an instant.
    #[arg(long, value_parser = parse_cutoff)]
    pub finished_before: Option<Cutoff>,

    /// Idempotency receipts older than this: an age or an instant (a retry of a create whose
    /// receipt is gone gets CONFLICT).
    #[arg(long, value_parser = parse_cutoff)]
    pub receipts_before: Option<Cutoff>,

    /// Delete (without it, only count what would be deleted).
    #[arg(long)]
    pub execute: bool,

    /// Who runs it, for the purge's record (default: `cli:` and the system user).
    #[arg(long, env = "CASEFILE_PURGE_ACTOR")]
    pub actor: Option<String>,

    #[command(flatten)]
    pub batches: PurgeBatches,

    #[command(flatten)]
    pub database: DatabaseArgs,
}

/// How a purge paces itself: small transactions, with pauses, so it never holds locks (or the
/// embedded database's one connection) for long.
#[derive(Debug, Clone, Copy, Args)]
pub struct PurgeBatches {
    /// Sessions deleted per transaction (each with everything under it).
    #[arg(long = "purge-batch-size", env = "CASEFILE_PURGE_BATCH_SIZE", default_value_t = 50,
          value_parser = clap::value_parser!(i64).range(1..=10_000))]
    pub size: i64,

    /// Milliseconds to wait between batches.
    #[arg(
        long = "purge-batch-pause-ms",
        env = "CASEFILE_PURGE_BATCH_PAUSE_MS",
        default_value_t = 50
    )]
    pub pause_ms: u64,
}

impl Default for PurgeBatches {
    fn default() -> Self {
        Self {
            size: 50,
            pause_ms: 50,
        }
    }
}

/// The end of a retention window: everything before it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cutoff {
    /// This long before the purge runs.
    Age(chrono::Duration),
    /// This instant.
    At(chrono::DateTime<chrono::Utc>),
}

impl Cutoff {
    /// The instant, for a purge starting at `now`.
    pub fn instant(self, now: chrono::DateTime<chrono::Utc>) -> chrono::DateTime<chrono::Utc> {
        match self {
            Cutoff::Age(age) => now - age,
            Cutoff::At(at) => at,
        }
    }
}

/// An age (`30d`) or an RFC 3339 instant, not in the future: a cutoff past now would take
/// what finished a moment ago, or leave no time to restore what was deleted by mistake.
pub fn parse_cutoff(text: &str) -> Result<Cutoff, String> {
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(text.trim()) {
        let at = at.with_timezone(&chrono::Utc);
        if at > chrono::Utc::now() {
            return Err(format!("{text:?} is in the future"));
        }
        return Ok(Cutoff::At(at));
    }
    parse_period(text).map(Cutoff::Age).map_err(|_| {
        format!("{text:?} is neither an age such as 30d, 12h or 90m nor an instant such as 2026-01-01T00:00:00Z")
    })
}

/// API token management. Works on the database directly (the embedded one only while no server
/// holds its data directory), or through a running server's admin mutations with `--url`.
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token; its secret is printed once, as the last line of standard output.
    Create {
        /// Unique name (letters, digits, '.', '_', '-'); recorded as `token:NAME` on what it creates.
        #[arg(long)]
        name: String,
        /// What it may do.
        #[arg(long, value_enum)]
        role: Role,
        /// Lifetime, e.g. `30d`, `12h`, `90m` (default: no expiry).
        #[arg(long, value_parser = parse_period)]
        expires_in: Option<chrono::Duration>,
        #[command(flatten)]
        target: TokenTarget,
    },
    /// List tokens: name, role, created, last used, expires, revoked (never the secret).
    List {
        #[command(flatten)]
        target: TokenTarget,
    },
    /// Revoke a token: refused from then on by every server on the database, and its open
    /// streams are closed.
    Revoke {
        /// The token's name.
        name: String,
        #[command(flatten)]
        target: TokenTarget,
    },
}

/// Where a token command acts: a running server (`--url`, with an admin token) or the database.
#[derive(Debug, Clone, Args)]
pub struct TokenTarget {
    /// GraphQL endpoint of a running server to act through (its admin mutations).
    #[arg(long)]
    pub url: Option<String>,

    /// Admin token for `--url`.
    #[arg(long, env = "CASEFILE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,

    #[command(flatten)]
    pub database: DatabaseArgs,
}

/// A length of time such as `30d`, `12h`, `90m` or `45s` (a token's lifetime, a retention age).
pub fn parse_period(text: &str) -> Result<chrono::Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: i64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a length of time such as 30d, 12h or 90m"))?;
    let duration = match unit {
        "d" => chrono::Duration::try_days(n),
        "h" => chrono::Duration::try_hours(n),
        "m" => chrono::Duration::try_minutes(n),
        "s" => chrono::Duration::try_seconds(n),
        _ => None,
    };
    match duration {
        // Past a century, a token needs no expiry and data no retention.
        Some(d) if n > 0 && d <= chrono::Duration::days(36_500) => Ok(d),
        _ => Err(format!(
            "{text:?} is not a positive length of time such as 30d, 12h or 90m"
        )),
    }
}

/// What `simulate` plays against.
#[derive(Debug, Clone, Args)]
pub struct SimulateArgs {
    /// GraphQL endpoint of the running server.
    #[arg(
        long,
        env = "CASEFILE_URL",
        default_value = "http://127.0.0.1:8080/graphql"
    )]
    pub url: String,

    /// Tokens per second each agent streams.
    #[arg(long, env = "CASEFILE_TOKEN_RATE", default_value_t = 20.0)]
    pub token_rate: f64,

    /// API token (writer or above) for a server that requires one.
    #[arg(long, env = "CASEFILE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// Where the data lives.
#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// PostgreSQL URL. When unset, casefile runs an embedded PostgreSQL (pglite) in-process.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,

    /// Data directory of the embedded PostgreSQL (ignored when DATABASE_URL is set).
    #[arg(long, env = "CASEFILE_DATA_DIR", default_value = "./casefile-data")]
    pub data_dir: PathBuf,

    /// Maximum connections in the pool to an external PostgreSQL (the embedded one takes exactly one).
    #[arg(long, env = "CASEFILE_DB_MAX_CONNECTIONS", default_value_t = 10)]
    pub db_max_connections: u32,

    #[command(flatten)]
    pub timeouts: DbTimeouts,
}

/// Limits every pooled connection sets on itself, so one statement or transaction cannot hold
/// the database (or a lock) for long.
#[derive(Debug, Clone, Copy, Args)]
pub struct DbTimeouts {
    /// Seconds one statement may run.
    #[arg(
        long = "db-statement-timeout-secs",
        env = "CASEFILE_DB_STATEMENT_TIMEOUT_SECS",
        default_value = "30",
        value_parser = parse_seconds
    )]
    pub statement: Duration,

    /// Seconds a statement may wait for a lock.
    #[arg(
        long = "db-lock-timeout-secs",
        env = "CASEFILE_DB_LOCK_TIMEOUT_SECS",
        default_value = "10",
        value_parser = parse_seconds
    )]
    pub lock: Duration,

    /// Seconds a transaction may sit idle before the database ends it.
    #[arg(
        long = "db-idle-in-transaction-timeout-secs",
        env = "CASEFILE_DB_IDLE_IN_TRANSACTION_TIMEOUT_SECS",
        default_value = "60",
        value_parser = parse_seconds
    )]
    pub idle_in_transaction: Duration,
}

impl Default for DbTimeouts {
    fn default() -> Self {
        Self {
            statement: Duration::from_secs(30),
            lock: Duration::from_secs(10),
            idle_in_transaction: Duration::from_secs(60),
        }
    }
}

/// Serving options.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,

    /// Address to listen on.
    #[arg(long, env = "CASEFILE_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Load the demo data before serving.
    #[arg(long, env = "CASEFILE_DEMO")]
    pub demo: bool,

    /// With `--auth tokens`: the secret of the first admin token, created when no admin token
    /// exists (`cf_` and at least 32 more characters). Unset: one is generated and printed once.
    #[arg(long, env = "CASEFILE_BOOTSTRAP_ADMIN_TOKEN", hide_env_values = true)]
    pub bootstrap_admin_token: Option<String>,

    #[command(flatten)]
    pub http: HttpOptions,
}

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
    #[arg(long, env = "CASEFILE_SUBSCRIBER_BUFFER", default_value_t = DEFAULT_SUBSCRIBER_BUFFER)]
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
#[derive(Debug, Clone, Default, Args)]
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

/// What the server deletes on its own schedule: `casefile purge`'s policy (the only way to run
/// it on the embedded database while it serves). Every replica runs it; a batch skips what
/// another holds, so replicas share the work rather than repeat it.
#[derive(Debug, Clone, Copy, Args)]
pub struct RetentionOptions {
    /// Hard-delete sessions soft-deleted longer ago than this (e.g. `30d`). Unset: kept.
    #[arg(
        long = "retention-deleted-before",
        env = "CASEFILE_RETENTION_DELETED_BEFORE",
        value_parser = parse_period
    )]
    pub deleted_before: Option<chrono::Duration>,

    /// Hard-delete sessions that finished longer ago than this, and whose chats have been quiet
    /// as long (e.g. `365d`). Unset: kept.
    #[arg(
        long = "retention-finished-before",
        env = "CASEFILE_RETENTION_FINISHED_BEFORE",
        value_parser = parse_period
    )]
    pub finished_before: Option<chrono::Duration>,

    /// Forget idempotency receipts older than this: a retry of a create whose receipt is gone
    /// gets CONFLICT instead of the record.
    #[arg(
        long = "retention-receipts-before",
        env = "CASEFILE_RETENTION_RECEIPTS_BEFORE",
        default_value = "7d",
        value_parser = parse_period
    )]
    pub receipts_before: chrono::Duration,

    /// Drop live changes older than this from the shared change log even when a process has not
    /// read them (one that lags so far resumes its subscribers from the data).
    #[arg(
        long = "retention-change-log",
        env = "CASEFILE_RETENTION_CHANGE_LOG",
        default_value = "1h",
        value_parser = parse_period
    )]
    pub change_log: chrono::Duration,

    /// How often the schedule runs (its first run is one interval after start).
    #[arg(
        long = "retention-interval",
        env = "CASEFILE_RETENTION_INTERVAL",
        default_value = "1h",
        value_parser = parse_period
    )]
    pub interval: chrono::Duration,

    #[command(flatten)]
    pub batches: PurgeBatches,
}

impl Default for RetentionOptions {
    fn default() -> Self {
        Self {
            deleted_before: None,
            finished_before: None,
            receipts_before: chrono::Duration::days(7),
            change_log: chrono::Duration::hours(1),
            interval: chrono::Duration::hours(1),
            batches: PurgeBatches::default(),
        }
    }
}

/// Bounds on live streams.
#[derive(Debug, Clone, Copy, Args)]
pub struct LiveOptions {
    /// Subscriptions one WebSocket connection may run at once (past it, that subscription gets
    /// an error; the connection stays).
    #[arg(
        long,
        env = "CASEFILE_MAX_SUBSCRIPTIONS_PER_CONNECTION",
        default_value_t = 100
    )]
    pub max_subscriptions_per_connection: usize,

    /// Subscriptions the process holds open at once, over every transport.
    #[arg(long, env = "CASEFILE_MAX_SUBSCRIPTIONS", default_value_t = 20_000)]
    pub max_subscriptions: usize,

    /// Subscriptions one identity (token, proxy user, or client address without
    /// authentication) may hold open at once, over every transport, so that no caller takes
    /// what everyone shares. Default: a tenth of --max-subscriptions (2,000 with its default).
    #[arg(
        long,
        env = "CASEFILE_MAX_SUBSCRIPTIONS_PER_IDENTITY",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..)
    )]
    pub max_subscriptions_per_identity: Option<usize>,

    /// WebSocket connections one identity may have open at once. Past it, the upgrade is
    /// refused with 429 (without authentication), or the connection is closed with 4429 at
    /// `connection_init` (where its identity is known).
    #[arg(
        long,
        env = "CASEFILE_MAX_WEBSOCKETS_PER_IDENTITY",
        default_value_t = 100,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..)
    )]
    pub max_websockets_per_identity: usize,

    /// SSE, multipart and `/sessions/{id}/events` streams one identity may have open at once.
    /// Past it: 429.
    #[arg(
        long,
        env = "CASEFILE_MAX_STREAMS_PER_IDENTITY",
        default_value_t = 100,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..)
    )]
    pub max_streams_per_identity: usize,

    /// Seconds an SSE or multipart stream may go without delivering anything before it is
    /// ended (the client subscribes again with its cursor).
    #[arg(
        long = "stream-idle-secs",
        env = "CASEFILE_STREAM_IDLE_SECS",
        default_value = "1800",
        value_parser = parse_seconds
    )]
    pub stream_idle: Duration,

    /// Seconds an SSE or multipart stream may stay open at all.
    #[arg(
        long = "stream-lifetime-secs",
        env = "CASEFILE_STREAM_LIFETIME_SECS",
        default_value = "21600",
        value_parser = parse_seconds
    )]
    pub stream_lifetime: Duration,
}

impl LiveOptions {
    /// The subscriptions one identity may hold: as set, else a tenth of the process's (at
    /// least one).
    pub fn subscriptions_per_identity(&self) -> usize {
        self.max_subscriptions_per_identity
            .unwrap_or((self.max_subscriptions / 10).max(1))
    }
}

impl Default for LiveOptions {
    fn default() -> Self {
        Self {
            max_subscriptions_per_connection: 100,
            max_subscriptions: 20_000,
            max_subscriptions_per_identity: None,
            max_websockets_per_identity: 100,
            max_streams_per_identity: 100,
            stream_idle: Duration::from_secs(1800),
            stream_lifetime: Duration::from_secs(6 * 3600),
        }
    }
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

impl Default for ThrottleOptions {
    fn default() -> Self {
        Self {
            rate_limit_per_second: 1000,
            max_concurrent_per_identity: 64,
            max_concurrent_requests: 1024,
            request_timeout: Duration::from_secs(30),
            auth_attempts_per_second_per_address: 50,
        }
    }
}

/// How callers are authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AuthMode {
    /// No identity: everyone may do everything (only on a loopback address, unless
    /// `--allow-anonymous`).
    None,
    /// Every request carries `Authorization: Bearer <API token>`.
    Tokens,
    /// A trusted SSO proxy passes the person in headers; API tokens work too.
    Proxy,
}

/// Access control.
#[derive(Debug, Clone, Args)]
pub struct AuthOptions {
    /// How callers are authenticated: none, tokens or proxy.
    #[arg(long = "auth", env = "CASEFILE_AUTH", value_enum, default_value_t = AuthMode::None)]
    pub mode: AuthMode,

    /// Serve `--auth none` on a non-loopback address anyway (anyone who can reach it may read,
    /// write and delete everything).
    #[arg(long, env = "CASEFILE_ALLOW_ANONYMOUS")]
    pub allow_anonymous: bool,

    /// Under `--auth none`, domain names accepted as Host besides `localhost` (comma-separated;
    /// IP addresses always pass); any other Host is refused, so a DNS-rebinding page cannot
    /// reach the server.
    #[arg(
        long = "allowed-host",
        env = "CASEFILE_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    pub allowed_hosts: Vec<String>,

    #[command(flatten)]
    pub proxy: ProxyOptions,
}

impl Default for AuthOptions {
    fn default() -> Self {
        Self {
            mode: AuthMode::None,
            allow_anonymous: false,
            allowed_hosts: Vec::new(),
            proxy: ProxyOptions::default(),
        }
    }
}

/// `--auth proxy`: the headers a trusted SSO proxy (oauth2-proxy) sets, and how groups map to
/// roles.
#[derive(Debug, Clone, Args)]
pub struct ProxyOptions {
    /// Secret the proxy sends with every request (in `--proxy-secret-header`); identity headers
    /// without it are not believed.
    #[arg(long, env = "CASEFILE_PROXY_SECRET", hide_env_values = true)]
    pub proxy_secret: Option<String>,

    /// Header carrying the shared secret.
    #[arg(
        long,
        env = "CASEFILE_PROXY_SECRET_HEADER",
        default_value = "x-casefile-proxy-secret"
    )]
    pub proxy_secret_header: String,

    /// Header carrying the user.
    #[arg(
        long,
        env = "CASEFILE_PROXY_USER_HEADER",
        default_value = "x-forwarded-user"
    )]
    pub proxy_user_header: String,

    /// Header carrying the user's email (the user when the user header is absent).
    #[arg(
        long,
        env = "CASEFILE_PROXY_EMAIL_HEADER",
        default_value = "x-forwarded-email"
    )]
    pub proxy_email_header: String,

    /// Header carrying the user's groups (comma-separated).
    #[arg(
        long,
        env = "CASEFILE_PROXY_GROUPS_HEADER",
        default_value = "x-forwarded-groups"
    )]
    pub proxy_groups_header: String,

    /// GROUP=ROLE pairs (comma-separated in the variable); a person gets the highest role of
    /// their groups.
    #[arg(
        long = "proxy-group-role",
        env = "CASEFILE_PROXY_GROUP_ROLES",
        value_delimiter = ','
    )]
    pub proxy_group_roles: Vec<String>,

    /// Role of a person in none of the mapped groups: reader, operator, writer, admin, or none
    /// (refused).
    #[arg(long, env = "CASEFILE_PROXY_DEFAULT_ROLE", default_value = "reader")]
    pub proxy_default_role: String,

    /// Seconds a WebSocket or SSE stream opened through the proxy stays open; the client then
    /// reconnects through the proxy, which signs the person in again (someone removed from the
    /// SSO loses live access within this time).
    #[arg(
        long = "proxy-stream-lifetime-secs",
        env = "CASEFILE_PROXY_STREAM_LIFETIME_SECS",
        default_value = "3600",
        value_parser = parse_seconds
    )]
    pub proxy_stream_lifetime: Duration,
}

impl Default for ProxyOptions {
    fn default() -> Self {
        Self {
            proxy_secret: None,
            proxy_secret_header: "x-casefile-proxy-secret".to_owned(),
            proxy_user_header: "x-forwarded-user".to_owned(),
            proxy_email_header: "x-forwarded-email".to_owned(),
            proxy_groups_header: "x-forwarded-groups".to_owned(),
            proxy_group_roles: Vec::new(),
            proxy_default_role: "reader".to_owned(),
            proxy_stream_lifetime: DEFAULT_PROXY_STREAM_LIFETIME,
        }
    }
}

const DEFAULT_SUBSCRIBER_BUFFER: usize = 4096;
const DEFAULT_CHANGE_LOG_READER_TIMEOUT: Duration = Duration::from_secs(300);
const DEFAULT_PROXY_STREAM_LIFETIME: Duration = Duration::from_secs(3600);
const DEFAULT_WS_KEEPALIVE: Duration = Duration::from_secs(15);
const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// A positive number of seconds, fractions allowed (`0.5`).
fn parse_seconds(text: &str) -> Result<Duration, String> {
    let seconds: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    match Duration::try_from_secs_f64(seconds) {
        Ok(duration) if !duration.is_zero() => Ok(duration),
        _ => Err(format!("{text:?} must be a positive number of seconds")),
    }
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            auth: AuthOptions::default(),
            throttle: ThrottleOptions::default(),
            live: LiveOptions::default(),
            metrics: MetricsOptions::default(),
            retention: RetentionOptions::default(),
            public_origin: None,
            cors_allow_headers: DEFAULT_CORS_ALLOW_HEADERS.map(String::from).to_vec(),
            cors_allow_origins: Vec::new(),
            subscriber_buffer: DEFAULT_SUBSCRIBER_BUFFER,
            change_log_reader_timeout: DEFAULT_CHANGE_LOG_READER_TIMEOUT,
            ws_keepalive: DEFAULT_WS_KEEPALIVE,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
        }
    }
}

/// Room for an LLM interaction's request and response JSON (4 MiB each at most).
const DEFAULT_MAX_BODY_BYTES: usize = 8 * 1024 * 1024;
/// The query text alone, the tokens in it and its nesting: graphql-java's parser limits (1 MiB,
/// 15,000 tokens), far above any query a person or a code generator writes.
const DEFAULT_MAX_QUERY_BYTES: usize = 1024 * 1024;
const DEFAULT_MAX_QUERY_TOKENS: usize = 15_000;
const DEFAULT_MAX_QUERY_NESTING: usize = 64;
const DEFAULT_MAX_SELECTIONS: usize = 10_000;
const DEFAULT_MAX_QUERY_DEPTH: usize = 16;
const DEFAULT_MAX_QUERY_COMPLEXITY: usize = 250_000;
const DEFAULT_MAX_BATCH_OPERATIONS: usize = 10;
const DEFAULT_MAX_ALIASES: usize = 50;
const DEFAULT_MAX_ROOT_FIELDS: usize = 20;
const DEFAULT_MAX_RESPONSE_BYTES: usize = 32 * 1024 * 1024;
pub const DEFAULT_MAX_PAGE_SIZE: usize = 100;

/// Protective limits on what one request may ask for.
#[derive(Debug, Clone, Copy, Args)]
pub struct Limits {
    /// Largest accepted request body, in bytes.
    #[arg(long, env = "CASEFILE_MAX_BODY_BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,

    /// Largest accepted query text, in bytes (variables are not part of it).
    #[arg(long, env = "CASEFILE_MAX_QUERY_BYTES", default_value_t = DEFAULT_MAX_QUERY_BYTES)]
    pub max_query_bytes: usize,

    /// Most tokens (names, punctuation, values) in a query text; checked before it is parsed.
    #[arg(long, env = "CASEFILE_MAX_QUERY_TOKENS", default_value_t = DEFAULT_MAX_QUERY_TOKENS)]
    pub max_query_tokens: usize,

    /// Deepest nesting of braces, brackets and parentheses in a query text; checked before it
    /// is parsed.
    #[arg(long, env = "CASEFILE_MAX_QUERY_NESTING", default_value_t = DEFAULT_MAX_QUERY_NESTING)]
    pub max_query_nesting: usize,

    /// Most selections a document expands to: every field, fragment spread and inline fragment,
    /// with its arguments' values and directives, counted as often as fragment spreads repeat
    /// it. Measured without expanding anything, before validation.
    #[arg(long, env = "CASEFILE_MAX_SELECTIONS", default_value_t = DEFAULT_MAX_SELECTIONS)]
    pub max_selections: usize,

    /// Deepest accepted query nesting.
    #[arg(long, env = "CASEFILE_MAX_QUERY_DEPTH", default_value_t = DEFAULT_MAX_QUERY_DEPTH)]
    pub max_query_depth: usize,

    /// Highest accepted cost of one request, summed over the operations of a batch (a field of
    /// a row costs 1; a page of N multiplies its selection by N, an unpaginated list by a
    /// realistic bound on its length; counts and roll-ups cost what their SQL does).
    #[arg(long, env = "CASEFILE_MAX_QUERY_COMPLEXITY", default_value_t = DEFAULT_MAX_QUERY_COMPLEXITY)]
    pub max_query_complexity: usize,

    /// Most operations in one JSON batch.
    #[arg(long, env = "CASEFILE_MAX_BATCH_OPERATIONS", default_value_t = DEFAULT_MAX_BATCH_OPERATIONS)]
    pub max_batch_operations: usize,

    /// Most aliased fields in one document.
    #[arg(long, env = "CASEFILE_MAX_ALIASES", default_value_t = DEFAULT_MAX_ALIASES)]
    pub max_aliases: usize,

    /// Most root fields in one operation.
    #[arg(long, env = "CASEFILE_MAX_ROOT_FIELDS", default_value_t = DEFAULT_MAX_ROOT_FIELDS)]
    pub max_root_fields: usize,

    /// Largest response of a query or mutation, in bytes of JSON (about); a larger one is
    /// refused with RESPONSE_TOO_LARGE as soon as it is known, instead of being built whole.
    #[arg(long, env = "CASEFILE_MAX_RESPONSE_BYTES", default_value_t = DEFAULT_MAX_RESPONSE_BYTES)]
    pub max_response_bytes: usize,

    /// Largest page (`first`) any connection accepts.
    #[arg(long, env = "CASEFILE_MAX_PAGE_SIZE", default_value_t = DEFAULT_MAX_PAGE_SIZE)]
    pub max_page_size: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_query_bytes: DEFAULT_MAX_QUERY_BYTES,
            max_query_tokens: DEFAULT_MAX_QUERY_TOKENS,
            max_query_nesting: DEFAULT_MAX_QUERY_NESTING,
            max_selections: DEFAULT_MAX_SELECTIONS,
            max_query_depth: DEFAULT_MAX_QUERY_DEPTH,
            max_query_complexity: DEFAULT_MAX_QUERY_COMPLEXITY,
            max_batch_operations: DEFAULT_MAX_BATCH_OPERATIONS,
            max_aliases: DEFAULT_MAX_ALIASES,
            max_root_fields: DEFAULT_MAX_ROOT_FIELDS,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            max_page_size: DEFAULT_MAX_PAGE_SIZE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory as _;
        Cli::command().debug_assert();
    }

    #[test]
    fn cutoffs_are_ages_or_instants() {
        assert_eq!(
            parse_cutoff("30d"),
            Ok(Cutoff::Age(chrono::Duration::days(30)))
        );
        let at = parse_cutoff("2026-01-01T01:00:00+01:00").unwrap();
        assert_eq!(at, Cutoff::At("2026-01-01T00:00:00Z".parse().unwrap()));
        let now = "2026-03-31T00:00:00Z".parse().unwrap();
        assert_eq!(
            Cutoff::Age(chrono::Duration::days(30)).instant(now),
            "2026-03-01T00:00:00Z"
                .parse::<chrono::DateTime<chrono::Utc>>()
                .unwrap()
        );
        for bad in [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "0d",
            "2999-01-01T00:00:00Z",
        ] {
            assert!(parse_cutoff(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn periods() {
        assert_eq!(parse_period("30d"), Ok(chrono::Duration::days(30)));
        assert_eq!(parse_period("12h"), Ok(chrono::Duration::hours(12)));
        assert_eq!(parse_period("90m"), Ok(chrono::Duration::minutes(90)));
        assert_eq!(parse_period("45s"), Ok(chrono::Duration::seconds(45)));
        for bad in [
            "",
            "d",
            "30",
            "0d",
            "-1d",
            "30w",
            "1.5d",
            "36501d",
            "99999999999999d",
        ] {
            assert!(parse_period(bad).is_err(), "{bad:?}");
        }
    }
}
