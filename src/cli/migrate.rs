//! `casefile migrate`: applies pending database migrations and exits; with
//! `--partition-by-session N`, then partitions the distributed tables by session.

use clap::Args;

use super::database::with_database;
use crate::db::DatabaseArgs;
use crate::distribution::partition_by_session;

#[derive(Debug, Args)]
pub struct MigrateArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,

    /// After migrating, hash-partition every table docs/scale-out.md places as distributed by
    /// its session into this many partitions (the layout a distributed PostgreSQL imposes, on
    /// one PostgreSQL), rows and all; tables already partitioned are left as they are. Run it
    /// again after an upgrade that adds a distributed table.
    #[arg(long, env = "CASEFILE_PARTITION_BY_SESSION", value_name = "N")]
    pub partition_by_session: Option<u32>,
}

pub async fn run(args: &MigrateArgs) -> anyhow::Result<()> {
    let partitions = args.partition_by_session;
    with_database(&args.database, |store| async move {
        if let Some(n) = partitions {
            let partitioned = partition_by_session(&store, n).await?;
            match partitioned.converted.len() {
                0 => println!("every distributed table is partitioned by session already"),
                tables => println!(
                    "partitioned {tables} tables by session into {n} partitions each: {}",
                    partitioned.converted.join(", ")
                ),
            }
        }
        Ok(())
    })
    .await
}
