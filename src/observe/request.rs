//! What one request carries for its log line, its trace and its metrics: the request id, the
//! client's address, the caller's trace, and how much database work its operation did.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// The request an operation came in with (one per HTTP request or WebSocket connection).
#[derive(Debug, Clone)]
pub struct RequestInfo {
    /// `x-request-id`: the client's, or one made up here.
    pub id: Arc<str>,
    pub client: Option<SocketAddr>,
    /// The client's `user-agent` (cut to 500 bytes), for the audit trail.
    pub user_agent: Option<Arc<str>>,
    /// The W3C trace the request belongs to (the caller's, from `traceparent`, or the one
    /// this server started when it exports traces).
    pub trace_id: Option<Arc<str>>,
    /// The host the client sent it to (its `Host`, or an HTTP/2 request's authority), when
    /// that is a plain name or address with an optional port: where a URL handed to this
    /// client should point, unless `--public-origin` says otherwise.
    pub host: Option<Arc<str>>,
    /// How it arrived: `http`, `sse`, `multipart` or `websocket`.
    pub transport: &'static str,
}

impl RequestInfo {
    pub fn with_transport(&self, transport: &'static str) -> RequestInfo {
        RequestInfo {
            transport,
            ..self.clone()
        }
    }
}

/// Database work of the operation running in this task.
#[derive(Debug, Default)]
pub struct OperationWork {
    statements: AtomicU32,
    batches: AtomicU32,
    round_trips: AtomicU32,
}

impl OperationWork {
    pub fn statements(&self) -> u32 {
        self.statements.load(Ordering::Relaxed)
    }

    pub fn batches(&self) -> u32 {
        self.batches.load(Ordering::Relaxed)
    }

    pub fn round_trips(&self) -> u32 {
        self.round_trips.load(Ordering::Relaxed)
    }
}

tokio::task_local! {
    /// Set around a query or mutation's execution (its loaders' batches run in its task).
    pub static OPERATION_WORK: Arc<OperationWork>;
}

/// Counts a SQL statement against the running operation, if any.
pub fn count_statement() {
    let _ = OPERATION_WORK.try_with(|work| work.statements.fetch_add(1, Ordering::Relaxed));
}

/// Counts a DataLoader batch against the running operation, if any.
pub fn count_batch() {
    let _ = OPERATION_WORK.try_with(|work| work.batches.fetch_add(1, Ordering::Relaxed));
}

/// Counts a wave of DataLoader batches (sent together, run concurrently) against the running
/// operation, if any: the round trips its latency adds up.
pub fn count_round_trip() {
    let _ = OPERATION_WORK.try_with(|work| work.round_trips.fetch_add(1, Ordering::Relaxed));
}
