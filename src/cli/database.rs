//! The database a command works on: connected, migrated (unless the command looks at the schema
//! as it is), and shut down when it is done.

use std::time::Instant;

use crate::db::{Database, DatabaseArgs};
use crate::store::Store;

/// Connects, migrates, runs `work`, and shuts the database down whatever `work` returned.
pub(super) async fn with_database<F, Fut>(args: &DatabaseArgs, work: F) -> anyhow::Result<()>
where
    F: FnOnce(Store) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    run_on(connect(args).await?, work).await
}

/// Connects without migrating (to look at the schema as it is), runs `work`, and shuts the
/// database down whatever `work` returned.
pub(super) async fn with_database_as_is<F, Fut>(args: &DatabaseArgs, work: F) -> anyhow::Result<()>
where
    F: FnOnce(Store) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    run_on(Database::connect(args).await?, work).await
}

async fn run_on<F, Fut>(db: Database, work: F) -> anyhow::Result<()>
where
    F: FnOnce(Store) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let result = work(Store::new(db.pool().clone())).await;
    db.shutdown().await;
    result
}

/// Connects and applies pending migrations.
pub(super) async fn connect(args: &DatabaseArgs) -> anyhow::Result<Database> {
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
