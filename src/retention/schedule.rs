//! The server's own purges: its `--retention-…` policy, run on an interval.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::archive::Archive;
use super::batches::purge;
use super::options::RetentionOptions;
use super::policy::{Cutoff, Policy};
use crate::model::PurgeTrigger;
use crate::store::Store;

/// Runs the server's retention policy every `options.interval` until `stop` turns true (a run
/// then ends after its current batch). A run that deletes nothing leaves no record; one that
/// fails is recorded and logged, and the next interval tries again.
pub fn spawn_schedule(
    store: Store,
    options: RetentionOptions,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let actor = format!("schedule:{}", host_name());
    let archive = options.archive_dir.clone().map(Archive::Directory);
    let interval = options
        .interval
        .to_std()
        .unwrap_or(Duration::from_secs(3600));
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = tokio::time::sleep(interval) => {}
                _ = stop.changed() => return,
            }
            if *stop.borrow() {
                return;
            }
            let policy = policy(&options, Utc::now());
            let result = purge(
                &store,
                &policy,
                &actor,
                PurgeTrigger::Schedule,
                options.batches,
                archive.as_ref(),
                &stop,
            )
            .await;
            match result {
                Ok(purged) if purged.sessions == 0 && purged.receipts == 0 => {
                    if let Err(err) = store.forget_empty_purge(purged.id).await {
                        tracing::warn!("forgetting an empty scheduled purge failed: {err}");
                    }
                }
                Ok(purged) => tracing::info!(
                    purge = %purged.id,
                    sessions = purged.sessions,
                    receipts = purged.receipts,
                    batches = purged.batches,
                    "retention: purged sessions and receipts past their policy"
                ),
                Err(err) => tracing::warn!("retention: the scheduled purge failed: {err}"),
            }
        }
    })
}

/// This machine's name, for the record of what its schedule purged.
fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|name| !name.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|name| name.trim().to_owned())
                .filter(|name| !name.is_empty())
        })
        .unwrap_or_else(|| "casefile".to_owned())
}

/// The server's policy, for a run starting at `now`.
fn policy(options: &RetentionOptions, now: DateTime<Utc>) -> Policy {
    Policy::new(
        options.deleted_before.map(Cutoff::Age),
        options.finished_before.map(Cutoff::Age),
        Some(Cutoff::Age(options.receipts_before)),
        now,
    )
    .with_audit_before(options.audit_before.map(Cutoff::Age), now)
}
