//! What operators see of a running server: logs, traces and Prometheus metrics. The HTTP edge
//! and the runner report into these; this module sets them up and names them.

pub mod in_span;
pub mod logging;
pub mod metrics;
pub mod request;
