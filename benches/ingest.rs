//! Ingest benchmark: how fast streamed content goes in through the public GraphQL API, and how
//! many bytes the database writes per appended byte (WAL, measured with pg_current_wal_lsn),
//! against the quadratic baseline of appending by UPDATE. Prints figures; asserts nothing about
//! speed (these machines are shared and noisy).
//!
//!     cargo bench --bench ingest                      # embedded, and local PostgreSQL if reachable
//!     DATABASE_URL=postgres://… cargo bench --bench ingest
//!     cargo bench --bench ingest -- --token cf_…      # the server requires tokens

#[path = "common/app.rs"]
mod app;
#[path = "../tests/it/common/mod.rs"]
mod common;
#[path = "common/token.rs"]
mod token;

use std::time::Instant;

use serde_json::{Value, json};

use common::TestApp;

/// Token-sized chunks of varied text (so compression does not flatter either design).
fn chunks(n: usize, seed: u64) -> Vec<String> {
    const WORDS: [&str; 16] = [
        "pod ",
        "memory ",
        "limit ",
        "OOMKilled ",
        "restart ",
        "namespace ",
        "payments ",
        "the ",
        "container ",
        "exceeded ",
        "node ",
        "pressure ",
        "rollout ",
        "image ",
        "probe ",
        "failed ",
    ];
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            WORDS[(x % 16) as usize].to_owned()
        })
        .collect()
}

async fn wal_lsn(app: &TestApp) -> String {
    sqlx::query_scalar("SELECT pg_current_wal_insert_lsn()::text")
        .fetch_one(app.store.pool())
        .await
        .unwrap()
}

async fn wal_since(app: &TestApp, since: &str) -> i64 {
    sqlx::query_scalar("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::bigint")
        .bind(since)
        .fetch_one(app.store.pool())
        .await
        .unwrap()
}

async fn gql(app: &TestApp, query: &str, variables: Value) -> Value {
    let body = app.graphql(query, variables).await;
    assert!(body.get("errors").is_none(), "{body}");
    body["data"].clone()
}

