//! The subscriptions one process holds open, bounded: each costs memory and a place in the
//! hub's fan-out, so past the limit a new one is refused (the others carry on).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{Error, Result};

pub struct SubscriptionSlots {
    open: AtomicUsize,
    max: usize,
}

/// An open subscription's place; dropping it (the stream ends) frees it.
pub struct Slot(Arc<SubscriptionSlots>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl SubscriptionSlots {
    pub fn new(max: usize) -> Arc<SubscriptionSlots> {
        Arc::new(SubscriptionSlots {
            open: AtomicUsize::new(0),
            max,
        })
    }

    /// A place for one more subscription, if there is one.
    pub fn take(self: &Arc<Self>) -> Result<Slot> {
        let taken = self
            .open
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |open| {
                (open < self.max).then_some(open + 1)
            });
        match taken {
            Ok(_) => Ok(Slot(self.clone())),
            Err(_) => Err(Error::TooManySubscriptions(format!(
                "this server already holds {} subscriptions (its limit); retry later or elsewhere",
                self.max
            ))),
        }
    }

    /// How many are open.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }
}
