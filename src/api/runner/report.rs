//! Each operation's account of itself: a span for its trace, one log line when it ends
//! (operation name and type, duration, outcome and error codes, request id, client address;
//! never its variables), and its metrics.

use std::sync::Arc;
use std::time::Instant;

use async_graphql::parser::types::{ExecutableDocument, OperationType};
use async_graphql::{Response, Value};
use tracing::Span;

use super::documents::selected_operation;
use crate::observe::metrics::{
    GRAPHQL_LOADER_BATCHES, GRAPHQL_LOADER_ROUND_TRIPS, GRAPHQL_REQUEST_DURATION, GRAPHQL_REQUESTS,
    GRAPHQL_SQL_STATEMENTS, operation_label,
};
use crate::observe::request::{OperationWork, RequestInfo};

pub struct Report {
    span: Span,
    started: Instant,
    info: Option<RequestInfo>,
    name: Option<String>,
    ty: Option<OperationType>,
    /// Codes of the errors sent, in order of first appearance.
    codes: Vec<String>,
    /// Whether any response was sent (a query or mutation without one was abandoned: its
    /// client went away, or it ran out of time).
    responded: bool,
    /// Whether it passed every check: only then does its name become a label value.
    admitted: bool,
    work: Option<Arc<OperationWork>>,
}

impl Report {
    pub fn new(info: Option<RequestInfo>) -> Report {
        Report {
            span: Span::none(),
            started: Instant::now(),
            info,
            name: None,
            ty: None,
            codes: Vec::new(),
            responded: false,
            admitted: false,
            work: None,
        }
    }

    /// Notes which operation of `document` runs.
    pub fn identify(&mut self, document: &ExecutableDocument, operation_name: Option<&str>) {
        if let Some((name, operation)) = selected_operation(document, operation_name) {
            self.name = name.map(str::to_owned);
            self.ty = Some(operation.ty);
        }
    }

    /// The operation's span, named for it (a trace exporter names it once, when it starts).
    pub fn open_span(&mut self) -> Span {
        let ty = type_name(self.ty);
        let name = self.name.as_deref();
        self.span = tracing::info_span!(
            "graphql_operation",
            otel.name = format!("{ty} {}", name.unwrap_or_default()).trim_end(),
            graphql.operation.name = name,
            graphql.operation.type = ty,
            graphql.outcome = tracing::field::Empty,
            request_id = self.info.as_ref().map(|info| &*info.id),
        );
        self.span.clone()
    }

    /// Notes that the operation passed every check.
    pub fn admitted(&mut self) {
        self.admitted = true;
    }

    /// Counts the operation's database work (queries and mutations).
    pub fn count_work(&mut self, work: Arc<OperationWork>) {
        self.work = Some(work);
    }

    /// Notes a response sent (a stream sends several).
    pub fn sent(&mut self, response: &Response) {
        self.responded = true;
        for error in &response.errors {
            let code = match error.extensions.as_ref().and_then(|x| x.get("code")) {
                Some(Value::String(code)) => code.clone(),
                _ => "INTERNAL_SERVER_ERROR".to_owned(),
            };
            if !self.codes.contains(&code) {
                self.codes.push(code);
            }
        }
    }
}

impl Drop for Report {
    fn drop(&mut self) {
        let elapsed = self.started.elapsed();
        let ty = type_name(self.ty);
        let abandoned = !self.responded && self.ty != Some(OperationType::Subscription);
        let outcome = match self.codes.first() {
            Some(code) => code.as_str(),
            None if abandoned => CANCELLED,
            None => "ok",
        };
        self.span.record("graphql.outcome", outcome);
        let labels = [
            (
                "operation",
                operation_label(self.name.as_deref(), self.admitted),
            ),
            ("type", ty.to_owned()),
            ("outcome", outcome.to_owned()),
        ];
        metrics::counter!(GRAPHQL_REQUESTS, &labels).increment(1);
        // A subscription's duration is how long someone watched: not a latency.
        if self.ty != Some(OperationType::Subscription) {
            metrics::histogram!(GRAPHQL_REQUEST_DURATION, &labels).record(elapsed.as_secs_f64());
        }
        if let Some(work) = &self.work {
            metrics::histogram!(GRAPHQL_SQL_STATEMENTS).record(work.statements());
            metrics::histogram!(GRAPHQL_LOADER_BATCHES).record(work.batches());
            metrics::histogram!(GRAPHQL_LOADER_ROUND_TRIPS).record(work.round_trips());
        }
        let codes = self.codes.join(",");
        let info = self.info.as_ref();
        tracing::info!(
            parent: &self.span,
            request_id = info.map(|i| &*i.id),
            client = info.and_then(|i| i.client).map(tracing::field::display),
            trace_id = info.and_then(|i| i.trace_id.as_deref()),
            transport = info.map(|i| i.transport),
            operation_name = self.name.as_deref(),
            operation_type = ty,
            duration_ms = elapsed.as_secs_f64() * 1000.0,
            outcome,
            error_codes = codes.as_str(),
            sql_statements = self.work.as_ref().map(|w| w.statements()),
            loader_batches = self.work.as_ref().map(|w| w.batches()),
            loader_round_trips = self.work.as_ref().map(|w| w.round_trips()),
            "graphql request"
        );
    }
}

/// The outcome of a query or mutation abandoned before its response.
const CANCELLED: &str = "cancelled";

fn type_name(ty: Option<OperationType>) -> &'static str {
    match ty {
        Some(OperationType::Query) => "query",
        Some(OperationType::Mutation) => "mutation",
        Some(OperationType::Subscription) => "subscription",
        None => "unknown",
    }
}
