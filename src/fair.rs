//! The two mechanisms of fair use, shared by every limit: a rate per key (requests per identity,
//! credential look-ups per client address), and shares per caller of something the process
//! holds a bounded amount of (requests in flight, streams, WebSocket connections, subscriptions).

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};

use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::auth::Caller;

/// Keys a rate keeps before it forgets idle ones.
const PRUNE_AT: usize = 10_000;

/// So many events per second per key, in bursts of at most as many.
pub struct Rate<K: Hash + Eq + Clone> {
    /// `None`: no limit.
    limiter: Option<DefaultKeyedRateLimiter<K>>,
    per_second: u32,
}

impl<K: Hash + Eq + Clone> Rate<K> {
    /// `per_second` 0: no limit.
    pub fn new(per_second: u32) -> Rate<K> {
        Rate {
            limiter: NonZeroU32::new(per_second)
                .map(|rate| RateLimiter::keyed(Quota::per_second(rate))),
            per_second,
        }
    }

    pub fn per_second(&self) -> u32 {
        self.per_second
    }

    /// Counts one more event of `key`; over the rate, the whole seconds to wait (at least 1).
    pub fn check(&self, key: &K) -> Result<(), u64> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        if limiter.len() > PRUNE_AT {
            limiter.retain_recent();
        }
        limiter.check_key(key).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            (wait.as_secs_f64().ceil() as u64).max(1)
        })
    }
}

/// How much of something each caller may hold at once.
pub struct Shares {
    held: Mutex<HashMap<Caller, usize>>,
    max: usize,
    /// What is held, in the refusal (`requests in flight`).
    what: &'static str,
    /// The flag that sets `max`.
    flag: &'static str,
    /// What the refused caller can do about it.
    advice: &'static str,
}

/// One caller's share of something, held until dropped.
pub struct Share {
    shares: Arc<Shares>,
    caller: Caller,
}

/// A caller already holds all it may.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Full(pub String);

impl fmt::Display for Full {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Shares {
    pub fn new(
        max: usize,
        what: &'static str,
        flag: &'static str,
        advice: &'static str,
    ) -> Arc<Shares> {
        Arc::new(Shares {
            held: Mutex::new(HashMap::new()),
            max,
            what,
            flag,
            advice,
        })
    }

    /// One more for `caller`, if it holds less than its share.
    pub fn take(self: &Arc<Self>, caller: &Caller) -> Result<Share, Full> {
        let mut held = self.held.lock().expect("not poisoned");
        let count = held.get(caller).copied().unwrap_or(0);
        if count >= self.max {
            return Err(Full(format!(
                "{caller} already has {} {}, its limit ({}); {}",
                self.max, self.what, self.flag, self.advice
            )));
        }
        held.insert(caller.clone(), count + 1);
        Ok(Share {
            shares: self.clone(),
            caller: caller.clone(),
        })
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut held = self.shares.held.lock().expect("not poisoned");
        if let Some(count) = held.get_mut(&self.caller) {
            *count -= 1;
            // Callers come and go: only those holding something are kept.
            if *count == 0 {
                held.remove(&self.caller);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;

    #[test]
    fn a_share_is_per_caller_and_returns_when_dropped() {
        let shares = Shares::new(2, "things", "--max-things", "drop one");
        let (a, b) = (
            Caller::address(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))),
            Caller::address(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2))),
        );
        let first = shares.take(&a).unwrap();
        let _second = shares.take(&a).unwrap();
        let Full(message) = shares.take(&a).err().expect("a holds its share");
        assert_eq!(
            message,
            "10.0.0.1 already has 2 things, its limit (--max-things); drop one"
        );
        assert!(shares.take(&b).is_ok(), "b has a share of its own");
        drop(first);
        assert!(shares.take(&a).is_ok(), "a dropped one");
    }

    #[test]
    fn a_rate_refuses_past_its_burst_and_says_how_long_to_wait() {
        let rate = Rate::new(2);
        assert_eq!(rate.check(&"a"), Ok(()));
        assert_eq!(rate.check(&"a"), Ok(()));
        assert_eq!(rate.check(&"a"), Err(1));
        assert_eq!(rate.check(&"b"), Ok(()), "each key has its own");
        let unlimited = Rate::new(0);
        assert!((0..100).all(|_| unlimited.check(&"a").is_ok()));
    }
}
