//! `casefile serve`: runs the GraphQL server on its database until Ctrl-C or SIGTERM, after
//! applying pending migrations (and, when asked, loading the demo sessions and creating the
//! first admin token).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use clap::Args;

use super::database::connect;
use crate::auth::AuthMode;
use crate::auth::tokens::{generate_secret, hash, looks_like_token};
use crate::db::DatabaseArgs;
use crate::http::HttpOptions;
use crate::server::{Server, check_anonymous_exposure, shutdown_signal};
use crate::store::Store;
use crate::store::tokens::FirstAdmin;

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

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    // Before the database starts: a refused configuration should not cost a start-up.
    check_anonymous_exposure(&args.http.auth, args.listen)?;
    let db = connect(&args.database).await?;
    let store = Store::new(db.pool().clone());
    if args.demo
        && let Err(err) = super::demo::load(&store).await
    {
        drop(store);
        db.shutdown().await;
        return Err(err);
    }
    if args.http.auth.mode == AuthMode::Tokens
        && let Err(err) = first_admin(&store, args.bootstrap_admin_token.as_deref()).await
    {
        drop(store);
        db.shutdown().await;
        return Err(err);
    }
    let server = match Server::start(store.clone(), &args.http, args.listen).await {
        Ok(server) => server,
        Err(err) => {
            db.shutdown().await;
            return Err(err);
        }
    };
    // Before the line that says it serves: whoever waits for that line (a test, a script)
    // may stop the server at once, before its handler of SIGTERM is in place.
    if args.demo {
        share_demo(&store, &args, server.addr()).await;
    }
    tracing::info!("casefile listening on http://{}/graphql", server.addr());
    shutdown_signal().await;
    tracing::info!("shutting down");
    server.stop().await;
    db.shutdown().await;
    Ok(())
}

/// Prints a share link to the demo's orchestrated session: its page shows what casefile
/// holds without any setup (on standard output, as the first admin token is; never logged).
async fn share_demo(store: &Store, args: &ServeArgs, addr: SocketAddr) {
    match crate::demo::share_orchestrated(store).await {
        Ok((session, secret)) => {
            let origin = match &args.http.public_origin {
                Some(origin) => origin.trim_end_matches('/').to_owned(),
                None => format!("http://{}", browsable(addr)),
            };
            let days = crate::demo::SHARED_FOR.num_days();
            println!(
                "casefile: the demo's orchestrated session, shared read-only for {days} days: \
                 {origin}/share/{session}#{secret}"
            );
        }
        Err(err) => tracing::warn!("could not share the demo's orchestrated session: {err}"),
    }
}

/// `addr` as a browser can reach it: an unspecified address (`0.0.0.0`, `::`) as loopback.
fn browsable(addr: SocketAddr) -> SocketAddr {
    let ip = match addr.ip() {
        ip if !ip.is_unspecified() => ip,
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
    };
    SocketAddr::new(ip, addr.port())
}

/// With `--auth tokens` and no usable admin token, creates one: from
/// `CASEFILE_BOOTSTRAP_ADMIN_TOKEN`, or a new secret printed once on standard output (never
/// logged).
async fn first_admin(store: &Store, given: Option<&str>) -> anyhow::Result<()> {
    let given = given.filter(|secret| !secret.is_empty());
    if let Some(secret) = given
        && !looks_like_token(secret)
    {
        anyhow::bail!(
            "CASEFILE_BOOTSTRAP_ADMIN_TOKEN must be `cf_` followed by at least 32 characters \
             (e.g. `cf_$(openssl rand -hex 32)`)"
        );
    }
    let secret = given.map_or_else(generate_secret, str::to_owned);
    let created =
        crate::store::tokens::create_first_admin(store.pool(), "bootstrap-admin", &hash(&secret))
            .await
            .map_err(|err| anyhow::anyhow!("cannot create the first admin token: {err}"))?;
    match created {
        FirstAdmin::Created(name) if given.is_some() => {
            tracing::info!("created admin token {name} from CASEFILE_BOOTSTRAP_ADMIN_TOKEN");
        }
        FirstAdmin::Created(name) => {
            tracing::warn!(
                "no admin token existed: created {name}; its secret is on standard output, once"
            );
            println!(
                "casefile: created the first admin token, {name}. Keep its secret; it is not shown again:"
            );
            println!("{secret}");
        }
        FirstAdmin::SecretSpent(name) => anyhow::bail!(
            "no usable admin token exists, and CASEFILE_BOOTSTRAP_ADMIN_TOKEN is the secret of \
             token {name}, which was revoked or has expired: set a new secret (or unset it to \
             have one generated)"
        ),
        FirstAdmin::Exists => {}
    }
    Ok(())
}
