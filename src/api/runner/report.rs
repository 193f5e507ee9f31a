//! Each operation's account of itself: a span for its trace, one log line when it ends
//! (operation name and type, duration, outcome and error codes, request id, client address;
//! never its variables), and its metrics.

use std::sync::Arc;
use std::time::Instant;

use async_graphql::parser::types::{
    DocumentOperations, ExecutableDocument, OperationDefinition, OperationType,
};
use async_graphql::{Response, Value};
use tracing::Span;

use crate::observe::metrics::{
    GRAPHQL_LOADER_BATCHES, GRAPHQL_REQUEST_DURATION, GRAPHQL_REQUESTS, GRAPHQL_SQL_STATEMENTS,
    operation_label,
};
use crate::observe::request::{OperationWork, RequestInfo};

/// The operation a request runs: the one named, else the only one (`None` when there is no
/// such operation; execution then refuses the request).
pub fn selected_operation<'a>(
    document: &'a ExecutableDocument,
    operation_name: Option<&str>,
) -> Option<(Option<&'a str>, &'a OperationDefinition)> {
    match (&document.operations, operation_name) {
        (DocumentOperations::Single(operation), _) => Some((None, &operation.node)),
        (DocumentOperations::Multiple(operations), Some(name)) => operations
            .get_key_value(name)
            .map(|(name, op)| (Some(name.as_str()), &op.node)),
        (DocumentOperations::Multiple(operations), None) if operations.len() == 1 => operations
            .iter()
            .next()
            .map(|(name, op)| (Some(name.as_str()), &op.node)),
        (DocumentOperations::Multiple(_), None) => None,
    }
}

pub struct Report {
    span: Span,
    started: Instant,
    info: Option<RequestInfo>,
    name: Option<String>,
    ty: Option<OperationType>,
    /// Codes of the errors sent, in order of first appearance.
    codes: Vec<String>,
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

    /// Counts the operation's database work (queries and mutations).
    pub fn count_work(&mut self, work: Arc<OperationWork>) {
        self.work = Some(work);
    }

    /// Notes a response sent (a stream sends several).
    pub fn sent(&mut self, response: &Response) {
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
        let outcome = self.codes.first().map_or("ok", String::as_str).to_owned();
        self.span.record("graphql.outcome", outcome.as_str());
        let labels = [
            ("operation", operation_label(self.name.as_deref())),
            ("type", ty.to_owned()),
            ("outcome", outcome.clone()),
        ];
        metrics::counter!(GRAPHQL_REQUESTS, &labels).increment(1);
        // A subscription's duration is how long someone watched: not a latency.
        if self.ty != Some(OperationType::Subscription) {
            metrics::histogram!(GRAPHQL_REQUEST_DURATION, &labels).record(elapsed.as_secs_f64());
        }
        if let Some(work) = &self.work {
            metrics::histogram!(GRAPHQL_SQL_STATEMENTS).record(work.statements());
            metrics::histogram!(GRAPHQL_LOADER_BATCHES).record(work.batches());
        }
        let codes = self.codes.join(",");
        let info = self.info.as_ref();
        tracing::info!(
            parent: &self.span,
            request_id = info.map(|i| &*i.id),
            client = info.and_then(|i| i.client).map(|c| c.to_string()),
            trace_id = info.and_then(|i| i.trace_id.as_deref()),
            transport = info.map(|i| i.transport),
            operation_name = self.name.as_deref(),
            operation_type = ty,
            duration_ms = elapsed.as_secs_f64() * 1000.0,
            outcome,
            error_codes = codes.as_str(),
            sql_statements = self.work.as_ref().map(|w| w.statements()),
            loader_batches = self.work.as_ref().map(|w| w.batches()),
            "graphql request"
        );
    }
}

fn type_name(ty: Option<OperationType>) -> &'static str {
    match ty {
        Some(OperationType::Query) => "query",
        Some(OperationType::Mutation) => "mutation",
        Some(OperationType::Subscription) => "subscription",
        None => "unknown",
    }
}
