//! Fair use: per identity (token, proxy user, or client address without authentication) a
//! rate and a number of requests in flight, answered with 429 and `Retry-After`; for the whole
//! process a number of requests in flight, answered with 503. Requests that take longer than
//! the request timeout are answered with 503 too (streams are not: their response starts at
//! once).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::AppState;
use super::access::error_response;
use crate::auth::Identity;
use crate::config::ThrottleOptions;

pub const RATE_LIMITED: &str = "RATE_LIMITED";
pub const SERVER_BUSY: &str = "SERVER_BUSY";
pub const TIMEOUT: &str = "TIMEOUT";

/// Keys the rate limiter keeps before it forgets idle ones.
const PRUNE_AT: usize = 10_000;

pub struct Throttle {
    rate: Option<DefaultKeyedRateLimiter<String>>,
    /// Requests per second one identity may make (0: unlimited).
    per_second: u32,
    per_identity: usize,
    in_flight: Mutex<HashMap<String, usize>>,
    everyone: Arc<Semaphore>,
    everyone_max: usize,
    request_timeout: Duration,
}

/// A request in flight; dropping it frees its places.
struct Admitted {
    throttle: Arc<Throttle>,
    key: String,
    _global: OwnedSemaphorePermit,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut in_flight = self.throttle.in_flight.lock().expect("not poisoned");
        if let Some(n) = in_flight.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                in_flight.remove(&self.key);
            }
        }
    }
}

/// Why a request was not admitted.
pub enum Refusal {
    /// Its identity is over its rate or its requests in flight (429).
    TooMany {
        retry_after_secs: u64,
        message: String,
    },
    /// The process is at its limit of requests in flight (503), this many.
    Busy(usize),
}

impl Refusal {
    pub fn response(self) -> Response {
        let (status, code, message, retry_after) = match self {
            Refusal::TooMany {
                retry_after_secs,
                message,
            } => (
                StatusCode::TOO_MANY_REQUESTS,
                RATE_LIMITED,
                message,
                retry_after_secs.max(1),
            ),
            Refusal::Busy(max) => (
                StatusCode::SERVICE_UNAVAILABLE,
                SERVER_BUSY,
                format!(
                    "the server is at its limit of {max} requests in flight \
                     (--max-concurrent-requests); retry shortly"
                ),
                1,
            ),
        };
        let mut response = error_response(status, code, &message);
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
        response
    }
}

impl Throttle {
    pub fn new(options: &ThrottleOptions) -> Arc<Throttle> {
        Arc::new(Throttle {
            rate: NonZeroU32::new(options.rate_limit_per_second)
                .map(|rate| RateLimiter::keyed(Quota::per_second(rate))),
            per_second: options.rate_limit_per_second,
            per_identity: options.max_concurrent_per_identity,
            in_flight: Mutex::new(HashMap::new()),
            everyone: Arc::new(Semaphore::new(options.max_concurrent_requests)),
            everyone_max: options.max_concurrent_requests,
            request_timeout: options.request_timeout,
        })
    }

    /// The key a caller is limited by.
    pub fn key(identity: &Identity, peer: Option<SocketAddr>) -> String {
        match (&identity.actor, peer) {
            (Some(actor), _) => actor.clone(),
            (None, Some(peer)) => peer.ip().to_string(),
            (None, None) => "anonymous".to_owned(),
        }
    }

    /// One more request of `key` per second, if its rate allows.
    pub fn check_rate(&self, key: &str) -> Result<(), Refusal> {
        let Some(rate) = &self.rate else {
            return Ok(());
        };
        if rate.len() > PRUNE_AT {
            rate.retain_recent();
        }
        rate.check_key(&key.to_owned()).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            Refusal::TooMany {
                retry_after_secs: wait.as_secs_f64().ceil() as u64,
                message: format!(
                    "too many requests from {key}: over the limit of {} per second \
                     (--rate-limit-per-second); slow down",
                    self.per_second
                ),
            }
        })
    }

    fn admit(self: &Arc<Self>, key: String) -> Result<Admitted, Refusal> {
        self.check_rate(&key)?;
        let global = self
            .everyone
            .clone()
            .try_acquire_owned()
            .map_err(|_| Refusal::Busy(self.everyone_max))?;
        {
            let mut in_flight = self.in_flight.lock().expect("not poisoned");
            let n = in_flight.entry(key.clone()).or_insert(0);
            if *n >= self.per_identity {
                return Err(Refusal::TooMany {
                    retry_after_secs: 1,
                    message: format!(
                        "{key} already has {} requests in flight, its limit \
                         (--max-concurrent-per-identity); wait for one to finish",
                        self.per_identity
                    ),
                });
            }
            *n += 1;
        }
        Ok(Admitted {
            throttle: self.clone(),
            key,
            _global: global,
        })
    }
}

/// Admits an authenticated GraphQL request (see [`super::access::authenticated`], which runs
/// first) and bounds the time it may take.
pub async fn admitted(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let key = match request.extensions().get::<Identity>() {
        Some(identity) => Throttle::key(identity, super::serve::peer_of(&request)),
        // GraphiQL's page: no identity, nothing to limit.
        None => return next.run(request).await,
    };
    let admitted = match state.throttle.admit(key) {
        Ok(admitted) => admitted,
        Err(refusal) => return refusal.response(),
    };
    let timeout = state.throttle.request_timeout;
    let response = match tokio::time::timeout(timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            TIMEOUT,
            &format!(
                "the request took longer than the limit of {} s (--request-timeout-secs); \
                 nothing it wrote was kept",
                timeout.as_secs_f64()
            ),
        ),
    };
    drop(admitted);
    response
}
