//! Live delivery benchmark against a real `casefile serve` process (embedded database, and the
//! local PostgreSQL when reachable). Prints figures; asserts nothing about speed.
//!
//! - latency from a write's commit to a WebSocket subscriber, p50/p99, while N streams run;
//! - subscribers one process serves during a stream (each must receive the exact text);
//! - server memory per idle subscription (RSS of the server process).
//!
//!     cargo bench --bench live [-- --token cf_…]   (with a token: the server requires tokens)

#[path = "../tests/it/common/process.rs"]
mod process;
#[path = "common/token.rs"]
mod token;
#[path = "../tests/it/common/ws.rs"]
#[allow(dead_code)] // the tests' client; this benchmark never disconnects deliberately
mod ws;

use std::net::SocketAddr;
use std::process::Child;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use casefile::cli::client::Api;
use serde_json::{Value, json};
use ws::Subscription;

struct Server {
    child: Child,
    addr: SocketAddr,
    /// Sent with every request and subscription when the server requires tokens.
    token: Option<String>,
    /// The embedded database's directory, removed when the server is dropped.
    data_dir: Option<std::path::PathBuf>,
}

impl Server {
    fn start(database_url: Option<&str>, token: Option<&str>) -> Server {
        let (mut args, data_dir): (Vec<std::ffi::OsString>, _) = match database_url {
            Some(url) => (vec!["--database-url".into(), url.into()], None),
            None => {
                let dir =
                    std::env::temp_dir().join(format!("casefile-bench-{}", std::process::id()));
                (
                    vec!["--data-dir".into(), dir.clone().into_os_string()],
                    Some(dir),
                )
            }
        };
        if let Some(token) = token {
            args.extend(["--auth", "tokens", "--bootstrap-admin-token", token].map(Into::into));
        }
        // One client opens thousands of subscriptions (each on a connection of its own) at
        // once: a fair-use limit would measure itself, not delivery.
        args.extend(
            [
                "--rate-limit-per-second",
                "0",
                "--max-subscriptions-per-identity",
                "20000",
                "--max-websockets-per-identity",
                "20000",
            ]
            .map(Into::into),
        );
        let (child, addr) = process::serve::<_, std::ffi::OsString>(args);
        Server {
            child,
            addr,
            token: token.map(str::to_owned),
            data_dir,
        }
    }

