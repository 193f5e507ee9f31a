//! Prometheus metrics, recorded through the `metrics` facade and rendered by
//! `metrics-exporter-prometheus` at `/metrics`. Every name and its help text is here; label
//! values are bounded (operation names are the client's choice: the first
//! [`MAX_OPERATION_NAMES`] distinct ones are kept, the rest are counted as `other`).

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

pub const GRAPHQL_REQUESTS: &str = "casefile_graphql_requests_total";
pub const GRAPHQL_REQUEST_DURATION: &str = "casefile_graphql_request_duration_seconds";
pub const GRAPHQL_LOADER_BATCHES: &str = "casefile_graphql_loader_batches";
pub const GRAPHQL_SQL_STATEMENTS: &str = "casefile_graphql_sql_statements";
pub const GRAPHQL_LOADER_ROUND_TRIPS: &str = "casefile_graphql_loader_round_trips";
pub const GRAPHQL_VALIDATIONS: &str = "casefile_graphql_validations_total";
pub const HTTP_REQUESTS: &str = "casefile_http_requests_total";
pub const HTTP_REQUEST_DURATION: &str = "casefile_http_request_duration_seconds";
pub const OPEN_STREAMS: &str = "casefile_open_streams";
pub const ACTIVE_SUBSCRIPTIONS: &str = "casefile_active_subscriptions";
pub const LIVE_DELIVERY_LAG: &str = "casefile_live_delivery_lag_seconds";
pub const CHANGE_LOG_BACKLOG: &str = "casefile_change_log_backlog";
pub const LIVE_COALESCED_DELTAS: &str = "casefile_live_coalesced_deltas_total";
pub const LIVE_SLOW_SUBSCRIBERS_CLOSED: &str = "casefile_live_slow_subscribers_closed_total";
pub const DB_POOL_CONNECTIONS: &str = "casefile_db_pool_connections";
pub const DB_POOL_MAX_CONNECTIONS: &str = "casefile_db_pool_max_connections";
pub const DB_POOL_WAITING: &str = "casefile_db_pool_waiting";
pub const INGEST_OPERATIONS: &str = "casefile_ingest_operations_total";
pub const INGEST_BATCHED_OPERATIONS: &str = "casefile_ingest_batched_operations_total";
pub const INGEST_APPENDED_BYTES: &str = "casefile_ingest_appended_bytes_total";
pub const APPEND_GROUP_SIZE: &str = "casefile_append_group_size";
pub const APPEND_GROUPS_FAILED: &str = "casefile_append_groups_failed_total";
pub const RETENTION_DELETED: &str = "casefile_retention_deleted_total";

/// Distinct operation names kept as label values.
const MAX_OPERATION_NAMES: usize = 200;
/// Longest operation name kept as a label value.
const MAX_OPERATION_NAME_LEN: usize = 100;
/// The label value of every operation name past the bound (and of over-long ones).
const OTHER_OPERATIONS: &str = "other";
/// The label value of an operation without a name.
const ANONYMOUS_OPERATION: &str = "anonymous";

/// Latencies from half a millisecond to a minute.
const SECONDS_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];
/// Statements and batches per operation (the statement bound is one per relationship).
const COUNT_BUCKETS: &[f64] = &[0.0, 1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0, 34.0, 55.0, 100.0];

/// Appends per group (a group holds at most `limits::BATCH`).
const GROUP_BUCKETS: &[f64] = &[1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0];

/// The process's recorder (installed on first use; every server of the process shares it).
pub fn handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".to_owned()), SECONDS_BUCKETS)
            .and_then(|b| {
                b.set_buckets_for_metric(
                    Matcher::Full(GRAPHQL_LOADER_BATCHES.to_owned()),
                    COUNT_BUCKETS,
                )
            })
            .and_then(|b| {
                b.set_buckets_for_metric(
                    Matcher::Full(GRAPHQL_LOADER_ROUND_TRIPS.to_owned()),
                    COUNT_BUCKETS,
                )
            })
            .and_then(|b| {
                b.set_buckets_for_metric(
                    Matcher::Full(GRAPHQL_SQL_STATEMENTS.to_owned()),
                    COUNT_BUCKETS,
                )
            })
            .and_then(|b| {
                b.set_buckets_for_metric(Matcher::Full(APPEND_GROUP_SIZE.to_owned()), GROUP_BUCKETS)
            })
            .expect("bucket lists are not empty")
            .build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("another metrics recorder is installed; /metrics will be empty");
        }
        describe();
        // Histograms keep raw samples until drained; drain them even if nobody scrapes.
        let upkeep = handle.clone();
        std::thread::Builder::new()
            .name("metrics-upkeep".to_owned())
            .spawn(move || {
                loop {
                    std::thread::sleep(Duration::from_secs(5));
                    upkeep.run_upkeep();
                }
            })
            .expect("a thread can be started");
        handle
    })
}

