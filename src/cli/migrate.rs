//! `casefile migrate`: applies pending database migrations and exits.

use crate::db::DatabaseArgs;

pub async fn run(args: &DatabaseArgs) -> anyhow::Result<()> {
    super::with_database(args, |_| async { Ok(()) }).await
}