/// A running execution to stream under.
async fn execution(app: &TestApp) -> String {
    let s = gql(
        app,
        "mutation { createSession(input: { alertType: \"Bench\", chainId: \"bench\" }) { uuid } }",
        json!({}),
    )
    .await;
    let st = gql(app, "mutation ($s: ID!) { createStage(input: { sessionId: $s, stageIndex: 0, name: \"Bench\" }) { uuid } }",
        json!({ "s": s["createSession"]["uuid"] })).await;
    let e = gql(app, "mutation ($s: ID!) { createAgentExecution(input: { stageId: $s, agentIndex: 1, agentName: \"Bench\", iterationStrategy: \"react\" }) { uuid } }",
        json!({ "s": st["createStage"]["uuid"] })).await;
    e["createAgentExecution"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn event(app: &TestApp, execution: &str) -> String {
    let e = gql(app, "mutation ($e: ID!) { createTimelineEvent(input: { executionId: $e, eventType: LLM_RESPONSE }) { uuid } }",
        json!({ "e": execution })).await;
    e["createTimelineEvent"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned()
}

const APPEND: &str = "mutation ($e: ID!, $o: Int!, $d: String!) { appendTimelineContent(input: { eventId: $e, offset: $o, delta: $d }) { end } }";
const INGEST: &str =
    "mutation ($ops: [IngestOperation!]!) { ingest(operations: $ops) { __typename } }";

/// Appends `chunks` to one event, one mutation each. Returns (appends/s, WAL bytes per byte).
async fn one_event(app: &TestApp, execution: &str, chunks: &[String]) -> (f64, f64) {
    let event = event(app, execution).await;
    let lsn = wal_lsn(app).await;
    let started = Instant::now();
    let mut offset = 0;
    for chunk in chunks {
        gql(app, APPEND, json!({ "e": event, "o": offset, "d": chunk })).await;
        offset += chunk.chars().count();
    }
    let rate = chunks.len() as f64 / started.elapsed().as_secs_f64();
    gql(app, "mutation ($e: ID!) { finishTimelineEvent(input: { eventId: $e, status: COMPLETED }) { status } }", json!({ "e": event })).await;
    let bytes: usize = chunks.iter().map(String::len).sum();
    (rate, wal_since(app, &lsn).await as f64 / bytes as f64)
}

/// Appends `chunks` to one event in batches of `batch` per `ingest` mutation.
async fn one_event_batched(
    app: &TestApp,
    execution: &str,
    chunks: &[String],
    batch: usize,
) -> (f64, f64) {
    let event = event(app, execution).await;
    let lsn = wal_lsn(app).await;
    let started = Instant::now();
    let mut offset = 0;
    for group in chunks.chunks(batch) {
        let ops: Vec<Value> = group
            .iter()
            .map(|chunk| {
                let op = json!({ "appendTimelineContent": { "eventId": event, "offset": offset, "delta": chunk } });
                offset += chunk.chars().count();
                op
            })
            .collect();
        gql(app, INGEST, json!({ "ops": ops })).await;
    }
    let rate = chunks.len() as f64 / started.elapsed().as_secs_f64();
    gql(app, "mutation ($e: ID!) { finishTimelineEvent(input: { eventId: $e, status: COMPLETED }) { status } }", json!({ "e": event })).await;
    let bytes: usize = chunks.iter().map(String::len).sum();
    (rate, wal_since(app, &lsn).await as f64 / bytes as f64)
}

/// `events` events streamed at once, `per_event` single appends each. Returns appends/s.
async fn concurrent_events(app: &TestApp, execution: &str, events: usize, per_event: usize) -> f64 {
    let mut ids = Vec::new();
    for _ in 0..events {
        ids.push(event(app, execution).await);
    }
    let started = Instant::now();
    let streams = ids.iter().enumerate().map(|(i, event)| async move {
        let mut offset = 0;
        for chunk in chunks(per_event, i as u64 + 7) {
            gql(app, APPEND, json!({ "e": event, "o": offset, "d": chunk })).await;
            offset += chunk.chars().count();
        }
    });
    futures::future::join_all(streams).await;
    (events * per_event) as f64 / started.elapsed().as_secs_f64()
}

/// The design avoided: appending by rewriting the growing text with UPDATE.
async fn update_baseline(app: &TestApp, chunks: &[String]) -> f64 {
    let pool = app.store.pool();
    sqlx::query("CREATE TABLE bench_naive (id int PRIMARY KEY, content text NOT NULL)")
        .execute(pool)
        .await
        .unwrap();
    sqlx::query("INSERT INTO bench_naive VALUES (1, '')")
        .execute(pool)
        .await
        .unwrap();
    let lsn = wal_lsn(app).await;
    for chunk in chunks {
        sqlx::query("UPDATE bench_naive SET content = content || $1 WHERE id = 1")
            .bind(chunk)
            .execute(pool)
            .await
            .unwrap();
    }
    let bytes: usize = chunks.iter().map(String::len).sum();
    wal_since(app, &lsn).await as f64 / bytes as f64
}

async fn run(label: &str, url: Option<String>, token: Option<&str>) {
    let app = app::start(url, token).await;
    let exec = execution(&app).await;
    let stream = chunks(2_000, 42);
    one_event(&app, &exec, &chunks(200, 1)).await; // warm-up
    let (rate, wal) = one_event(&app, &exec, &stream).await;
    println!(
        "{label}: one event, 2,000 single appends: {rate:.0} appends/s, {wal:.1} WAL bytes per appended byte"
    );
    let (rate, wal) = one_event_batched(&app, &exec, &chunks(10_000, 43), 50).await;
    println!(
        "{label}: one event, 10,000 appends in ingest batches of 50: {rate:.0} appends/s, {wal:.1} WAL bytes per appended byte"
    );
    let rate = concurrent_events(&app, &exec, 50, 100).await;
    println!(
        "{label}: 50 concurrent events, 100 single appends each: {rate:.0} appends/s in total"
    );
    for n in [500, 2_000] {
        let baseline = update_baseline(&app, &chunks(n, 42)).await;
        println!(
            "{label}: baseline UPDATE-append of {n} chunks: {baseline:.1} WAL bytes per appended byte"
        );
        sqlx::query("DROP TABLE bench_naive")
            .execute(app.store.pool())
            .await
            .unwrap();
    }
    app.stop().await;
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
            pool.close().await;
            run("postgresql", Some(url), token).await;
        }
        Err(err) => println!("postgresql: skipped ({err})"),
    }
}
