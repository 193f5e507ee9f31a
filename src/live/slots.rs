//! The subscriptions one process holds open, bounded: each costs memory and a place in the
//! hub's fan-out, so past the limit a new one is refused (the others carry on).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{Error, Result};
use crate::observe::metrics::ACTIVE_SUBSCRIPTIONS;

pub struct SubscriptionSlots {
    open: AtomicUsize,
    max: usize,
}

/// An open subscription's place (of a subscription to `field`); dropping it (the stream ends)
/// frees it.
pub struct Slot {
    slots: Arc<SubscriptionSlots>,
    field: &'static str,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.open.fetch_sub(1, Ordering::Relaxed);
        metrics::gauge!(ACTIVE_SUBSCRIPTIONS, "field" => self.field).decrement(1);
    }
}

impl SubscriptionSlots {
    pub fn new(max: usize) -> Arc<SubscriptionSlots> {
        Arc::new(SubscriptionSlots {
            open: AtomicUsize::new(0),
            max,
        })
    }

    /// A place for one more subscription (to the root field `field`), if there is one.
    pub fn take(self: &Arc<Self>, field: &'static str) -> Result<Slot> {
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
                })
            }
            Err(_) => Err(Error::TooManySubscriptions(format!(
                "this server already holds {} subscriptions, its limit (--max-subscriptions); retry \
                 later or elsewhere",
                self.max
            ))),
        }
    }

    /// How many are open.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }
}
