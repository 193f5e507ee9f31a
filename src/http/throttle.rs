//! Fair use: per identity (token, proxy user, or client address without authentication) a
//! rate and a number of requests in flight, answered with 429 and `Retry-After`; for the whole
//! process a number of requests in flight, answered with 503. Requests that take longer than
//! the request timeout are answered with 503 too. A query or mutation answered as a stream
//! keeps its place in flight, and its timeout, until it ends (see [`super::bounded`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_graphql::ServerError;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::AppState;
use super::options::ThrottleOptions;
use super::refusal::error_response;
use crate::api::runner::coded_error;
use crate::auth::{Caller, Identity};
use crate::fair::{Full, Rate, Share, Shares};

pub const RATE_LIMITED: &str = "RATE_LIMITED";
pub const SERVER_BUSY: &str = "SERVER_BUSY";
pub const TIMEOUT: &str = "TIMEOUT";

pub struct Throttle {
    rate: Rate<Caller>,
    in_flight: Arc<Shares>,
    everyone: Arc<Semaphore>,
    everyone_max: usize,
    request_timeout: Duration,
}

/// A query or mutation in flight, on any transport; dropping it frees its places.
pub struct InFlight {
    _share: Share,
    _global: OwnedSemaphorePermit,
    /// When it has taken as long as it may (`--request-timeout-secs`).
    pub deadline: Instant,
}

/// A request the throttle admitted, as its handler sees it (a request extension): whom it
/// counts against, and its place in flight, held until the response is ready unless a stream
/// takes it to hold while it runs.
#[derive(Clone)]
pub struct Admission {
    pub caller: Caller,
    place: Arc<Mutex<Option<InFlight>>>,
}

impl Admission {
    /// The request's place in flight, for the stream that answers it.
    pub fn take_place(&self) -> Option<InFlight> {
        self.place.lock().expect("not poisoned").take()
    }
}

/// Why a request (or an operation on a stream) was not admitted.
pub enum Refusal {
    /// Its identity is over its rate or one of its shares (429).
    TooMany {
        retry_after_secs: u64,
        message: String,
    },
    /// The process is at its limit of requests in flight (503), this many.
    Busy(usize),
}

impl From<Full> for Refusal {
    fn from(Full(message): Full) -> Refusal {
        Refusal::TooMany {
            retry_after_secs: 1,
            message,
        }
    }
}

impl Refusal {
    /// Status, code, message and seconds to wait.
    fn parts(self) -> (StatusCode, &'static str, String, u64) {
        match self {
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
        }
    }

    /// The HTTP response refusing a request, with `Retry-After`.
    pub fn response(self) -> Response {
        let (status, code, message, retry_after) = self.parts();
        let mut response = error_response(status, code, &message);
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
        response
    }

    /// The error refusing an operation on a stream that is already open (a WebSocket), with
    /// the wait as `extensions.retryAfter`.
    pub fn error(self) -> ServerError {
        let (_, code, message, retry_after) = self.parts();
        let mut error = coded_error(code, message);
        error
            .extensions
            .get_or_insert_with(Default::default)
            .set("retryAfter", retry_after);
        error
    }
}

impl Throttle {
    pub fn new(options: &ThrottleOptions) -> Arc<Throttle> {
        Arc::new(Throttle {
            rate: Rate::new(options.rate_limit_per_second),
            in_flight: Shares::new(
                options.max_concurrent_per_identity,
                "requests in flight",
                "--max-concurrent-per-identity",
                "wait for one to finish",
            ),
            everyone: Arc::new(Semaphore::new(options.max_concurrent_requests)),
            everyone_max: options.max_concurrent_requests,
            request_timeout: options.request_timeout,
        })
    }

    /// One more request of `caller` per second, if its rate allows.
    pub fn check_rate(&self, caller: &Caller) -> Result<(), Refusal> {
        self.rate
            .check(caller)
            .map_err(|retry_after_secs| Refusal::TooMany {
                retry_after_secs,
                message: format!(
                    "too many requests from {caller}: over the limit of {} per second \
                     (--rate-limit-per-second); slow down",
                    self.rate.per_second()
                ),
            })
    }

    /// A place in flight for one more query or mutation of `caller` (its rate already
    /// counted), if there is one.
    pub fn occupy(self: &Arc<Self>, caller: &Caller) -> Result<InFlight, Refusal> {
        let global = self
            .everyone
            .clone()
            .try_acquire_owned()
            .map_err(|_| Refusal::Busy(self.everyone_max))?;
        let share = self.in_flight.take(caller)?;
        Ok(InFlight {
            _share: share,
            _global: global,
            deadline: Instant::now() + self.request_timeout,
        })
    }

    /// What a request (or an operation on a stream) that ran out of time is told.
    pub fn timed_out(&self) -> String {
        format!(
            "the request took longer than the limit of {} s (--request-timeout-secs); \
             nothing it wrote was kept",
            self.request_timeout.as_secs_f64()
        )
    }
}

/// Admits an authenticated GraphQL request (see [`super::access::authenticated`], which runs
/// first) and bounds the time it may take.
pub async fn admitted(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let caller = match request.extensions().get::<Identity>() {
        Some(identity) => Caller::of(identity, super::serve::peer_of(&request)),
        // GraphiQL's page: no identity, nothing to limit.
        None => return next.run(request).await,
    };
    let admitted = state
        .throttle
        .check_rate(&caller)
        .and_then(|()| state.throttle.occupy(&caller));
    let place = match admitted {
        Ok(place) => place,
        Err(refusal) => return refusal.response(),
    };
    let deadline = place.deadline;
    let admission = Admission {
        caller,
        place: Arc::new(Mutex::new(Some(place))),
    };
    request.extensions_mut().insert(admission.clone());
    let response = match tokio::time::timeout_at(deadline, next.run(request)).await {
        Ok(response) => response,
        Err(_) => error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            TIMEOUT,
            &state.throttle.timed_out(),
        ),
    };
    // The place is held until the response is ready (unless a stream took it).
    drop(admission);
    response
}
