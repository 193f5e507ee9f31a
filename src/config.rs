//! Command line and environment configuration (every flag has an environment variable).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// casefile: stores and serves the records of AI-agent investigation sessions over GraphQL.
#[derive(Debug, Parser)]
#[command(name = "casefile", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the GraphQL server (migrations are applied at start-up).
    Serve(ServeArgs),
    /// Apply pending database migrations and exit.
    Migrate(DatabaseArgs),
    /// Print the GraphQL schema (SDL) the server serves.
    Schema,
    /// Load the demo investigation sessions (idempotent) and exit.
    Demo(DatabaseArgs),
    /// Play a live investigation against a running server (through its GraphQL API), to watch.
    Simulate(SimulateArgs),
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

    #[command(flatten)]
    pub http: HttpOptions,
}

/// How the HTTP edge behaves.
#[derive(Debug, Clone, Args)]
pub struct HttpOptions {
    #[command(flatten)]
    pub limits: Limits,

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

const DEFAULT_SUBSCRIBER_BUFFER: usize = 4096;
const DEFAULT_WS_KEEPALIVE: Duration = Duration::from_secs(15);

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
            cors_allow_origins: Vec::new(),
            subscriber_buffer: DEFAULT_SUBSCRIBER_BUFFER,
            ws_keepalive: DEFAULT_WS_KEEPALIVE,
        }
    }
}

/// Room for an LLM interaction's request and response JSON (4 MiB each at most).
const DEFAULT_MAX_BODY_BYTES: usize = 8 * 1024 * 1024;
const DEFAULT_MAX_QUERY_DEPTH: usize = 16;
const DEFAULT_MAX_QUERY_COMPLEXITY: usize = 250_000;
pub const DEFAULT_MAX_PAGE_SIZE: usize = 100;

/// Protective limits on what one request may ask for.
#[derive(Debug, Clone, Copy, Args)]
pub struct Limits {
    /// Largest accepted request body, in bytes.
    #[arg(long, env = "CASEFILE_MAX_BODY_BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,

    /// Deepest accepted query nesting.
    #[arg(long, env = "CASEFILE_MAX_QUERY_DEPTH", default_value_t = DEFAULT_MAX_QUERY_DEPTH)]
    pub max_query_depth: usize,

    /// Highest accepted query complexity (each field costs 1; a page of N multiplies its selection by N).
    #[arg(long, env = "CASEFILE_MAX_QUERY_COMPLEXITY", default_value_t = DEFAULT_MAX_QUERY_COMPLEXITY)]
    pub max_query_complexity: usize,

    /// Largest page (`first`) any connection accepts.
    #[arg(long, env = "CASEFILE_MAX_PAGE_SIZE", default_value_t = DEFAULT_MAX_PAGE_SIZE)]
    pub max_page_size: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_query_depth: DEFAULT_MAX_QUERY_DEPTH,
            max_query_complexity: DEFAULT_MAX_QUERY_COMPLEXITY,
            max_page_size: DEFAULT_MAX_PAGE_SIZE,
        }
    }
}
