//! Where this process is in the change log, and how it moves on.
//!
//! The log has no order across sessions to follow (`store::change_log`): the follower reads the
//! changes of the transactions that ended since its last read. A snapshot says which those are:
//! below its `xmax`, every transaction it did not see running had ended. So each read takes the
//! changes after where the last one stopped (the transactions from the last snapshot's `xmax`
//! on), and those of the transactions the last snapshot saw running (awaited: until they end,
//! their changes cannot be seen, and after, they are read once). A read is bounded; one that
//! stops inside a transaction's changes goes on from that change next time.
//!
//! The follower's position (every change logged by a transaction below it was read) is what it
//! reports in its heartbeat; the log is pruned below every live reader's position. A follower
//! that finds the log pruned past its position (its heartbeats stopped for too long), or the
//! log reset (emptied by a crash), may have missed changes: it says so, and its subscribers
//! resume from the data.

use std::collections::{BTreeMap, HashMap};

use uuid::Uuid;

use crate::error::Result;
use crate::store::Store;
use crate::store::change_log::{LogKey, LogRead, LogSnapshot, LoggedChange};

/// Changes read per statement.
const BATCH: i64 = 1000;

#[derive(Clone)]
pub(super) struct Follower {
    /// Changes after this key are read next (the transactions from here on).
    after: LogKey,
    /// Transactions below `after` that were running at the last read → the last of their
    /// changes read (none yet: [`LogKey::before`]).
    awaited: BTreeMap<i64, LogKey>,
    /// The log's epoch when this process last read it.
    epoch: Option<Uuid>,
    /// How far the log was pruned, and how many prunes had deleted changes unread, when this
    /// process last read it (each read past them once, not on every read after).
    pruned_below: i64,
    unread_prunes: Option<i64>,
}

/// What one read brought.
pub(super) struct Step {
    /// New changes: each session's in position order.
    pub rows: Vec<LoggedChange>,
    /// Whether there may be more right away.
    pub more: bool,
    /// Changes may have been missed: subscribers must resume from the data.
    pub missed: bool,
    /// Transactions begun since the oldest whose changes are not all read (running, or not
    /// read yet).
    pub backlog: i64,
    /// Where the follower is once these rows are published.
    pub next: Follower,
}

impl Follower {
    /// Starts at the present: what the transactions that had ended logged is not read, and
    /// those still running are awaited.
    pub async fn start(store: &Store) -> Result<Follower> {
        let mut follower = Follower {
            after: LogKey::before(0),
            awaited: BTreeMap::new(),
            epoch: None,
            pruned_below: 0,
            unread_prunes: None,
        };
        follower.start_at(&store.change_log_snapshot().await?);
        Ok(follower)
    }

    fn start_at(&mut self, snapshot: &LogSnapshot) {
        self.after = LogKey::before(snapshot.xmax);
        self.awaited = snapshot
            .running
            .iter()
            .map(|&x| (x, LogKey::before(x)))
            .collect();
    }

    /// Every change logged by a transaction below this one was read.
    pub fn position(&self) -> i64 {
        match self.awaited.first_key_value() {
            Some((&oldest, _)) => oldest.min(self.after.transaction),
            None => self.after.transaction,
        }
    }

    /// Reads what is new. The position moves only once the caller has published the rows (it
    /// takes [`Step::next`]), so a change whose reading or publishing failed is read again.
    pub async fn step(&self, store: &Store) -> Result<Step> {
        let awaited: Vec<LogKey> = self.awaited.values().copied().collect();
        let read = store.read_change_log(self.after, &awaited, BATCH).await?;
        let epoch = match read.epoch {
            Some(epoch) => epoch,
            None => store.mark_change_log_epoch().await?,
        };
        Ok(self.clone().advance(epoch, read))
    }

