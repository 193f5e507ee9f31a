use std::time::Instant;

use clap::Parser as _;
use tracing_subscriber::EnvFilter;

use casefile::config::{Cli, Command, DatabaseArgs, ServeArgs};
use casefile::db::Database;
use casefile::server::{Server, shutdown_signal};
use casefile::store::Store;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
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
        Command::Serve(args) => serve(args).await,
        Command::Simulate(args) => casefile::simulate::run(&args).await,
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
