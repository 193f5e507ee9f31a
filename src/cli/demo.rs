//! `casefile demo` (and `serve --demo`): loads the demo investigation sessions (idempotent).

use super::database::with_database;
use crate::db::DatabaseArgs;
use crate::store::Store;

pub async fn run(args: &DatabaseArgs) -> anyhow::Result<()> {
    with_database(args, |store| async move { load(&store).await }).await
}

/// Loads the demo sessions into `store` and logs what it loaded.
pub(super) async fn load(store: &Store) -> anyhow::Result<()> {
    let summary = crate::demo::load(store).await?;
    tracing::info!("{summary}");
    Ok(())
}
