//! The server as an operator runs it: JSON log lines (one per GraphQL request, never its
//! variables) and traces exported over OTLP to a collector (here a small OTLP/HTTP receiver),
//! continuing the caller's W3C trace.

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::{Value, json};

use crate::common::process::{listening_on, sigterm};

type Received = Arc<Mutex<Vec<Span>>>;

struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An OTLP/HTTP (protobuf) trace receiver on a free port.
async fn receiver() -> (SocketAddr, Received) {
    let spans: Received = Arc::default();
    let app = Router::new()
        .route(
            "/v1/traces",
            post(|State(spans): State<Received>, body: Bytes| async move {
                let request = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
                let mut spans = spans.lock().unwrap();
                for resource in request.resource_spans {
                    for scope in resource.scope_spans {
                        spans.extend(scope.spans);
                    }
                }
                // An empty ExportTraceServiceResponse.
                (
                    [("content-type", "application/x-protobuf")],
                    Vec::<u8>::new(),
                )
            }),
        )
        .with_state(spans.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, spans)
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
        .map(|value| match value {
            AnyValue::StringValue(s) => s.clone(),
            other => format!("{other:?}"),
        })
}

#[tokio::test]
async fn request_log_lines_and_otlp_traces() {
    let (collector, spans) = receiver().await;
    let data_dir =
        std::env::temp_dir().join(format!("casefile-telemetry-{}", uuid::Uuid::now_v7()));
    let child = Command::new(env!("CARGO_BIN_EXE_casefile"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--demo",
            "--log-format",
            "json",
        ])
        .arg("--data-dir")
        .arg(&data_dir)
        .env_remove("DATABASE_URL")
        .env("RUST_LOG", "info")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{collector}"))
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Killed however the test ends (a failed assertion must not leave a server running).
    let mut child = KillOnDrop(child);
    let lines: Arc<Mutex<Vec<String>>> = Arc::default();
    let (listening_tx, listening_rx) = std::sync::mpsc::channel();
    {
        let lines = lines.clone();
        let stderr = child.0.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(addr) = listening_on(&line) {
                    let _ = listening_tx.send(addr);
                }
                lines.lock().unwrap().push(line);
            }
        });
    }
    let addr = listening_rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the server listens");

    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "00f067aa0ba902b7";
    let secret = "sekrit-needle-in-variables";
    let client = reqwest::Client::new();
    let body: Value = client
        .post(format!("http://{addr}/graphql"))
        .header("traceparent", format!("00-{trace_id}-{caller_span}-01"))
        .header("x-request-id", "telemetry-probe-1")
        .json(&json!({
            "query": "query LogProbe($q: String) { sessions(first: 3, filter: { search: $q }) \
                      { totalCount } all: sessions(first: 3) { edges { node { stages { name } } } } }",
            "variables": { "q": secret },
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(body.get("errors").is_none(), "{body}");
    let refused: Value = client
        .post(format!("http://{addr}/graphql"))
        .json(&json!({ "query": "query LogBroken { nope }" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(refused.get("errors").is_some());

    // The collector receives the request's spans, in the caller's trace.
    let deadline = Instant::now() + Duration::from_secs(20);
    let trace: Vec<Span> = loop {
        let trace: Vec<Span> = spans
            .lock()
            .unwrap()
            .iter()
            .filter(|s| hex::encode(&s.trace_id) == trace_id)
            .cloned()
            .collect();
        if trace.iter().any(|s| s.name == "POST /graphql")
            && trace.iter().any(|s| s.name == "SELECT")
        {
            break trace;
        }
        assert!(
            Instant::now() < deadline,
            "spans received: {:?}",
            spans
                .lock()
                .unwrap()
                .iter()
                .map(|s| &s.name)
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let named = |name: &str| {
        trace.iter().find(|s| s.name == name).unwrap_or_else(|| {
            panic!(
                "a span {name:?} in {:?}",
                trace.iter().map(|s| &s.name).collect::<Vec<_>>()
            )
        })
    };
    let request = named("POST /graphql");
    assert_eq!(
        hex::encode(&request.parent_span_id),
        caller_span,
        "continues the caller's span"
    );
    assert_eq!(
        attribute(request, "request_id").as_deref(),
        Some("telemetry-probe-1")
    );
    let operation = named("query LogProbe");
    assert_eq!(operation.parent_span_id, request.span_id);
    let batches: Vec<&Span> = trace
        .iter()
        .filter(|s| s.name.starts_with("load "))
        .collect();
    assert!(!batches.is_empty(), "DataLoader batches are spans");
    assert!(
        batches
            .iter()
            .all(|b| b.parent_span_id == operation.span_id)
    );
    let statements: Vec<&Span> = trace.iter().filter(|s| s.name == "SELECT").collect();
    assert!(
        statements
            .iter()
            .all(|s| attribute(s, "db.query.text").is_some())
    );
    assert!(
        statements
            .iter()
            .any(|s| batches.iter().any(|b| b.span_id == s.parent_span_id)),
        "a batch's statement is its child"
    );
    let tree: Vec<(String, String, String)> = trace
        .iter()
        .map(|s| {
            (
                s.name.clone(),
                hex::encode(&s.span_id),
                hex::encode(&s.parent_span_id),
            )
        })
        .collect();
    assert!(
        statements
            .iter()
            .any(|s| s.parent_span_id == operation.span_id),
        "a root field's statement is the operation's child: {tree:?}"
    );

    // One line per GraphQL request, as JSON, with what an operator needs and not the variables.
    let lines = lines.lock().unwrap().clone();
    let requests: Vec<Value> = lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["message"] == "graphql request")
        .collect();
    let probe = requests
        .iter()
        .find(|l| l["operation_name"] == "LogProbe")
        .unwrap_or_else(|| panic!("a LogProbe line in {lines:#?}"));
    assert_eq!(probe["level"], "INFO");
    assert_eq!(probe["request_id"], "telemetry-probe-1");
    assert_eq!(probe["trace_id"], trace_id);
    assert_eq!(probe["operation_type"], "query");
    assert_eq!(probe["outcome"], "ok");
    assert_eq!(probe["transport"], "http");
    assert!(probe["client"].as_str().unwrap().starts_with("127.0.0.1:"));
    assert!(probe["duration_ms"].as_f64().is_some());
    assert!(
        probe["sql_statements"].as_u64().is_some_and(|n| n >= 2),
        "{probe}"
    );
    let broken = requests
        .iter()
        .find(|l| l["operation_name"] == "LogBroken")
        .expect("a LogBroken line");
    assert_eq!(broken["outcome"], "GRAPHQL_VALIDATION_FAILED");
    assert_eq!(broken["error_codes"], "GRAPHQL_VALIDATION_FAILED");
    assert!(
        lines.iter().all(|l| !l.contains(secret)),
        "variables never reach the log"
    );
    assert!(
        lines.iter().all(|l| !l.contains('\u{1b}')),
        "no ANSI colours off a terminal"
    );

    assert!(sigterm(&child.0));
    let _ = child.0.wait();
    let _ = std::fs::remove_dir_all(&data_dir);
}
