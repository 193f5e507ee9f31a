//! Retention (seed 000 Q12): a purge runs a policy — sessions soft-deleted or finished before a
//! cutoff, idempotency receipts older than one — in small batches, and leaves a record of what
//! it did. `casefile purge` runs it once; the server runs the same policy on a schedule
//! (`--retention-…`), the only way on the embedded database while it serves.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::config::{Cutoff, PurgeBatches, RetentionOptions};
use crate::error::sqlstate::DbFailure;
use crate::error::{Error, Result};
use crate::model::{PurgeStatus, PurgeTrigger};
use crate::observe::metrics::RETENTION_DELETED;
use crate::store::Store;
use crate::store::retention::SessionCriteria;

/// Receipts forgotten per transaction (small rows, one index).
const RECEIPT_BATCH: i64 = 1_000;
/// Times a batch that met a lock (or a deadlock) is tried again before the purge gives up.
const RETRIES: u32 = 3;

/// What a purge deletes, as instants, and as it was given (for its record).
#[derive(Debug, Clone)]
pub struct Policy {
    pub sessions: SessionCriteria,
    pub receipts_before: Option<DateTime<Utc>>,
    described: Map<String, Value>,
}

impl Policy {
    /// The policy of cutoffs given as ages or instants, for a purge starting at `now`.
    pub fn new(
        deleted_before: Option<Cutoff>,
        finished_before: Option<Cutoff>,
        receipts_before: Option<Cutoff>,
        now: DateTime<Utc>,
    ) -> Policy {
        let mut described = Map::new();
        let mut resolve = |name: &str, cutoff: Option<Cutoff>| {
            let instant = cutoff.map(|c| c.instant(now));
            if let (Some(cutoff), Some(instant)) = (cutoff, instant) {
                let mut entry =
                    json!({ "instant": instant.to_rfc3339_opts(SecondsFormat::Secs, true) });
                if let Cutoff::Age(age) = cutoff {
                    entry["age"] = json!(describe_age(age));
                }
                described.insert(name.to_owned(), entry);
            }
            instant
        };
        let sessions = SessionCriteria {
            deleted_before: resolve("deletedBefore", deleted_before),
            finished_before: resolve("finishedBefore", finished_before),
        };
        let receipts_before = resolve("receiptsBefore", receipts_before);
        Policy {
            sessions,
            receipts_before,
            described,
        }
    }

    /// The server's policy, for a run starting at `now`.
    pub fn scheduled(options: &RetentionOptions, now: DateTime<Utc>) -> Policy {
        Policy::new(
            options.deleted_before.map(Cutoff::Age),
            options.finished_before.map(Cutoff::Age),
            Some(Cutoff::Age(options.receipts_before)),
            now,
        )
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty() && self.receipts_before.is_none()
    }

    /// The policy as recorded: each cutoff's instant, and its age when given as one.
    pub fn describe(&self) -> Value {
        Value::Object(self.described.clone())
    }
}

/// `30d`, `12h`, `90m` or `45s`: the largest unit that divides the age.
fn describe_age(age: chrono::Duration) -> String {
    let seconds = age.num_seconds();
    for (unit, length) in [("d", 86_400), ("h", 3_600), ("m", 60)] {
        if seconds % length == 0 {
            return format!("{}{unit}", seconds / length);
        }
    }
    format!("{seconds}s")
}

/// What a purge did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Purged {
    /// Its record.
    pub id: Uuid,
    pub sessions: i64,
    pub receipts: i64,
    /// Transactions it took.
    pub batches: u32,
}

/// A purge that failed (or was stopped) part of the way: what it had deleted, and why it ended.
#[derive(Debug, thiserror::Error)]
#[error(
    "purge {} ended after deleting {} sessions and {} receipts: {error}",
    purged.id, purged.sessions, purged.receipts
)]
pub struct PurgeFailed {
    pub purged: Purged,
    pub error: Error,
}

/// Runs `policy` in batches, recorded as a purge by `actor`: sessions first, then receipts.
/// When `stop` turns true it ends after the batch it is in. A failure (or a stop) is recorded
/// with what was deleted before it, and returned.
pub async fn purge(
    store: &Store,
    policy: &Policy,
    actor: &str,
    trigger: PurgeTrigger,
    batches: PurgeBatches,
    stop: &watch::Receiver<bool>,
) -> Result<Purged, PurgeFailed> {
    let failed = |purged, error| PurgeFailed { purged, error };
    let unrecorded = Purged {
        id: Uuid::nil(),
        sessions: 0,
        receipts: 0,
        batches: 0,
    };
    let id = store
        .begin_purge(actor, trigger, &policy.describe())
        .await
        .map_err(|error| failed(unrecorded, error))?;
    let mut purged = Purged {
        id,
        sessions: 0,
        receipts: 0,
        batches: 0,
    };
    let result = run_batches(store, policy, batches, stop, &mut purged).await;
    let (status, error) = match &result {
        Ok(()) => (PurgeStatus::Completed, None),
        Err(err) => (PurgeStatus::Failed, Some(err.to_string())),
    };
    if let Err(error) = store.finish_purge(id, status, error.as_deref()).await {
        return Err(failed(purged, result.err().unwrap_or(error)));
    }
    result
        .map(|()| purged)
        .map_err(|error| failed(purged, error))
}

