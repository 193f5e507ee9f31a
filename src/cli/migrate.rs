//! `casefile migrate`: applies pending database migrations and exits.

use super::database::with_database;
use crate::db::DatabaseArgs;

pub async fn run(args: &DatabaseArgs) -> anyhow::Result<()> {
    with_database(args, |_| async { Ok(()) }).await
}
