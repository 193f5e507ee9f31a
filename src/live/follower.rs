//! Where this process is in the change log, and how it moves on.
//!
//! Log ids are taken before commit, so a change can become visible after a later one: ids
//! skipped over are kept as gaps and read again until they appear, or until every transaction
//! that was running when they were missed has ended (then they were rolled back). The gaps are
//! bounded: past the bound the oldest are given up, and subscribers resume from the data, since
//! a change given up on may still commit.
//!
//! The follower's position (everything up to it was read) is what it reports in its heartbeat;
//! the log is pruned below every live reader's position. A follower that finds the log pruned
//! past its position (its heartbeats stopped for too long), or the log reset (emptied by a
//! crash), may have missed changes: it says so, and its subscribers resume from the data.

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::error::Result;
use crate::store::Store;
use crate::store::change_log::{LogRead, LoggedChange};

/// Ids just below the newest one checked at start-up for transactions still in flight.
const STARTUP_WINDOW: i64 = 5_000;
/// Changes read per statement.
const BATCH: i64 = 1000;
/// The most ids waited for at once.
pub const MAX_GAPS: usize = 10_000;

#[derive(Clone)]
pub(super) struct Follower {
    /// The highest id read.
    last: i64,
    /// Ids below `last` not seen yet (their transaction may still commit) → the xmax of the
    /// snapshot of the read that first missed them.
    gaps: BTreeMap<i64, i64>,
    /// The log's epoch when this process last read it.
    epoch: Option<Uuid>,
    max_gaps: usize,
}

/// What one read brought.
pub(super) struct Step {
    /// New changes, in id order.
    pub rows: Vec<LoggedChange>,
    /// Whether there may be more right away.
    pub more: bool,
    /// Changes may have been missed: subscribers must resume from the data.
    pub missed: bool,
    /// Ids handed out past the last one read (changes not read yet, transactions in flight or
    /// rolled back).
    pub backlog: i64,
    /// Where the follower is once these rows are published.
    pub next: Follower,
}

impl Follower {
    /// Starts at the newest change; ids missing just below it may belong to transactions still
    /// in flight, so they are gaps (seen under the start-up snapshot) like any other.
    pub async fn start(store: &Store, max_gaps: usize) -> Result<Follower> {
        let start = store.change_log_start(STARTUP_WINDOW).await?;
        let gaps = ((start.newest - STARTUP_WINDOW).max(0) + 1..start.newest)
            .filter(|id| !start.present.contains(id))
            .map(|id| (id, start.snap_xmax))
            .collect();
        Ok(Follower {
            last: start.newest,
            gaps,
            epoch: None,
            max_gaps,
        })
    }

    /// Every change with an id up to here was read.
    pub fn position(&self) -> i64 {
        match self.gaps.first_key_value() {
            Some((&gap, _)) => gap - 1,
            None => self.last,
        }
    }

    /// Reads what is new. The position moves only once the caller has published the rows (it
    /// takes [`Step::next`]), so a change whose reading or publishing failed is read again.
    pub async fn step(&self, store: &Store) -> Result<Step> {
        let gap_ids: Vec<i64> = self.gaps.keys().copied().collect();
        let read = store.read_change_log(self.last, &gap_ids, BATCH).await?;
        self.clone().advance(store, read).await
    }

    async fn advance(mut self, store: &Store, read: LogRead) -> Result<Step> {
        let epoch = match read.epoch {
            Some(epoch) => epoch,
            None => store.mark_change_log_epoch().await?,
        };
        let known = self.epoch.replace(epoch);
        if known.is_some_and(|known| known != epoch) || read.seq_last < self.last {
            // Emptied by a crash (or by hand): changes not read before are gone, and what is in
            // the log now is all new.
            tracing::warn!(
                "the live change log was reset (PostgreSQL restarted after a crash?); \
                 subscribers resume from the data"
            );
            self.last = 0;
            self.gaps.clear();
            return Ok(self.missed(read.seq_last));
        }
        if read.pruned_through > self.position() {
            tracing::warn!(
                position = self.position(),
                pruned_through = read.pruned_through,
                "the live change log was pruned past what this process read (it stalled longer \
                 than --change-log-reader-timeout); subscribers resume from the data"
            );
            self.gaps = self.gaps.split_off(&(read.pruned_through + 1));
            self.last = self.last.max(read.pruned_through);
            return Ok(self.missed(read.seq_last));
        }
        let more = read.rows.len() as i64 == BATCH;
        for row in &read.rows {
            self.gaps.remove(&row.log_id);
            if row.log_id > self.last {
                for missing in (self.last + 1)..row.log_id {
                    self.gaps.insert(missing, read.snap_xmax);
                }
                self.last = row.log_id;
            }
        }
        // Every transaction running when a gap was first missed has ended by this snapshot (its
        // xmin is past that read's xmax), and the id is still not there: it was never committed.
        self.gaps
            .retain(|_, missed_under| read.snap_xmin < *missed_under);
        let mut missed = false;
        if self.gaps.len() > self.max_gaps {
            let keep_from = *self
                .gaps
                .keys()
                .nth(self.gaps.len() - self.max_gaps)
                .expect("more gaps than kept");
            tracing::warn!(
                given_up = self.gaps.len() - self.max_gaps,
                "too many changes awaited at once (a long transaction holds them); the oldest \
                 are given up and subscribers resume from the data"
            );
            self.gaps = self.gaps.split_off(&keep_from);
            missed = true;
        }
        Ok(Step {
            backlog: (read.seq_last - self.last).max(0),
            rows: read.rows,
            more,
            missed,
            next: self,
        })
    }

    fn missed(self, seq_last: i64) -> Step {
        Step {
            rows: Vec::new(),
            more: true,
            missed: true,
            backlog: (seq_last - self.last).max(0),
            next: self,
        }
    }
}
