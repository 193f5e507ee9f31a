use clap::Parser as _;

use casefile::cli::{self, Cli, Command};

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
        Command::Serve(args) => cli::serve::run(*args).await,
        Command::Migrate(args) => cli::migrate::run(&args).await,
        Command::Schema => {
            cli::schema::run();
            Ok(())
        }
        Command::Demo(args) => cli::demo::run(&args).await,
        Command::Simulate(args) => cli::simulate::run(&args).await,
        Command::Token(command) => cli::token::run(command).await,
        Command::Prices(command) => cli::prices::run(command).await,
        Command::Purge(args) => cli::purge::run(&args).await,
        Command::Export(args) => cli::export::run(&args).await,
        Command::Import(args) => cli::import::run(&args).await,
        Command::CheckDistribution(args) => cli::check_distribution::run(&args).await,
    }
}
