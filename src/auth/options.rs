//! The authentication options: the mode (`--auth`), what it allows without an identity, and the
//! SSO proxy's headers.

use std::time::Duration;

use clap::Args;

use crate::options::parse_seconds;

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
        crate::options::defaults()
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

    /// Role of a person in none of the mapped groups: reader, notifier, operator, writer, admin, or none
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
        crate::options::defaults()
    }
}
