use std::time::Instant;

use clap::Parser as _;

use casefile::auth::AuthMode;
use casefile::auth::tokens::{generate_secret, hash, looks_like_token};
use casefile::config::{Cli, Command, DatabaseArgs, ServeArgs, TokenCommand};
use casefile::db::Database;
use casefile::server::{Server, check_anonymous_exposure, shutdown_signal};
use casefile::simulate::Api;
use casefile::store::Store;
use casefile::store::tokens::FirstAdmin;
use casefile::token_command;

/// A response is built from many small allocations (every field, key and string), freed
/// together at its end, from several threads: mimalloc does that at a fraction of glibc
/// malloc's cost (which spent a third of the server's time in malloc and free).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // Kept to the end: dropping it sends the traces still buffered.
    let _telemetry = casefile::observe::logging::init(cli.log_format)?;
    match cli.command {
        Command::Schema => {
            print!("{}", casefile::api::sdl());
            Ok(())
        }
        Command::Migrate(args) => with_database(&args, |_| async { Ok(()) }).await,
        Command::Demo(args) => {
            with_database(&args, |store| async move {
                let summary = casefile::demo::load(&store).await?;
                tracing::info!("{summary}");
                Ok(())
            })
            .await
        }
        Command::Serve(args) => serve(*args).await,
        Command::Simulate(args) => casefile::simulate::run(&args).await,
        Command::Token(command) => token(command).await,
        Command::Purge(args) => {
            let args = &args;
            with_database(&args.database, |store| async move {
                casefile::purge_command::run(&store, args).await
            })
            .await
        }
    }
}

async fn token(command: TokenCommand) -> anyhow::Result<()> {
    let target = match &command {
        TokenCommand::Create { target, .. }
        | TokenCommand::List { target }
        | TokenCommand::Revoke { target, .. } => target.clone(),
    };
    match &target.url {
        Some(url) => {
            let api = Api::new(url.clone(), target.token.clone());
            token_command::run_remote(&api, &command).await
        }
        None => {
            let command = &command;
            with_database(&target.database, |store| async move {
                token_command::run_on_database(&store, command).await
            })
            .await
        }
    }
}

/// Connects, migrates, runs `work`, and shuts the database down whatever `work` returned.
async fn with_database<F, Fut>(args: &DatabaseArgs, work: F) -> anyhow::Result<()>
where
    F: FnOnce(Store) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let db = connect(args).await?;
    let result = work(Store::new(db.pool().clone())).await;
    db.shutdown().await;
    result
}

async fn connect(args: &DatabaseArgs) -> anyhow::Result<Database> {
    let started = Instant::now();
    let db = Database::connect(args).await?;
    db.migrate().await?;
    tracing::info!(
        embedded = db.is_embedded(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "database ready"
    );
    Ok(db)
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    // Before the database starts: a refused configuration should not cost a start-up.
    check_anonymous_exposure(&args.http.auth, args.listen)?;
    let db = connect(&args.database).await?;
    let store = Store::new(db.pool().clone());
    if args.demo {
        match casefile::demo::load(&store).await {
            Ok(summary) => tracing::info!("{summary}"),
            Err(err) => {
                drop(store);
                db.shutdown().await;
                return Err(err.into());
            }
        }
    }
    if args.http.auth.mode == AuthMode::Tokens
        && let Err(err) = first_admin(&store, args.bootstrap_admin_token.as_deref()).await
    {
        drop(store);
        db.shutdown().await;
        return Err(err);
    }
    let server = match Server::start(store, &args.http, args.listen).await {
        Ok(server) => server,
        Err(err) => {
            db.shutdown().await;
            return Err(err);
        }
    };
    tracing::info!("casefile listening on http://{}/graphql", server.addr());
    shutdown_signal().await;
    tracing::info!("shutting down");
    server.stop().await;
    db.shutdown().await;
    Ok(())
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
    let created = casefile::store::tokens::create_first_admin(
        store.pool(),
        "bootstrap-admin",
        &hash(&secret),
    )
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