fn describe() {
    describe_counter!(
        GRAPHQL_REQUESTS,
        "GraphQL operations run, by operation name, type (query, mutation, subscription) and \
         outcome (ok, or the first error's code)"
    );
    describe_histogram!(
        GRAPHQL_REQUEST_DURATION,
        Unit::Seconds,
        "Time to answer a query or mutation, by operation name, type and outcome"
    );
    describe_histogram!(
        GRAPHQL_LOADER_BATCHES,
        "DataLoader batches one query or mutation sent to the database"
    );
    describe_histogram!(
        GRAPHQL_LOADER_ROUND_TRIPS,
        "Times one query or mutation waited for DataLoader batches (those of one wave run concurrently)"
    );
    describe_counter!(
        GRAPHQL_VALIDATIONS,
        "Operations validated, by pass: in full (`full`), or by the verdict kept from an earlier \
         full pass of the same document and operation, checking only their variables (`kept`)"
    );
    describe_histogram!(
        GRAPHQL_SQL_STATEMENTS,
        "SQL statements one query or mutation ran"
    );
    describe_counter!(
        HTTP_REQUESTS,
        "HTTP requests answered, by route, method and status"
    );
    describe_histogram!(
        HTTP_REQUEST_DURATION,
        Unit::Seconds,
        "Time to the response's head, by route and method (streams count until they start)"
    );
    describe_gauge!(
        OPEN_STREAMS,
        "Open live connections, by transport (websocket, sse, multipart)"
    );
    describe_gauge!(ACTIVE_SUBSCRIPTIONS, "Subscriptions running, by root field");
    describe_histogram!(
        LIVE_DELIVERY_LAG,
        Unit::Seconds,
        "Time from a change's commit to its delivery to a subscriber"
    );
    describe_gauge!(
        CHANGE_LOG_BACKLOG,
        "Live change log ids past the last one this process read (ids of transactions still \
         running or rolled back count until they are known to be gaps)"
    );
    describe_counter!(
        LIVE_COALESCED_DELTAS,
        "Timeline appends merged into an earlier pending update for a subscriber"
    );
    describe_counter!(
        LIVE_SLOW_SUBSCRIBERS_CLOSED,
        "Subscribers closed because they fell too far behind (they resume from their cursor)"
    );
    describe_gauge!(
        DB_POOL_CONNECTIONS,
        "Database connections in the pool, by state (idle, in_use)"
    );
    describe_gauge!(DB_POOL_MAX_CONNECTIONS, "Largest size of the pool");
    describe_gauge!(
        DB_POOL_WAITING,
        "GraphQL operations waiting for a database connection"
    );
    describe_counter!(
        INGEST_OPERATIONS,
        "Mutations committed, by mutation (a batch of `ingest` counts once here)"
    );
    describe_counter!(
        INGEST_BATCHED_OPERATIONS,
        "Operations committed in `ingest` batches, by operation"
    );
    describe_counter!(
        INGEST_APPENDED_BYTES,
        Unit::Bytes,
        "Bytes of timeline text stored by appends (retried ones count once)"
    );
    describe_histogram!(
        APPEND_GROUP_SIZE,
        "Single appends stored together in one statement and one commit"
    );
    describe_counter!(
        APPEND_GROUPS_FAILED,
        "Append groups whose statement failed (each of their appends was then decided alone)"
    );
    describe_counter!(
        RETENTION_DELETED,
        "Rows purged by retention, by what (`sessions`, each with everything under it, or `receipts`)"
    );
}

/// The label value for a client's operation name; a new name is kept (while there is room)
/// only if `keep`: an operation that passed its checks, so that refused ones (typos, probes)
/// cannot use up the room.
pub fn operation_label(name: Option<&str>, keep: bool) -> String {
    static NAMES: OnceLock<OperationNames> = OnceLock::new();
    NAMES
        .get_or_init(|| OperationNames::new(MAX_OPERATION_NAMES))
        .label(name, keep)
}

/// The operation names kept as label values: the first `max` distinct ones.
struct OperationNames {
    seen: Mutex<HashSet<String>>,
    max: usize,
}

impl OperationNames {
    fn new(max: usize) -> OperationNames {
        OperationNames {
            seen: Mutex::default(),
            max,
        }
    }

    fn label(&self, name: Option<&str>, keep: bool) -> String {
        let Some(name) = name else {
            return ANONYMOUS_OPERATION.to_owned();
        };
        if name.len() > MAX_OPERATION_NAME_LEN {
            return OTHER_OPERATIONS.to_owned();
        }
        let mut seen = self.seen.lock().expect("not poisoned");
        if seen.contains(name) {
            return name.to_owned();
        }
        if keep && seen.len() < self.max {
            seen.insert(name.to_owned());
            return name.to_owned();
        }
        OTHER_OPERATIONS.to_owned()
    }
}

/// Counts an open live connection (`transport`: websocket, sse or multipart) while it lives.
pub struct OpenStream(&'static str);

impl OpenStream {
    pub fn new(transport: &'static str) -> OpenStream {
        metrics::gauge!(OPEN_STREAMS, "transport" => transport).increment(1);
        OpenStream(transport)
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        metrics::gauge!(OPEN_STREAMS, "transport" => self.0).decrement(1);
    }
}

/// Counts an operation waiting for a database connection while it waits.
pub struct WaitingForConnection(());

impl WaitingForConnection {
    pub fn start() -> WaitingForConnection {
        metrics::gauge!(DB_POOL_WAITING).increment(1);
        WaitingForConnection(())
    }
}

impl Drop for WaitingForConnection {
    fn drop(&mut self) {
        metrics::gauge!(DB_POOL_WAITING).decrement(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_names_past_the_bound_are_other() {
        let names = OperationNames::new(3);
        assert_eq!(names.label(Some("Refused"), false), OTHER_OPERATIONS);
        for name in ["A", "B", "C"] {
            assert_eq!(names.label(Some(name), true), name);
        }
        assert_eq!(names.label(Some("D"), true), OTHER_OPERATIONS);
        assert_eq!(names.label(Some("A"), false), "A", "a known name stays");
        assert_eq!(names.label(None, true), ANONYMOUS_OPERATION);
        assert_eq!(names.label(Some(&"L".repeat(101)), true), OTHER_OPERATIONS);
    }
}
