//! `casefile purge`: counts what a retention policy would delete (a dry run, by default), or
//! deletes it in batches with `--execute`, on the database directly. On the embedded database
//! it needs the data directory to itself; a running server purges by its `--retention-…`
//! schedule instead.

use chrono::{SecondsFormat, Utc};
use clap::Args;
use tokio::sync::watch;

use super::database::with_database;
use crate::db::DatabaseArgs;
use crate::model::PurgeTrigger;
use crate::retention::{Archive, Cutoff, Policy, PurgeBatches, parse_cutoff, purge};
use crate::store::Store;

/// What `casefile purge` deletes. Sessions matching either criterion go.
#[derive(Debug, Clone, Args)]
pub struct PurgeArgs {
    /// Sessions soft-deleted before this: an age (`30d`, `12h`) or an instant
    /// (`2026-01-01T00:00:00Z`).
    #[arg(long, value_parser = parse_cutoff)]
    pub deleted_before: Option<Cutoff>,

    /// Sessions that finished (completed, failed, timed out or cancelled) before this, and whose
    /// chats have had no activity since: an age or an instant.
    #[arg(long, value_parser = parse_cutoff)]
    pub finished_before: Option<Cutoff>,

    /// Idempotency receipts older than this: an age or an instant (a retry of a create whose
    /// receipt is gone gets CONFLICT).
    #[arg(long, value_parser = parse_cutoff)]
    pub receipts_before: Option<Cutoff>,

    /// Audit records made before this: an age or an instant (the purge itself is recorded in
    /// the audit trail).
    #[arg(long, value_parser = parse_cutoff)]
    pub audit_before: Option<Cutoff>,

    /// Archive each session before deleting it: its export (`casefile export`'s document) into
    /// this directory, one `<session id>.json` each, or `-` for standard output, one a line
    /// (the purge's own messages then go to standard error). A session is deleted only once
    /// its archive is written, and only if it did not change since; a failed write stops the
    /// purge. Seed 000's Q12: archive, then delete.
    #[arg(long, value_parser = Archive::parse)]
    pub archive: Option<Archive>,

    /// Delete (without it, only count what would be deleted).
    #[arg(long)]
    pub execute: bool,

    /// Who runs it, for the purge's record (default: `cli:` and the system user).
    #[arg(long, env = "CASEFILE_PURGE_ACTOR")]
    pub actor: Option<String>,

    #[command(flatten)]
    pub batches: PurgeBatches,

    #[command(flatten)]
    pub database: DatabaseArgs,
}

pub async fn run(args: &PurgeArgs) -> anyhow::Result<()> {
    with_database(&args.database, |store| async move {
        run_on_database(&store, args).await
    })
    .await
}

/// Counts what `args` selects, or deletes it with `--execute`, printing what it does.
async fn run_on_database(store: &Store, args: &PurgeArgs) -> anyhow::Result<()> {
    let now = Utc::now();
    let policy = Policy::new(
        args.deleted_before,
        args.finished_before,
        args.receipts_before,
        now,
    )
    .with_audit_before(args.audit_before, now);
    if policy.is_empty() {
        anyhow::bail!(
            "nothing to purge: give --deleted-before, --finished-before, --receipts-before or \
             --audit-before"
        );
    }
    let time = |t: chrono::DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
    let mut selected = Vec::new();
    if let Some(before) = policy.sessions.deleted_before {
        selected.push(format!("soft-deleted before {}", time(before)));
    }
    if let Some(before) = policy.sessions.finished_before {
        selected.push(format!(
            "finished before {} (with no chat activity since)",
            time(before)
        ));
    }
    if !args.execute {
        println!("Dry run: nothing is deleted. Run again with --execute to delete.");
        if !selected.is_empty() {
            let counts = store.count_purgeable(&policy.sessions).await?;
            println!("Sessions {}:", selected.join(", or "));
            for (what, n) in [
                ("sessions", counts.sessions),
                ("stages", counts.stages),
                ("agent executions", counts.agent_executions),
                ("timeline events", counts.timeline_events),
                ("messages", counts.messages),
                ("LLM interactions", counts.llm_interactions),
                ("MCP interactions", counts.mcp_interactions),
                ("chats", counts.chats),
                ("session events", counts.session_events),
                ("runs of appends", counts.session_event_runs),
            ] {
                println!("  {what:<18} {n:>12}");
            }
        }
        if let Some(before) = policy.receipts_before {
            let n = store.count_old_receipts(before).await?;
            println!("Idempotency receipts from before {}: {n}", time(before));
        }
        if let Some(before) = policy.audit_before {
            let n = store.count_old_audit_records(before).await?;
            println!("Audit records from before {}: {n}", time(before));
        }
        return Ok(());
    }

    let actor = args.actor.clone().unwrap_or_else(super::command_line_actor);
    let mut deleting = Vec::new();
    if !selected.is_empty() {
        deleting.push(format!("sessions {}", selected.join(", or ")));
    }
    if let Some(before) = policy.receipts_before {
        deleting.push(format!("idempotency receipts from before {}", time(before)));
    }
    if let Some(before) = policy.audit_before {
        deleting.push(format!("audit records from before {}", time(before)));
    }
    // Standard output may be the archive.
    let say = |text: String| match args.archive {
        Some(Archive::StandardOutput) => eprintln!("{text}"),
        _ => println!("{text}"),
    };
    if let Some(Archive::Directory(dir)) = &args.archive {
        deleting.push(format!("each session archived first in {}", dir.display()));
    }
    say(format!("Deleting {}.", deleting.join("; and ")));
    // Ctrl-C ends the purge after its current batch, recorded as failed ("stopped").
    let (stopping, stop) = watch::channel(false);
    let interrupt = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            let _ = stopping.send(true);
        }
    });
    let started = std::time::Instant::now();
    let result = purge(
        store,
        &policy,
        &actor,
        PurgeTrigger::Command,
        args.batches,
        args.archive.as_ref(),
        &stop,
    )
    .await;
    interrupt.abort();
    let purged = result?;
    say(format!(
        "Purge {}: deleted {} sessions (each with everything under it), {} idempotency \
         receipts and {} audit records in {} batches ({:.1} s).",
        purged.id,
        purged.sessions,
        purged.receipts,
        purged.audit_records,
        purged.batches,
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}