    /// Where the follower is after `read`, made under the log's `epoch`.
    fn advance(mut self, epoch: Uuid, read: LogRead) -> Step {
        let known = self.epoch.replace(epoch);
        if known.is_some_and(|known| known != epoch) {
            // Emptied by a crash (or by hand): changes not read before are gone. The subscribers
            // resume from the data as of now; what commits from now on is read.
            tracing::warn!(
                "the live change log was reset (PostgreSQL restarted after a crash?); \
                 subscribers resume from the data"
            );
            self.start_at(&read.snapshot);
            return self.missed(&read.snapshot);
        }
        // Pruned past what this process read (it stalled longer than the reader timeout), or
        // changes it had not read pruned by age (a transaction open longer than the log keeps
        // changes): they may be gone. Its place stays: what is left is still read.
        let pruned_past = read.pruned_below > self.position().max(self.pruned_below);
        let pruned_unread = self
            .unread_prunes
            .is_some_and(|seen| read.unread_prunes > seen);
        self.pruned_below = self.pruned_below.max(read.pruned_below);
        self.unread_prunes = Some(read.unread_prunes);
        if pruned_past || pruned_unread {
            tracing::warn!(
                position = self.position(),
                pruned_below = read.pruned_below,
                "the live change log was pruned of changes this process had not read (it \
                 stalled longer than --change-log-reader-timeout, or a transaction stayed open \
                 longer than the log keeps changes); subscribers resume from the data"
            );
            return self.missed(&read.snapshot);
        }
        let from = self.after.transaction;
        // Read up to here: when the read was cut short, its last change (in the log's order,
        // awaited transactions first); otherwise everything the snapshot saw.
        let upto = match read.cut_at {
            Some(last) => {
                match self.awaited.get_mut(&last.transaction) {
                    Some(awaited) => *awaited = last,
                    None => self.after = last,
                }
                last
            }
            None => {
                self.after = LogKey::before(read.snapshot.xmax);
                self.after
            }
        };
        let running = &read.snapshot.running;
        // An awaited transaction that has ended and was read past is done; one the read stopped
        // inside, or did not reach, goes on being read.
        self.awaited
            .retain(|&x, _| running.contains(&x) || x >= upto.transaction);
        // Transactions read past while running are awaited.
        for &x in running {
            if x >= from && x < self.after.transaction {
                self.awaited.entry(x).or_insert(LogKey::before(x));
            }
        }
        Step {
            backlog: (read.snapshot.xmax - self.position()).max(0),
            rows: in_session_order(read.rows),
            more: read.cut_at.is_some(),
            missed: false,
            next: self,
        }
    }

    fn missed(self, snapshot: &LogSnapshot) -> Step {
        Step {
            rows: Vec::new(),
            more: true,
            missed: true,
            backlog: (snapshot.xmax - self.position()).max(0),
            next: self,
        }
    }
}

