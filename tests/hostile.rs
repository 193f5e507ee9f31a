//! Hostile documents against the real server (`casefile serve`, a child process on the embedded
//! database): small requests built to make parsing, validation or execution blow up — fragments
//! that double, introspection that fans out, deep nesting, long lists of directives, errors by
//! the million, oversized variables. Each is sent over HTTP and over a WebSocket and must be
//! answered with a coded error (or a correct, bounded answer) at once, while a second client
//! polling `/livez` and running a small query every 50 ms is never kept waiting. Each case's time
//! and the server's peak memory are printed.
//!
//! A test binary of its own, so that no other test shares the machine while the waits are
//! measured.

#[path = "it/common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use common::cli::DataDir;
use common::process;
use common::served::Served;

/// What a case must be answered with.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// An error with this code first.
    Code(&'static str),
    /// Data and no error.
    Data,
    /// Anything coded: data, or errors each with a code (a value the server may accept or
    /// refuse).
    Coded,
    /// This HTTP status, before any GraphQL (malformed JSON); a WebSocket gets an error.
    Status(u16),
}

struct Case {
    name: &'static str,
    body: Value,
    expect: Expect,
}

fn case(name: &'static str, query: String, expect: Expect) -> Case {
    Case {
        name,
        body: json!({ "query": query }),
        expect,
    }
}

/// `{...F0}` where each of `n` fragments spreads the next `times` times.
fn spreading(n: usize, times: usize, last: &str) -> String {
    let mut query = "{ ...F0 }".to_owned();
    for i in 0..n {
        let spreads = format!(" ...F{}", i + 1).repeat(times);
        query.push_str(&format!(" fragment F{i} on Query {{{spreads} }}"));
    }
    query.push_str(&format!(" fragment F{n} on Query {{ {last} }}"));
    query
}

fn nested(open: &str, inner: &str, close: &str, n: usize) -> String {
    format!("{}{inner}{}", open.repeat(n), close.repeat(n))
}

/// `{ __schema { a { b { … { name } } } } }` along `path`.
fn schema_path(path: &[&str]) -> String {
    let steps: String = path.iter().map(|step| format!("{step} {{ ")).collect();
    format!(
        "{{ __schema {{ {steps}name{} }} }}",
        " }".repeat(path.len())
    )
}

