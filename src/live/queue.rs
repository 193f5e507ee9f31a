//! One subscriber's pending changes, bounded by a count and by bytes: a change can carry a whole
//! event, so a stalled subscriber must not pin an unbounded amount of memory. Pushing never
//! waits; a subscriber that falls too far behind is cut off and told so.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use super::Change;
use super::options::HubOptions;
use crate::observe::metrics::LIVE_SLOW_SUBSCRIBERS_CLOSED;
use crate::store::session_events::ChangeKind;

/// The shortest time between two deliveries of appends to one subscriber.
pub const COALESCE: std::time::Duration = std::time::Duration::from_millis(50);

/// Why a subscriber's changes stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interrupted {
    /// It fell too far behind (its pending changes were dropped): it should resume from its
    /// cursor, and read faster.
    TooSlow,
    /// This process may have missed changes (the log was pruned past it or reset by a crash, or a
    /// change it waited for too long was given up): resume from the data.
    Missed,
    /// The hub is gone.
    Closed,
}

#[derive(Default)]
pub(super) struct Queue {
    state: Mutex<QueueState>,
    ready: Notify,
}

#[derive(Default)]
struct QueueState {
    changes: VecDeque<(Arc<Change>, usize)>,
    bytes: usize,
    /// Why it stops (reported once, after which it is closed).
    interrupted: Option<Interrupted>,
    /// The hub is gone, or the receiver is.
    closed: bool,
}

impl Queue {
    /// Queues a change without waiting; false when the subscriber is gone or was just cut off.
    pub(super) fn push(&self, change: &Arc<Change>, bytes: usize, options: &HubOptions) -> bool {
        let mut state = self.state.lock().expect("queue lock");
        if state.closed || state.interrupted.is_some() {
            return false;
        }
        // An empty queue takes any one change, so that a large change alone still goes through.
        let over = state.changes.len() >= options.buffer
            || (!state.changes.is_empty() && state.bytes + bytes > options.byte_budget);
        if over {
            metrics::counter!(LIVE_SLOW_SUBSCRIBERS_CLOSED).increment(1);
            state.interrupted = Some(Interrupted::TooSlow);
            state.changes = VecDeque::new();
            state.bytes = 0;
        } else {
            state.changes.push_back((change.clone(), bytes));
            state.bytes += bytes;
        }
        drop(state);
        self.ready.notify_one();
        !over
    }

    /// Stops the subscriber (its pending changes are dropped) with `why`.
    pub(super) fn interrupt(&self, why: Interrupted) {
        let mut state = self.state.lock().expect("queue lock");
        if state.interrupted.is_none() && !state.closed {
            state.interrupted = Some(why);
        }
        state.changes = VecDeque::new();
        state.bytes = 0;
        drop(state);
        self.ready.notify_one();
    }

    pub(super) fn close(&self) {
        let mut state = self.state.lock().expect("queue lock");
        state.closed = true;
        state.changes = VecDeque::new();
        state.bytes = 0;
        drop(state);
        self.ready.notify_one();
    }

    pub(super) fn is_open(&self) -> bool {
        let state = self.state.lock().expect("queue lock");
        !state.closed && state.interrupted.is_none()
    }
}

/// A subscriber's end: changes in order, until it is interrupted.
pub struct Receiver {
    queue: Arc<Queue>,
}

impl Receiver {
    pub(super) fn new(queue: Arc<Queue>) -> Self {
        Receiver { queue }
    }

    /// The next change. Cancel-safe: a change is taken only by a call that returns it.
    pub async fn recv(&mut self) -> Result<Arc<Change>, Interrupted> {
        loop {
            {
                let mut state = self.queue.state.lock().expect("queue lock");
                if let Some((change, bytes)) = state.changes.pop_front() {
                    state.bytes -= bytes;
                    return Ok(change);
                }
                if let Some(why) = state.interrupted.take() {
                    state.closed = true;
                    return Err(why);
                }
                if state.closed {
                    return Err(Interrupted::Closed);
                }
            }
            // `notify_one` leaves a permit when nobody waits, so a push between the check above
            // and this wait is not missed.
            self.queue.ready.notified().await;
        }
    }
}

impl Receiver {
    /// The next change and, when it is an append, what follows it until `COALESCE` after
    /// `last_sent` (appends were last delivered then): appends go out at most once per window,
    /// the first at once, those that follow merged at the window's end, so a token-rate stream
    /// reaches clients as a few larger pieces, in order, none lost, and a slow one without delay.
    /// An interruption ends the window.
    pub async fn recv_window(
        &mut self,
        last_sent: tokio::time::Instant,
    ) -> Vec<Result<Arc<Change>, Interrupted>> {
        let mut received = vec![self.recv().await];
        if matches!(&received[0], Ok(change) if change.row.kind == ChangeKind::EventAppended) {
            let deadline = last_sent + COALESCE;
            loop {
                tokio::select! {
                    // What is already queued is taken even when the window has passed.
                    biased;
                    next = self.recv() => {
                        let done = next.is_err();
                        received.push(next);
                        if done {
                            break;
                        }
                    }
                    () = tokio::time::sleep_until(deadline) => break,
                }
            }
        }
        received
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        // Frees its pending changes now, and the hub forgets it on its next publish.
        self.queue.close();
    }
}
