//! The command line: one file per command, each with its arguments and its `run`. Every flag
//! has an environment variable. The options of what a command runs live with that module
//! (`db::DatabaseArgs`, `http::HttpOptions`, `retention::PurgeBatches`, …), flattened here.

pub mod check_distribution;
pub mod client;
mod database;
pub mod demo;
pub mod export;
pub mod import;
pub mod migrate;
pub mod prices;
pub mod purge;
pub mod schema;
pub mod serve;
pub mod simulate;
pub mod token;

use clap::{Parser, Subcommand};

use crate::db::DatabaseArgs;
use crate::observe::logging::LogFormat;
use export::ExportArgs;
use import::ImportArgs;
use migrate::MigrateArgs;
use prices::PricesCommand;
use purge::PurgeArgs;
use serve::ServeArgs;
use simulate::SimulateArgs;
use token::TokenCommand;

/// casefile: stores and serves the records of AI-agent investigation sessions over GraphQL.
#[derive(Debug, Parser)]
#[command(name = "casefile", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,

    /// Log line format: text (for people) or json (one object per line, for collectors).
    /// Default: text on a terminal, json otherwise.
    #[arg(long, global = true, env = "CASEFILE_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the GraphQL server (migrations are applied at start-up).
    Serve(Box<ServeArgs>),
    /// Apply pending database migrations and exit.
    Migrate(MigrateArgs),
    /// Print the GraphQL schema (SDL) the server serves.
    Schema,
    /// Load the demo investigation sessions (idempotent) and exit.
    Demo(DatabaseArgs),
    /// Play a live investigation against a running server (through its GraphQL API), to watch.
    Simulate(SimulateArgs),
    /// Manage API tokens (create, list, revoke).
    #[command(subcommand)]
    Token(TokenCommand),
    /// Manage the price list LLM interactions are priced with (import).
    #[command(subcommand)]
    Prices(PricesCommand),
    /// Hard-delete old sessions (with everything under them) and idempotency receipts, in small
    /// batches. A dry run by default: it prints what would go; `--execute` deletes.
    Purge(PurgeArgs),
    /// Write sessions as JSON documents: one (`--session`), or many as one document a line
    /// (`--since`, `--until`, `--filter`), resumable.
    Export(ExportArgs),
    /// Restore exported sessions (from `casefile export` or `GET /sessions/{id}/export`) into
    /// this database, ids kept; a session already there is skipped.
    Import(ImportArgs),
    /// Check that the database's schema distributes by session (docs/scale-out.md), as it is: no
    /// migration is applied. Prints each finding and fails if there is any.
    CheckDistribution(DatabaseArgs),
}

/// Who runs a command that changes data, for the audit trail: `cli:` and the system user.
fn command_line_actor() -> String {
    match std::env::var("USER").unwrap_or_default() {
        user if user.is_empty() => "cli".to_owned(),
        user => format!("cli:{user}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory as _;
        Cli::command().debug_assert();
    }
}