fn cases() -> Vec<Case> {
    let mut fan_out = "name".to_owned();
    for _ in 0..7 {
        fan_out = format!("possibleTypes {{ interfaces {{ {fan_out} }} }}");
    }
    let aliased: String = (0..15)
        .map(|i| format!(" a{i}: sessions(first: 100) {{ totalCount }}"))
        .collect();
    let unknown = |n: usize| format!("{{ viewer {{{} }} }}", " x".repeat(n));
    let deep_variable = format!(
        "{{\"query\": \"query($v: [String]) {{ __typename }}\", \"variables\": {{\"v\": {}}}}}",
        nested("[", "1", "]", 100_000)
    );
    let mut operations: String = (0..2_000)
        .map(|i| format!("query Q{i} {{ __typename }} "))
        .collect();
    operations.push_str("query Last { __typename }");
    vec![
        case(
            "fragment doubling, 25 fragments",
            spreading(25, 2, "__typename"),
            Expect::Code("TOO_MANY_SELECTIONS"),
        ),
        case(
            "fragment doubling, 60 fragments",
            spreading(60, 2, "__typename"),
            Expect::Code("TOO_MANY_SELECTIONS"),
        ),
        case(
            "fragment diamonds, 12 levels of 8 spreads",
            spreading(12, 8, "__typename"),
            Expect::Code("TOO_MANY_SELECTIONS"),
        ),
        case(
            "fragment cycle",
            "{ ...A } fragment A on Query { ...B } fragment B on Query { __typename ...A }"
                .to_owned(),
            Expect::Code("GRAPHQL_VALIDATION_FAILED"),
        ),
        case(
            "aliases inside fragments spread 2^9 times",
            spreading(9, 2, &aliased),
            Expect::Code("TOO_MANY_SELECTIONS"),
        ),
        case(
            "aliases inside fragments spread 2^4 times",
            spreading(4, 2, &aliased),
            Expect::Code("QUERY_TOO_COMPLEX"),
        ),
        case(
            "inline fragments nested 50 deep",
            format!(
                "{{ {} }}",
                nested("... on Query { ", "__typename", " }", 50)
            ),
            Expect::Data,
        ),
        case(
            "inline fragments nested 50,000 deep",
            format!(
                "{{ {} }}",
                nested("... on Query { ", "__typename", " }", 50_000)
            ),
            Expect::Code("QUERY_TOO_DEEP"),
        ),
        case(
            "selections nested 50,000 deep",
            nested("{ viewer ", "", "}", 50_000),
            Expect::Code("QUERY_TOO_DEEP"),
        ),
        case(
            "2,000 directives on one field",
            format!("{{ __typename{} }}", " @include(if: true)".repeat(2_000)),
            // async-graphql lets `@include` repeat.
            Expect::Coded,
        ),
        case(
            "20,000 directives on one field",
            format!("{{ __typename{} }}", " @include(if: true)".repeat(20_000)),
            Expect::Code("DOCUMENT_TOO_LARGE"),
        ),
        case(
            "introspection fan-out through __type, two aliases",
            format!(
                "{{ a: __type(name: \"Node\") {{ {fan_out} }} b: __type(name: \"Node\") {{ {fan_out} }} }}"
            ),
            Expect::Code("QUERY_TOO_COMPLEX"),
        ),
        case(
            "introspection fan-out through __schema",
            schema_path(&[
                "types",
                "possibleTypes",
                "interfaces",
                "possibleTypes",
                "interfaces",
                "possibleTypes",
                "interfaces",
                "possibleTypes",
                "interfaces",
                "possibleTypes",
                "interfaces",
                "possibleTypes",
            ]),
            Expect::Code("QUERY_TOO_COMPLEX"),
        ),
        case(
            "introspection: one key selected 3,000 times",
            format!(
                "{{ __schema {{ types {{{} }} }} }}",
                " fields { name }".repeat(3_000)
            ),
            Expect::Code("QUERY_TOO_COMPLEX"),
        ),
        case(
            "500,000 numbers written without spaces",
            format!(
                "{{ sessions(first: [{}0]) {{ totalCount }} }}",
                "0-".repeat(500_000)
            ),
            Expect::Code("DOCUMENT_TOO_LARGE"),
        ),
        case(
            "introspection of fields' types' fields, three levels",
            schema_path(&[
                "types", "fields", "type", "ofType", "fields", "type", "ofType", "fields",
            ]),
            Expect::Data,
        ),
        case(
            "GraphiQL's introspection",
            include_str!("introspection/graphiql.graphql").to_owned(),
            Expect::Data,
        ),
        case(
            "graphql-js's default introspection (codegen, Relay)",
            include_str!("introspection/graphql-js-default.graphql").to_owned(),
            Expect::Data,
        ),
        case(
            "Apollo's introspection",
            include_str!("introspection/apollo.graphql").to_owned(),
            Expect::Data,
        ),
        case(
            "Python gql's introspection",
            include_str!("introspection/python-gql.graphql").to_owned(),
            Expect::Data,
        ),
        case(
            "a list 50,000 deep in an argument",
            format!(
                "{{ sessions(first: {}) {{ totalCount }} }}",
                nested("[", "1", "]", 50_000)
            ),
            Expect::Code("QUERY_TOO_DEEP"),
        ),
        case(
            "a list 60 deep in an argument",
            format!(
                "{{ sessions(first: {}) {{ totalCount }} }}",
                nested("[", "1", "]", 60)
            ),
            Expect::Code("BAD_USER_INPUT"),
        ),
        case(
            "300,000 unknown fields",
            unknown(300_000),
            Expect::Code("DOCUMENT_TOO_LARGE"),
        ),
        case(
            "7,000 unknown fields",
            unknown(7_000),
            Expect::Code("GRAPHQL_VALIDATION_FAILED"),
        ),
        case(
            "a comment of 2 MiB",
            format!("#{}\n{{ __typename }}", "x".repeat(2 << 20)),
            Expect::Code("DOCUMENT_TOO_LARGE"),
        ),
        case(
            "a string argument of 900 KiB",
            format!("{{ session(id: \"{}\") {{ id }} }}", "a".repeat(900 << 10)),
            Expect::Coded,
        ),
        case(
            "2,001 operations in one document",
            operations,
            Expect::Coded,
        ),
        Case {
            name: "variables: 7 MiB of list items",
            body: json!({
                "query": "query($f: SessionFilter) { sessions(filter: $f, first: 1) { totalCount } }",
                "variables": { "f": { "status": vec!["COMPLETED"; 600_000] } },
            }),
            expect: Expect::Coded,
        },
        Case {
            name: "variables: a list 100,000 deep",
            body: Value::String(deep_variable),
            expect: Expect::Status(400),
        },
    ]
}