    fn rss_kib(&self) -> u64 {
        let kib = process::status_kib(self.child.id(), "VmRSS");
        assert!(kib > 0, "the server's RSS cannot be read");
        kib
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        process::sigterm(&self.child);
        let _ = self.child.wait();
        if let Some(dir) = &self.data_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The benchmarked server's API.
fn api(server: &Server) -> Api {
    Api::new(
        format!("http://{}/graphql", server.addr),
        server.token.clone(),
    )
}

/// The `connection_init` payload for the benchmarked server.
fn init(server: &Server) -> Value {
    match &server.token {
        Some(token) => json!({ "Authorization": format!("Bearer {token}") }),
        None => json!({}),
    }
}

/// A new session with one running execution and one streaming event.
async fn stream_target(api: &Api) -> (String, String) {
    let id = |query: &'static str, variables: Value, field: &'static str| async move {
        api.id(query, variables, field).await.unwrap()
    };
    let s = id(
        "mutation { createSession(input: { alertType: \"Bench\", chainId: \"bench\" }) { uuid } }",
        json!({}),
        "createSession",
    )
    .await;
    let st = id("mutation ($s: ID!) { createStage(input: { sessionId: $s, stageIndex: 0, name: \"Bench\" }) { uuid } }", json!({ "s": s }), "createStage").await;
    let e = id("mutation ($s: ID!) { createAgentExecution(input: { stageId: $s, agentIndex: 1, agentName: \"Bench\", iterationStrategy: \"react\" }) { uuid } }", json!({ "s": st }), "createAgentExecution").await;
    let ev = id("mutation ($e: ID!) { createTimelineEvent(input: { executionId: $e, eventType: LLM_RESPONSE }) { uuid } }", json!({ "e": e }), "createTimelineEvent").await;
    (s, ev)
}

async fn append(api: &Api, event: &str, offset: usize, delta: &str) {
    api.call(
        "mutation ($e: ID!, $o: Int!, $d: String!) { appendTimelineContent(input: { eventId: $e, offset: $o, delta: $d }) { end } }",
        json!({ "e": event, "o": offset, "d": delta }),
    )
    .await
    .unwrap();
}

/// `count` timeline subscriptions to `session`, opened 100 at a time.
async fn subscribe(server: &Server, session: &str, count: usize) -> Vec<Subscription> {
    let mut subs = Vec::with_capacity(count);
    while subs.len() < count {
        let batch = (count - subs.len()).min(100);
        subs.extend(
            futures::future::join_all((0..batch).map(|_| {
                Subscription::start(
                    server.addr,
                    false,
                    init(server),
                    TIMELINE,
                    json!({ "s": session }),
                )
            }))
            .await,
        );
    }
    subs
}

const TIMELINE: &str = "subscription ($s: ID!) { timeline(sessionId: $s) { kind delta } }";

fn micros_now() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Latencies in ms: of every token, and of the newest token of each delta (what delivery costs
/// beyond the coalescing window, which holds a delta's older tokens back by design).
struct Latencies {
    tokens: Vec<f64>,
    newest: Vec<f64>,
}

/// `streams` writers, each appending `tokens` timestamped tokens at `rate` per second to its own
/// session, each watched by one subscriber.
async fn latency(server: &Server, streams: usize, tokens: usize, rate: f64) -> Latencies {
    let api = api(server);
    let mut targets = Vec::new();
    for _ in 0..streams {
        targets.push(stream_target(&api).await);
    }
    let mut readers = Vec::new();
    for (session, _) in &targets {
        let mut sub = Subscription::start(
            server.addr,
            false,
            init(server),
            TIMELINE,
            json!({ "s": session }),
        )
        .await;
        readers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut newest = Vec::new();
            let mut seen = 0;
            while seen < tokens {
                let update = sub.next().await.unwrap()["timeline"].clone();
                let now = micros_now();
                if let Some(delta) = update["delta"].as_str() {
                    let mut least = f64::MAX;
                    for token in delta.split_whitespace() {
                        let sent: u128 = token.trim_start_matches('t').parse().unwrap();
                        let ms = (now - sent) as f64 / 1000.0;
                        latencies.push(ms);
                        least = least.min(ms);
                        seen += 1;
                    }
                    newest.push(least);
                }
            }
            (latencies, newest)
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pause = Duration::from_secs_f64(1.0 / rate);
    let writers = targets.iter().map(|(_, event)| {
        let api = api.clone();
        async move {
            let mut offset = 0;
            for _ in 0..tokens {
                let token = format!("t{} ", micros_now());
                append(&api, event, offset, &token).await;
                offset += token.len();
                tokio::time::sleep(pause).await;
            }
        }
    });
    futures::future::join_all(writers).await;
    let mut all = Latencies {
        tokens: Vec::new(),
        newest: Vec::new(),
    };
    for reader in readers {
        let (tokens, newest) = reader.await.unwrap();
        all.tokens.extend(tokens);
        all.newest.extend(newest);
    }
    all.tokens.sort_by(|a, b| a.partial_cmp(b).unwrap());
    all.newest.sort_by(|a, b| a.partial_cmp(b).unwrap());
    all
}

/// `subscribers` on one session while one writer streams `tokens` tokens. Returns (seconds from
/// the last write until every subscriber had everything, subscribers that got it exactly).
async fn fan_out(server: &Server, subscribers: usize, tokens: usize) -> (f64, usize) {
    let api = api(server);
    let (session, event) = stream_target(&api).await;
    let expected: String = (0..tokens).map(|i| format!("w{i} ")).collect();
    let mut readers = Vec::new();
    for mut sub in subscribe(server, &session, subscribers).await {
        let length = expected.len();
        readers.push(tokio::spawn(async move {
            let mut text = String::new();
            while text.len() < length {
                if let Some(delta) = sub.next().await.unwrap()["timeline"]["delta"].as_str() {
                    text.push_str(delta);
                }
            }
            (text, Instant::now())
        }));
    }
    let mut offset = 0;
    for i in 0..tokens {
        let token = format!("w{i} ");
        append(&api, &event, offset, &token).await;
        offset += token.len();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let written = Instant::now();
    let mut exact = 0;
    let mut last = written;
    for reader in readers {
        let (text, at) = reader.await.unwrap();
        exact += usize::from(text == expected);
        last = last.max(at);
    }
    ((last - written).as_secs_f64(), exact)
}

/// Server RSS growth per idle timeline subscription.
async fn idle_memory(server: &Server, count: usize) -> f64 {
    let api = api(server);
    let (session, _) = stream_target(&api).await;
    // Warm up the server's allocator and connection handling first.
    let warm = subscribe(server, &session, 50).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = server.rss_kib();
    let held = subscribe(server, &session, count).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let after = server.rss_kib();
    drop(warm);
    drop(held);
    (after.saturating_sub(before) as f64 * 1024.0) / count as f64
}

async fn run(label: &str, url: Option<&str>, token: Option<&str>) {
    let server = Server::start(url, token);
    for (streams, rate, tokens) in [
        (1, 20.0, 100),
        (10, 20.0, 100),
        (50, 20.0, 100),
        (1, 200.0, 400),
        (4, 200.0, 400),
    ] {
        let l = latency(&server, streams, tokens, rate).await;
        println!(
            "{label}: write→subscriber latency with {streams} streams at {rate} tokens/s: p50 {:.1} ms, p99 {:.1} ms ({} tokens); newest token of each delta p50 {:.1} ms, p99 {:.1} ms ({} deltas)",
            percentile(&l.tokens, 0.5),
            percentile(&l.tokens, 0.99),
            l.tokens.len(),
            percentile(&l.newest, 0.5),
            percentile(&l.newest, 0.99),
            l.newest.len()
        );
    }
    for subscribers in [100, 1000, 2500, 5000] {
        let (seconds, exact) = fan_out(&server, subscribers, 200).await;
        println!(
            "{label}: {subscribers} subscribers on one stream of 200 tokens: {exact} got the exact text, the last {:.0} ms after the last write",
            seconds * 1000.0
        );
    }
    drop(server);
    // On a fresh process: one that served thousands of connections has memory to reuse.
    let server = Server::start(url, token);
    let per = idle_memory(&server, 2000).await;
    println!(
        "{label}: server memory per idle subscription: {:.1} KiB (2,000 WebSocket subscriptions)",
        per / 1024.0
    );
}

#[tokio::main]
async fn main() {
    let token = token::from_args_or_env();
    let token = token.as_deref();
    run("embedded", None, token).await;
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    match sqlx::PgPool::connect(&url).await {
        Ok(pool) => {
            let name = format!("casefile_bench_{}", std::process::id());
            sqlx::query(&format!("CREATE DATABASE {name}"))
                .execute(&pool)
                .await
                .unwrap();
            let (base, _) = url.rsplit_once('/').unwrap();
            let bench_url = format!("{base}/{name}");
            run("postgresql", Some(&bench_url), token).await;
            sqlx::query(&format!("DROP DATABASE {name} WITH (FORCE)"))
                .execute(&pool)
                .await
                .unwrap();
        }
        Err(err) => println!("postgresql: skipped ({err})"),
    }
}