/// The rows with each session's in position order (the log's order is by transaction, and a
/// session's changes can be logged by transactions in any order of their ids), sessions in the
/// order they first come.
fn in_session_order(rows: Vec<LoggedChange>) -> Vec<LoggedChange> {
    let mut sessions: HashMap<Uuid, usize> = HashMap::new();
    let mut keyed: Vec<(usize, i64, LoggedChange)> = rows
        .into_iter()
        .map(|row| {
            let next = sessions.len();
            let order = *sessions.entry(row.key.session).or_insert(next);
            (order, row.key.position, row)
        })
        .collect();
    keyed.sort_by_key(|&(order, position, _)| (order, position));
    keyed.into_iter().map(|(_, _, row)| row).collect()
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;
    use crate::store::session_events::SessionEventRow;

    fn change(transaction: i64, session: Uuid, position: i64) -> LoggedChange {
        LoggedChange {
            key: LogKey {
                transaction,
                session,
                position,
            },
            event: SessionEventRow::of_session(session, position, Utc::now()),
        }
    }

    /// A read under a snapshot (`xmax`, `running`); cut short when it found a batch.
    fn read(xmax: i64, running: &[i64], rows: Vec<LoggedChange>) -> LogRead {
        LogRead {
            snapshot: LogSnapshot {
                xmax,
                running: running.to_vec(),
            },
            cut_at: rows
                .last()
                .filter(|_| rows.len() as i64 == BATCH)
                .map(|r| r.key),
            pruned_below: 0,
            unread_prunes: 0,
            epoch: Some(Uuid::nil()),
            rows,
        }
    }

    fn follower(xmax: i64, running: &[i64]) -> Follower {
        let mut follower = Follower {
            after: LogKey::before(0),
            awaited: BTreeMap::new(),
            epoch: Some(Uuid::nil()),
            pruned_below: 0,
            unread_prunes: Some(0),
        };
        follower.start_at(&LogSnapshot {
            xmax,
            running: running.to_vec(),
        });
        follower
    }

    fn awaited(f: &Follower) -> Vec<i64> {
        f.awaited.keys().copied().collect()
    }

    #[test]
    fn a_session_s_changes_come_in_position_order_whatever_their_transactions() {
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let rows = in_session_order(vec![change(10, a, 6), change(11, b, 1), change(12, a, 5)]);
        let order: Vec<(Uuid, i64)> = rows
            .iter()
            .map(|r| (r.key.session, r.key.position))
            .collect();
        assert_eq!(order, [(a, 5), (a, 6), (b, 1)]);
    }

    #[test]
    fn a_transaction_running_at_a_read_is_awaited_until_it_ends() {
        let s = Uuid::from_u128(1);
        let f = follower(100, &[98]);
        assert_eq!(f.position(), 98);
        // 98 still runs; 100 and 102 ended, 101 runs.
        let step = f.advance(Uuid::nil(), read(103, &[98, 101], vec![change(100, s, 1)]));
        assert!(!step.more && !step.missed);
        let f = step.next;
        assert_eq!(f.after, LogKey::before(103));
        assert_eq!(awaited(&f), [98, 101]);
        assert_eq!(f.position(), 98);
        // Both end; 101's change is found from its awaited key, 98 logged nothing.
        let step = f.advance(Uuid::nil(), read(104, &[], vec![change(101, s, 2)]));
        let f = step.next;
        assert!(f.awaited.is_empty());
        assert_eq!(f.position(), 104);
    }

    #[test]
    fn a_read_cut_short_goes_on_from_its_last_change() {
        let s = Uuid::from_u128(1);
        let f = follower(10, &[]);
        let rows: Vec<LoggedChange> = (0..BATCH).map(|p| change(12, s, p)).collect();
        // 11 was running; the read stopped inside 12's changes, so 14 (running) is not reached.
        let step = f.advance(Uuid::nil(), read(20, &[11, 14], rows));
        assert!(step.more);
        let f = step.next;
        let last = LogKey {
            transaction: 12,
            session: s,
            position: BATCH - 1,
        };
        assert_eq!(f.after, last);
        assert_eq!(awaited(&f), [11]);
        assert_eq!(f.position(), 11);
    }

    #[test]
    fn a_read_cut_short_by_changes_with_no_event_left_still_stops_where_it_was_cut() {
        // The read found a batch, but the last changes' session was purged (no event to hand
        // on): it was cut all the same, at its last change, not read to the snapshot's end.
        let s = Uuid::from_u128(1);
        let f = follower(10, &[]);
        let mut cut = read(20, &[], vec![change(12, s, 1)]);
        let last = LogKey {
            transaction: 15,
            session: s,
            position: 9,
        };
        cut.cut_at = Some(last);
        let step = f.advance(Uuid::nil(), cut);
        assert!(step.more);
        assert_eq!(step.next.after, last);
    }

    #[test]
    fn an_awaited_transaction_read_in_part_is_read_on() {
        let s = Uuid::from_u128(1);
        let f = follower(10, &[5, 7]);
        let rows: Vec<LoggedChange> = (0..BATCH).map(|p| change(5, s, p)).collect();
        // 5 and 7 ended; the read stopped inside 5's changes, before 7's and any after 10.
        let step = f.advance(Uuid::nil(), read(20, &[], rows));
        let f = step.next;
        assert_eq!(f.awaited.get(&5).map(|k| k.position), Some(BATCH - 1));
        assert_eq!(awaited(&f), [5, 7]);
        assert_eq!(f.after, LogKey::before(10));
        let step = f.advance(Uuid::nil(), read(20, &[], vec![change(5, s, BATCH)]));
        let f = step.next;
        assert!(f.awaited.is_empty());
        assert_eq!(f.after, LogKey::before(20));
    }

    #[test]
    fn a_log_pruned_past_the_position_is_missed_once_and_what_is_awaited_stays() {
        let f = follower(10, &[5]);
        let mut pruned = read(20, &[5], vec![]);
        pruned.pruned_below = 8;
        let step = f.advance(Uuid::nil(), pruned);
        assert!(step.missed);
        // 5 still runs: its changes are read when it ends.
        assert_eq!(awaited(&step.next), [5]);
        assert_eq!(step.next.position(), 5);
        let mut again = read(20, &[5], vec![]);
        again.pruned_below = 8;
        let step = step.next.advance(Uuid::nil(), again);
        assert!(!step.missed, "told once");
        // A prune by age of changes some reader had not read is missed too.
        let mut by_age = read(21, &[5], vec![]);
        (by_age.pruned_below, by_age.unread_prunes) = (8, 1);
        let step = step.next.advance(Uuid::nil(), by_age);
        assert!(step.missed);
        assert_eq!(awaited(&step.next), [5]);
    }

    #[test]
    fn a_log_reset_is_missed_and_followed_from_the_present() {
        let f = follower(10, &[5]);
        let step = f.advance(Uuid::from_u128(9), read(30, &[25], vec![]));
        assert!(step.missed);
        assert_eq!(step.next.after, LogKey::before(30));
        assert_eq!(awaited(&step.next), [25]);
    }
}
