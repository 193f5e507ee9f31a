//! The database options: where the data lives, and the time limits every connection sets.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::options::parse_seconds;

/// Where the data lives.
#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// PostgreSQL URL. When unset, casefile runs an embedded PostgreSQL (pglite) in-process.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,

    /// Data directory of the embedded PostgreSQL (ignored when DATABASE_URL is set).
    #[arg(long, env = "CASEFILE_DATA_DIR", default_value = "./casefile-data")]
    pub data_dir: PathBuf,

    /// Maximum connections in the pool to an external PostgreSQL (the embedded one takes exactly
    /// one). The server opens `--append-groups-in-flight` more, to store single appends.
    #[arg(long, env = "CASEFILE_DB_MAX_CONNECTIONS", default_value_t = 10)]
    pub db_max_connections: u32,

    #[command(flatten)]
    pub timeouts: DbTimeouts,
}

/// Limits every pooled connection sets on itself, so one statement or transaction cannot hold
/// the database (or a lock) for long.
#[derive(Debug, Clone, Copy, Args)]
pub struct DbTimeouts {
    /// Seconds one statement may run.
    #[arg(
        long = "db-statement-timeout-secs",
        env = "CASEFILE_DB_STATEMENT_TIMEOUT_SECS",
        default_value = "30",
        value_parser = parse_seconds
    )]
    pub statement: Duration,

    /// Seconds a statement may wait for a lock.
    #[arg(
        long = "db-lock-timeout-secs",
        env = "CASEFILE_DB_LOCK_TIMEOUT_SECS",
        default_value = "10",
        value_parser = parse_seconds
    )]
    pub lock: Duration,

    /// Seconds a transaction may sit idle before the database ends it.
    #[arg(
        long = "db-idle-in-transaction-timeout-secs",
        env = "CASEFILE_DB_IDLE_IN_TRANSACTION_TIMEOUT_SECS",
        default_value = "60",
        value_parser = parse_seconds
    )]
    pub idle_in_transaction: Duration,
}

impl Default for DbTimeouts {
    fn default() -> Self {
        crate::options::defaults()
    }
}