/// The body to send: JSON, or (for a malformed one) the text as it is.
fn body_text(body: &Value) -> String {
    match body {
        Value::String(raw) => raw.clone(),
        _ => body.to_string(),
    }
}

/// Checks a GraphQL response against what was expected; the number of errors it carried.
fn check(name: &str, transport: &str, response: &Value, expect: Expect) -> usize {
    let errors = response["errors"].as_array().cloned().unwrap_or_default();
    assert!(
        errors.len() <= 101,
        "{name} over {transport}: {} errors",
        errors.len()
    );
    for error in &errors {
        let code = error["extensions"]["code"].as_str().unwrap_or("");
        assert!(
            !code.is_empty() && code != "INTERNAL_SERVER_ERROR",
            "{name} over {transport}: {error}"
        );
    }
    let first = errors
        .first()
        .and_then(|e| e["extensions"]["code"].as_str())
        .unwrap_or("");
    match expect {
        Expect::Code(code) => assert_eq!(first, code, "{name} over {transport}"),
        Expect::Data => assert!(
            errors.is_empty() && response["data"].is_object(),
            "{name} over {transport}: {response:.300}"
        ),
        Expect::Coded => {}
        Expect::Status(_) => assert!(!errors.is_empty(), "{name} over {transport}"),
    }
    errors.len()
}

