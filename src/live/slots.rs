//! The subscriptions one process holds open, bounded: each costs memory and a place in the
//! hub's fan-out, so past the limit a new one is refused (the others carry on). Each caller
//! may hold a share of them, so that no one takes what everyone shares.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::auth::Caller;
use crate::error::Error;
use crate::fair::{Full, Share, Shares};
use crate::observe::metrics::ACTIVE_SUBSCRIPTIONS;

pub struct SubscriptionSlots {
    open: AtomicUsize,
    max: usize,
    per_caller: Arc<Shares>,
}

/// An open subscription's place (of a subscription to `field`); dropping it (the stream ends)
/// frees it.
pub struct Slot {
    slots: Arc<SubscriptionSlots>,
    field: &'static str,
    _share: Share,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.open.fetch_sub(1, Ordering::Relaxed);
        metrics::gauge!(ACTIVE_SUBSCRIPTIONS, "field" => self.field).decrement(1);
    }
}

/// Why there is no place for one more subscription (both are `TOO_MANY_SUBSCRIPTIONS`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoSlot {
    /// The caller holds its share.
    CallerFull(String),
    /// The process holds all it may.
    ProcessFull(String),
}

impl From<NoSlot> for Error {
    fn from(refused: NoSlot) -> Error {
        match refused {
            NoSlot::CallerFull(message) | NoSlot::ProcessFull(message) => {
                Error::TooManySubscriptions(message)
            }
        }
    }
}

impl SubscriptionSlots {
    /// `max` in all, `per_caller` for each caller.
    pub fn new(max: usize, per_caller: usize) -> Arc<SubscriptionSlots> {
        Arc::new(SubscriptionSlots {
            open: AtomicUsize::new(0),
            max,
            per_caller: Shares::new(
                per_caller,
                "subscriptions open",
                "--max-subscriptions-per-identity",
                "complete one first",
            ),
        })
    }

    /// A place for one more subscription of `caller` (to the root field `field`), if there is
    /// one.
    pub fn take(self: &Arc<Self>, field: &'static str, caller: &Caller) -> Result<Slot, NoSlot> {
        let share = self
            .per_caller
            .take(caller)
            .map_err(|Full(message)| NoSlot::CallerFull(message))?;
        let taken = self
            .open
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |open| {
                (open < self.max).then_some(open + 1)
            });
        match taken {
            Ok(_) => {
                metrics::gauge!(ACTIVE_SUBSCRIPTIONS, "field" => field).increment(1);
                Ok(Slot {
                    slots: self.clone(),
                    field,
                    _share: share,
                })
            }
            Err(_) => Err(NoSlot::ProcessFull(format!(
                "this server already holds {} subscriptions, its limit (--max-subscriptions); retry \
                 later or elsewhere",
                self.max
            ))),
        }
    }
}
