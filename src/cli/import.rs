//! `casefile import FILE`: restores exported sessions into this database through the store's
//! row-restore writer, as the demo is loaded: every record checked by the live writers' rules,
//! ids kept, each session in a transaction of its own. A session already in the database is
//! skipped and keeps what it has (importing twice changes nothing, and an interrupted import
//! is finished by running it again). Each imported session's audit trail records the import.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use tokio::io::{AsyncBufRead, AsyncBufReadExt as _, BufReader};

use super::database::with_database;
use crate::db::DatabaseArgs;
use crate::store::Store;
use crate::store::audit::Origin;
use crate::store::export::SessionDocument;
use crate::store::write::restore::{Records, restore};

/// What `casefile import` reads.
#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// The export: one session document a line (`-`: standard input).
    pub file: PathBuf,

    /// Who imports, for the audit trail (default: `cli:` and the system user).
    #[arg(long, env = "CASEFILE_IMPORT_ACTOR")]
    pub actor: Option<String>,

    #[command(flatten)]
    pub database: DatabaseArgs,
}

pub async fn run(args: &ImportArgs) -> anyhow::Result<()> {
    with_database(&args.database, |store| async move {
        run_on_database(&store, args).await
    })
    .await
}

/// Imports `args.file` into `store`'s database, printing what it did.
pub async fn run_on_database(store: &Store, args: &ImportArgs) -> anyhow::Result<()> {
    let input: Box<dyn AsyncBufRead + Unpin + Send> = if args.file.as_os_str() == "-" {
        Box::new(BufReader::new(tokio::io::stdin()))
    } else {
        let file = tokio::fs::File::open(&args.file)
            .await
            .with_context(|| format!("cannot open {}", args.file.display()))?;
        Box::new(BufReader::new(file))
    };
    let origin = Origin {
        actor: Some(args.actor.clone().unwrap_or_else(super::command_line_actor)),
        action: "import".to_owned(),
        ..Origin::default()
    };
    let (mut imported, mut skipped) = (0u64, 0u64);
    let mut lines = input.lines();
    let mut number = 0;
    while let Some(line) = lines.next_line().await? {
        number += 1;
        if line.trim().is_empty() {
            continue;
        }
        let document = SessionDocument::parse(&line).with_context(|| format!("line {number}"))?;
        let session = document.session.id;
        let mut records = Records::default();
        document.add_to(&mut records);
        let restored = restore(store, &records, &origin)
            .await
            .with_context(|| format!("line {number}: session {session}"))?;
        if restored.new == 0 {
            skipped += 1;
        } else {
            imported += 1;
        }
    }
    println!("Imported {imported} sessions; skipped {skipped} already in this database.");
    Ok(())
}
