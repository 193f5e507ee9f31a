//! A purge: a policy run in small batches, paced and retried, and recorded (what it deleted, and
//! how it ended).

use std::time::Duration;

use tokio::sync::watch;
use uuid::Uuid;

use super::archive::Archive;
use super::options::PurgeBatches;
use super::policy::Policy;
use crate::error::sqlstate::DbFailure;
use crate::error::{Error, Result};
use crate::model::{PurgeStatus, PurgeTrigger};
use crate::observe::metrics::RETENTION_DELETED;
use crate::store::Store;

/// Receipts forgotten per transaction (small rows, one index).
const RECEIPT_BATCH: i64 = 1_000;
/// Audit records forgotten per transaction, from each of the two tables (small rows, a few
/// indexes).
const AUDIT_BATCH: i64 = 1_000;
/// Times a batch that met a lock (or a deadlock) is tried again before the purge gives up.
const RETRIES: u32 = 3;

/// What a purge did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Purged {
    /// Its record.
    pub id: Uuid,
    pub sessions: i64,
    pub receipts: i64,
    pub audit_records: i64,
    /// Transactions it took.
    pub batches: u32,
}

/// A purge that failed (or was stopped) part of the way: what it had deleted, and why it ended.
#[derive(Debug, thiserror::Error)]
#[error(
    "purge {} ended after deleting {} sessions, {} receipts and {} audit records: {error}",
    purged.id, purged.sessions, purged.receipts, purged.audit_records
)]
pub struct PurgeFailed {
    pub purged: Purged,
    pub error: Error,
}

/// Runs `policy` in batches, recorded as a purge by `actor`: sessions first, then receipts.
/// With an `archive`, each batch's sessions are exported there first, and only those written
/// and unchanged since are deleted. When `stop` turns true it ends after the batch it is in.
/// A failure (or a stop, or an archive write that failed) is recorded with what was deleted
/// before it, and returned.
pub async fn purge(
    store: &Store,
    policy: &Policy,
    actor: &str,
    trigger: PurgeTrigger,
    batches: PurgeBatches,
    archive: Option<&Archive>,
    stop: &watch::Receiver<bool>,
) -> Result<Purged, PurgeFailed> {
    let failed = |purged, error| PurgeFailed { purged, error };
    let unrecorded = Purged {
        id: Uuid::nil(),
        sessions: 0,
        receipts: 0,
        audit_records: 0,
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
        audit_records: 0,
        batches: 0,
    };
    let result = run_batches(store, policy, batches, archive, stop, &mut purged).await;
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
    archive: Option<&Archive>,
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
            let batch = match archive {
                None => store.purge_sessions(id, criteria, size, None).await?,
                Some(archive) => {
                    // Exported before the batch's transaction: however long a large session
                    // takes to write, it holds no lock (and no transaction) meanwhile.
                    let mut archived = Vec::new();
                    for session in store.purge_candidates(criteria, size).await? {
                        archived.push(archive.write(store, session).await?);
                    }
                    if archived.is_empty() {
                        return Ok((0, 0));
                    }
                    // A session that changed after its export stays for the next batch; one a
                    // writer holds, for the next run, as without an archive.
                    store
                        .purge_sessions(id, criteria, size, Some(&archived))
                        .await?
                }
            };
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
    if let Some(before) = policy.audit_before {
        let counts = (&mut purged.audit_records, &mut purged.batches);
        pace.run(
            "audit_records",
            AUDIT_BATCH,
            false,
            counts,
            |size| async move { store.purge_audit_records(id, before, size).await },
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