/// Polls `/livez` and runs a small query every 50 ms until told to stop; the longest wait,
/// also kept in `recent` (in µs) for the case under way to take.
async fn poll(addr: SocketAddr, stop: Arc<AtomicBool>, recent: Arc<AtomicU64>) -> Duration {
    let client = reqwest::Client::new();
    let mut longest = Duration::ZERO;
    let note = |wait: Duration| {
        recent.fetch_max(wait.as_micros() as u64, Ordering::Relaxed);
    };
    let mut ticks = tokio::time::interval(Duration::from_millis(50));
    while !stop.load(Ordering::Relaxed) {
        ticks.tick().await;
        let started = Instant::now();
        let live = client
            .get(format!("http://{addr}/livez"))
            .send()
            .await
            .unwrap();
        assert!(live.status().is_success());
        longest = longest.max(started.elapsed());
        note(started.elapsed());
        let started = Instant::now();
        let answer: Value = client
            .post(format!("http://{addr}/graphql"))
            .json(&json!({ "query": "{ sessions(first: 1) { totalCount } }" }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert!(answer["errors"].is_null(), "{answer}");
        longest = longest.max(started.elapsed());
        note(started.elapsed());
    }
    longest
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn websocket(addr: SocketAddr) -> Socket {
    let (mut socket, _) =
        tokio_tungstenite::connect_async(common::ws::upgrade_request(addr, false))
            .await
            .unwrap();
    let init = json!({ "type": "connection_init" }).to_string();
    socket.send(Message::text(init)).await.unwrap();
    let ack = socket.next().await.unwrap().unwrap();
    assert!(ack.to_text().unwrap().contains("connection_ack"), "{ack}");
    socket
}

/// Runs one operation over the WebSocket: its result as a response (`next`'s payload, or
/// `error`'s errors).
async fn over_websocket(socket: &mut Socket, id: usize, body: &Value) -> Value {
    let payload = match body {
        Value::String(raw) => Value::String(raw.clone()),
        _ => body.clone(),
    };
    let subscribe = json!({ "type": "subscribe", "id": id.to_string(), "payload": payload });
    socket
        .send(Message::text(subscribe.to_string()))
        .await
        .unwrap();
    let mut result = Value::Null;
    while let Some(message) = socket.next().await {
        let message = message.unwrap();
        let Ok(text) = message.to_text() else {
            continue;
        };
        let message: Value = serde_json::from_str(text).unwrap_or(Value::Null);
        match message["type"].as_str() {
            Some("next") => result = message["payload"].clone(),
            Some("error") => return json!({ "errors": message["payload"] }),
            Some("complete") => return result,
            Some("ping") => {
                let pong = json!({ "type": "pong" }).to_string();
                socket.send(Message::text(pong)).await.unwrap();
            }
            _ => {}
        }
    }
    panic!("the WebSocket closed during operation {id}");
}

/// Messages a WebSocket carries at most (the server's limit).
const WS_MESSAGE_LIMIT: usize = 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_documents_are_refused_at_once_and_nobody_waits() {
    let data = DataDir::new("hostile");
    let server = Served::start(vec!["--data-dir".to_owned(), data.0.display().to_string()]).await;
    let (pid, addr) = (server.child.id(), server.addr);
    let client = reqwest::Client::new();
    // Warm up (the database's first statements, the documents' first parse).
    let warm: Value = client
        .post(format!("http://{addr}/graphql"))
        .json(&json!({ "query": "{ sessions(first: 1) { totalCount } }" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(warm["errors"].is_null(), "{warm}");
    let baseline_kib = process::status_kib(pid, "VmHWM");

    let stop = Arc::new(AtomicBool::new(false));
    let recent = Arc::new(AtomicU64::new(0));
    // On a thread and runtime of its own, so that the work of the hostile client (serializing
    // megabytes of JSON) never delays it: only the server can.
    let poller = {
        let (stop, recent) = (stop.clone(), recent.clone());
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(poll(addr, stop, recent))
        })
    };
    let mut socket = websocket(addr).await;

    println!(
        "{:<52} {:>9} {:>9} {:>7} {:>10} {:>12}",
        "case", "http ms", "ws ms", "errors", "peak MiB", "poll wait ms"
    );
    for (i, case) in cases().into_iter().enumerate() {
        let text = body_text(&case.body);
        let started = Instant::now();
        let response = client
            .post(format!("http://{addr}/graphql"))
            .header("content-type", "application/json")
            .body(text.clone())
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let answer: Value = response.json().await.unwrap_or(Value::Null);
        let http_time = started.elapsed();
        let errors = match case.expect {
            Expect::Status(expected) => {
                assert_eq!(status, expected, "{}: {answer}", case.name);
                0
            }
            expect => {
                assert!(status < 500, "{}: HTTP {status} {answer:.300}", case.name);
                check(case.name, "HTTP", &answer, expect)
            }
        };

        // A malformed body would be a malformed message, which ends the connection.
        let fits = text.len() < WS_MESSAGE_LIMIT - 1024;
        let ws_time = if fits && !matches!(case.expect, Expect::Status(_)) {
            let started = Instant::now();
            let answer = over_websocket(&mut socket, i, &case.body).await;
            check(case.name, "WebSocket", &answer, case.expect);
            format!("{:.1}", started.elapsed().as_secs_f64() * 1e3)
        } else {
            "-".to_owned()
        };
        let peak = process::status_kib(pid, "VmHWM") as f64 / 1024.0;
        // Let the poller's next round see the server after this case too.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let waited = recent.swap(0, Ordering::Relaxed) as f64 / 1e3;
        println!(
            "{:<52} {:>9.1} {:>9} {:>7} {:>10.1} {:>12.1}",
            case.name,
            http_time.as_secs_f64() * 1e3,
            ws_time,
            errors,
            peak,
            waited
        );
        // Bounded, not fast: the doubling fragments alone took 20 s and more before.
        assert!(
            http_time < Duration::from_secs(10),
            "{}: {http_time:?}",
            case.name
        );
    }

    stop.store(true, Ordering::Relaxed);
    let longest = poller.join().unwrap();
    let peak_kib = process::status_kib(pid, "VmHWM");
    println!(
        "the poller's longest wait: {:.1} ms; the server's peak RSS: {:.1} MiB ({:.1} MiB at the start)",
        longest.as_secs_f64() * 1e3,
        peak_kib as f64 / 1024.0,
        baseline_kib as f64 / 1024.0
    );
    drop(server);
    // A liveness bound, not a speed target: a worker held by one hostile document shows as
    // hundreds of milliseconds to seconds; 100 ms was crossed by scheduling noise alone on a
    // busy 2-core machine (111–158 ms, the poller's usual longest wait being 40–70 ms).
    assert!(
        longest < Duration::from_millis(250),
        "a client polling beside the hostile requests waited {longest:?}"
    );
    assert!(
        peak_kib.saturating_sub(baseline_kib) < 512 * 1024,
        "the server's peak memory grew by {} MiB",
        (peak_kib - baseline_kib) / 1024
    );
}
