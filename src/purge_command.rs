//! `casefile purge`: counts what a retention policy would delete (a dry run, by default), or
//! deletes it in batches with `--execute`, on the database directly. On the embedded database
//! it needs the data directory to itself; a running server purges by its `--retention-…`
//! schedule instead.

use chrono::{SecondsFormat, Utc};
use tokio::sync::watch;

use crate::config::PurgeArgs;
use crate::model::PurgeTrigger;
use crate::retention::{Policy, purge};
use crate::store::Store;

pub async fn run(store: &Store, args: &PurgeArgs) -> anyhow::Result<()> {
    let policy = Policy::new(
        args.deleted_before,
        args.finished_before,
        args.receipts_before,
        Utc::now(),
    );
    if policy.is_empty() {
        anyhow::bail!(
            "nothing to purge: give --deleted-before, --finished-before or --receipts-before"
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
            ] {
                println!("  {what:<18} {n:>12}");
            }
        }
        if let Some(before) = policy.receipts_before {
            let n = store.count_old_receipts(before).await?;
            println!("Idempotency receipts from before {}: {n}", time(before));
        }
        return Ok(());
    }

    let actor = args.actor.clone().unwrap_or_else(|| {
        let user = std::env::var("USER").unwrap_or_default();
        if user.is_empty() {
            "cli".to_owned()
        } else {
            format!("cli:{user}")
        }
    });
    let mut deleting = Vec::new();
    if !selected.is_empty() {
        deleting.push(format!("sessions {}", selected.join(", or ")));
    }
    if let Some(before) = policy.receipts_before {
        deleting.push(format!("idempotency receipts from before {}", time(before)));
    }
    println!("Deleting {}.", deleting.join("; and "));
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
        &stop,
    )
    .await;
    interrupt.abort();
    let purged = result?;
    println!(
        "Purge {}: deleted {} sessions (each with everything under it) and {} idempotency \
         receipts in {} batches ({:.1} s).",
        purged.id,
        purged.sessions,
        purged.receipts,
        purged.batches,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