async fn run_batches(
    store: &Store,
    policy: &Policy,
    batches: PurgeBatches,
    stop: &watch::Receiver<bool>,
    purged: &mut Purged,
) -> Result<()> {
    let pace = Pace {
        pause: Duration::from_millis(batches.pause_ms),
        stop,
    };
    let id = purged.id;
    if !policy.sessions.is_empty() {
        let criteria = &policy.sessions;
        let counts = (&mut purged.sessions, &mut purged.batches);
        pace.run("sessions", batches.size, true, counts, |size| async move {
            let batch = store.purge_sessions(id, criteria, size).await?;
            Ok((batch.locked, batch.deleted))
        })
        .await?;
    }
    if let Some(before) = policy.receipts_before {
        let counts = (&mut purged.receipts, &mut purged.batches);
        pace.run(
            "receipts",
            RECEIPT_BATCH,
            false,
            counts,
            |size| async move {
                let deleted = store.purge_receipts(id, before, size).await?;
                Ok((deleted, deleted))
            },
        )
        .await?;
    }
    Ok(())
}

/// How a purge runs its batches: with a pause between them, and not past a stop.
struct Pace<'a> {
    pause: Duration,
    stop: &'a watch::Receiver<bool>,
}

impl Pace<'_> {
    /// Runs `batch(size)`, which says how many rows it took and how many of those it deleted,
    /// until one takes fewer than `size`. Each batch's deletions (`what`, for the metric) are
    /// added to the first of `counts` and the batch counted in the second as it commits, so a
    /// failure leaves both as far as they got. A batch that met a lock or a deadlock runs again
    /// (three times in a row at most); one that ran out of statement time runs again at half
    /// the size when the batch `shrinks` (down to one), else as one that met a lock.
    async fn run<F, Fut>(
        &self,
        what: &'static str,
        mut size: i64,
        shrinks: bool,
        (deleted, batches): (&mut i64, &mut u32),
        mut batch: F,
    ) -> Result<()>
    where
        F: FnMut(i64) -> Fut,
        Fut: Future<Output = Result<(i64, i64)>>,
    {
        let mut retries = 0;
        loop {
            if *self.stop.borrow() {
                return Err(Error::Internal("stopped before it finished".to_owned()));
            }
            // Awaited apart from the match, whose arms wait too: the call's borrows end here.
            let result = batch(size).await;
            let (taken, gone) = match result {
                Ok(done) => done,
                Err(err) => match Trouble::of(&err, shrinks) {
                    Some(Trouble::TooSlow) if size > 1 => {
                        size = (size / 2).max(1);
                        tracing::info!("a purge batch took too long; now {size} {what} a batch");
                        continue;
                    }
                    Some(Trouble::Contended) if retries < RETRIES => {
                        retries += 1;
                        tracing::info!(
                            "a purge batch met a lock; trying again ({retries} of {RETRIES})"
                        );
                        tokio::time::sleep(self.pause.max(Duration::from_millis(250)) * retries)
                            .await;
                        continue;
                    }
                    _ => return Err(err),
                },
            };
            retries = 0;
            *batches += 1;
            *deleted += gone;
            metrics::counter!(RETENTION_DELETED, "what" => what).increment(gone as u64);
            if taken < size {
                return Ok(());
            }
            tokio::time::sleep(self.pause).await;
        }
    }
}

/// Why a batch failed when another try may succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trouble {
    /// It gave up waiting for a lock, or was chosen to end a deadlock: the same batch again.
    Contended,
    /// It ran out of statement time: a smaller batch.
    TooSlow,
}

impl Trouble {
    /// The trouble behind `err`, if another try may succeed; a batch that cannot shrink treats
    /// running out of time as contention.
    fn of(err: &Error, shrinks: bool) -> Option<Trouble> {
        match err.db_failure()? {
            DbFailure::Collision | DbFailure::LockTimeout => Some(Trouble::Contended),
            DbFailure::StatementTimeout if shrinks => Some(Trouble::TooSlow),
            DbFailure::StatementTimeout => Some(Trouble::Contended),
            _ => None,
        }
    }
}

/// Runs the server's retention policy every `options.interval` until `stop` turns true (a run
/// then ends after its current batch). A run that deletes nothing leaves no record; one that
/// fails is recorded and logged, and the next interval tries again.
pub fn spawn_schedule(
    store: Store,
    options: RetentionOptions,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let actor = format!("schedule:{}", host_name());
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
            let policy = Policy::scheduled(&options, Utc::now());
            let result = purge(
                &store,
                &policy,
                &actor,
                PurgeTrigger::Schedule,
                options.batches,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_are_described_in_their_largest_unit() {
        assert_eq!(describe_age(chrono::Duration::days(30)), "30d");
        assert_eq!(describe_age(chrono::Duration::hours(36)), "36h");
        assert_eq!(describe_age(chrono::Duration::minutes(90)), "90m");
        assert_eq!(describe_age(chrono::Duration::seconds(45)), "45s");
    }

    #[test]
    fn a_policy_resolves_ages_against_its_start_and_records_both() {
        let now: DateTime<Utc> = "2026-03-31T00:00:00Z".parse().unwrap();
        let at: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
        let policy = Policy::new(
            Some(Cutoff::Age(chrono::Duration::days(30))),
            Some(Cutoff::At(at)),
            None,
            now,
        );
        assert_eq!(
            policy.sessions.deleted_before,
            Some("2026-03-01T00:00:00Z".parse().unwrap())
        );
        assert_eq!(policy.sessions.finished_before, Some(at));
        assert_eq!(policy.receipts_before, None);
        assert_eq!(
            policy.describe(),
            json!({
                "deletedBefore": { "age": "30d", "instant": "2026-03-01T00:00:00Z" },
                "finishedBefore": { "instant": "2026-01-01T00:00:00Z" },
            })
        );
        assert!(Policy::new(None, None, None, now).is_empty());
    }
}
