//! Ingest benchmark: how fast streamed content goes in through the public GraphQL API, and what
//! the database writes for it (WAL, measured with pg_current_wal_insert_lsn; rows, from
//! pg_stat_user_tables) and what it costs in CPU (the server's: this process less the load
//! generator's thread; PostgreSQL's: its backends for the database, from `/proc`). Prints
//! figures; asserts nothing about speed (these machines are shared and noisy).
//!
//! Streams are closed-loop clients, each on its own keep-alive connection: one
//! `appendTimelineContent` per request, sent when the previous one is acknowledged, token-sized
//! deltas with offsets; an event is finished after 200 appends (`--appends-per-event`) and the
//! next one created. Two layouts: one stream per session (many sessions running at once) and
//! every stream in one session (one orchestrator's parallel agents, one agent each).
//!
//!     cargo bench --bench ingest                      # embedded, and local PostgreSQL if reachable
//!     DATABASE_URL=postgres://… cargo bench --bench ingest
//!     cargo bench --bench ingest -- --seconds 5 --streams 1,10,50,200 --only postgresql
//!     cargo bench --bench ingest -- --token cf_…      # the server requires tokens
//!     cargo bench --bench ingest -- --groups-in-flight 4 --group-window-us 200
//!     cargo bench --bench ingest -- --appends-per-event 20   # events finish ten times as often
//!     cargo bench --bench ingest -- --other-processes 2       # replicas following the log
//!     cargo bench --bench ingest -- --layouts session-per-stream  # one layout of the two
//!     cargo bench --bench ingest -- --rounds 3                # each cell three times
//!     CASEFILE_PARTITION_BY_SESSION=4 cargo bench --bench ingest -- --only postgresql \
//!         --side-by-side --rounds 3   # partitioned against plain, each cell on both in turn

#[path = "common/app.rs"]
mod app;
#[path = "common/args.rs"]
mod args;
#[path = "../tests/it/common/mod.rs"]
mod common;
#[path = "common/cpu.rs"]
mod cpu;
#[allow(dead_code)] // response sizes: the read benchmark's
#[path = "common/http_load.rs"]
mod http_load;
#[path = "common/token.rs"]
mod token;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{Value, json};

use casefile::http::HttpOptions;
use casefile::live::{Hub, HubOptions};
use casefile::store::Store;
use casefile::store::write::append_groups::AppendGroupOptions;
use common::TestApp;
use cpu::Backends;
use http_load::{Connection, Outcome, Run};

/// Appends per timeline event before it is finished and the stream's next one created, unless
/// `--appends-per-event` says otherwise.
const PER_EVENT: usize = 200;

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

/// The WAL's insert position.
async fn wal_lsn(app: &TestApp) -> String {
    sqlx::query_scalar("SELECT pg_current_wal_insert_lsn()::text")
        .fetch_one(app.store.pool())
        .await
        .unwrap()
}

/// WAL bytes written since `since`.
async fn wal_since(app: &TestApp, since: &str) -> i64 {
    sqlx::query_scalar("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::bigint")
        .bind(since)
        .fetch_one(app.store.pool())
        .await
        .unwrap()
}

/// Rows inserted, updated and deleted in every table so far. A backend flushes its table
/// statistics when idle, within 10 seconds (PostgreSQL 15's `PGSTAT_IDLE_INTERVAL`): read
/// once they all have.
async fn rows_written(app: &TestApp) -> Option<i64> {
    tokio::time::sleep(Duration::from_secs(11)).await;
    sqlx::query_scalar::<_, Option<i64>>(
        "SELECT sum(n_tup_ins + n_tup_upd + n_tup_del)::bigint FROM pg_stat_user_tables",
    )
    .fetch_one(app.store.pool())
    .await
    .ok()
    .flatten()
}

async fn gql(app: &TestApp, query: &str, variables: Value) -> Value {
    let body = app.graphql(query, variables).await;
    assert!(body.get("errors").is_none(), "{body}");
    body["data"].clone()
}

async fn session(app: &TestApp) -> String {
    let s = gql(
        app,
        "mutation { createSession(input: { alertType: \"Bench\", chainId: \"bench\" }) { uuid } }",
        json!({}),
    )
    .await;
    s["createSession"]["uuid"].as_str().unwrap().to_owned()
}

/// A stage of `agents` agents running in parallel.
async fn stage(app: &TestApp, session: &str, agents: usize) -> String {
    // One agent alone; several in parallel, all of them to succeed.
    let (parallel, policy) = match agents {
        1 => (Value::Null, Value::Null),
        _ => (json!("MULTI_AGENT"), json!("ALL")),
    };
    let st = gql(app, "mutation ($s: ID!, $n: Int!, $p: ParallelType, $sp: SuccessPolicy) { createStage(input: { sessionId: $s, stageIndex: 0, name: \"Bench\", expectedAgentCount: $n, parallelType: $p, successPolicy: $sp }) { uuid } }",
        json!({ "s": session, "n": agents, "p": parallel, "sp": policy })).await;
    st["createStage"]["uuid"].as_str().unwrap().to_owned()
}

async fn execution(app: &TestApp, stage: &str, agent_index: usize) -> String {
    let e = gql(app, "mutation ($s: ID!, $i: Int!) { createAgentExecution(input: { stageId: $s, agentIndex: $i, agentName: \"Bench\", iterationStrategy: \"react\" }) { uuid } }",
        json!({ "s": stage, "i": agent_index })).await;
    e["createAgentExecution"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn event(app: &TestApp, execution: &str) -> String {
    let e = gql(app, CREATE_EVENT, json!({ "e": execution })).await;
    e["createTimelineEvent"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned()
}

const CREATE_EVENT: &str = "mutation ($e: ID!) { createTimelineEvent(input: { executionId: $e, eventType: LLM_RESPONSE }) { uuid } }";
const FINISH_EVENT: &str = "mutation ($e: ID!) { finishTimelineEvent(input: { eventId: $e, status: COMPLETED }) { status } }";
const APPEND: &str = "mutation ($e: ID!, $o: Int!, $d: String!) { appendTimelineContent(input: { eventId: $e, offset: $o, delta: $d }) { end } }";
const INGEST: &str =
    "mutation ($ops: [IngestOperation!]!) { ingest(operations: $ops) { __typename } }";

/// How the streams are spread over sessions.
#[derive(Clone, Copy)]
enum Layout {
    /// Each stream is the one agent of its own session.
    SessionPerStream,
    /// Every stream is one agent of one stage of one session.
    OneSession,
}

impl Layout {
    const ALL: [Layout; 2] = [Layout::SessionPerStream, Layout::OneSession];

    /// Its name on the command line (`--layouts`).
    fn name(self) -> &'static str {
        match self {
            Layout::SessionPerStream => "session-per-stream",
            Layout::OneSession => "one-session",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Layout::SessionPerStream => "a session per stream",
            Layout::OneSession => "one session",
        }
    }

    /// A running execution per stream.
    async fn executions(self, app: &TestApp, streams: usize) -> Vec<String> {
        let mut executions = Vec::with_capacity(streams);
        match self {
            Layout::SessionPerStream => {
                for _ in 0..streams {
                    let stage = stage(app, &session(app).await, 1).await;
                    executions.push(execution(app, &stage, 1).await);
                }
            }
            Layout::OneSession => {
                let stage = stage(app, &session(app).await, streams).await;
                for agent in 1..=streams {
                    executions.push(execution(app, &stage, agent).await);
                }
            }
        }
        executions
    }
}

fn request(query: &str, variables: Value) -> Bytes {
    Bytes::from(json!({ "query": query, "variables": variables }).to_string())
}

/// Sends one request that must succeed; its body.
async fn must(connection: &mut Connection, body: Bytes) -> Result<Value, String> {
    match connection.send(body).await {
        Outcome::Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| e.to_string()),
        Outcome::Failed(why) => Err(why),
    }
}

/// One stream until `deadline`: events of `per_event` single appends, each created and finished
/// around them (their latencies are not counted). Returns the appends' run and the bytes they
/// carried.
async fn stream(
    connection: &mut Connection,
    execution: &str,
    seed: u64,
    per_event: usize,
    deadline: Instant,
) -> (Run, usize) {
    let mut run = Run::default();
    let mut bytes = 0;
    let mut round = 0;
    while Instant::now() < deadline {
        round += 1;
        let created = match must(connection, request(CREATE_EVENT, json!({ "e": execution }))).await
        {
            Ok(created) => created,
            Err(why) => {
                run.failed(why);
                break;
            }
        };
        let event = created["data"]["createTimelineEvent"]["uuid"]
            .as_str()
            .unwrap()
            .to_owned();
        let mut offset = 0;
        for chunk in chunks(per_event, seed * 1_000 + round) {
            if Instant::now() >= deadline {
                break;
            }
            // Built by hand, as a client would keep a template: the deltas need no escaping.
            let body = format!(
                r#"{{"query":"{APPEND}","variables":{{"e":"{event}","o":{offset},"d":"{chunk}"}}}}"#
            );
            let sent = Instant::now();
            match connection.send(Bytes::from(body)).await {
                Outcome::Ok(_) => {
                    run.latencies_us.push(sent.elapsed().as_micros() as u64);
                    bytes += chunk.len();
                    offset += chunk.chars().count();
                }
                Outcome::Failed(why) => {
                    run.failed(why);
                    break;
                }
            }
        }
        if let Err(why) = must(connection, request(FINISH_EVENT, json!({ "e": event }))).await {
            run.failed(why);
            break;
        }
    }
    (run, bytes)
}

/// What a cell's streams did: their run, the bytes they appended, and the CPU ticks their
/// thread spent (the load generator's own).
struct Streamed {
    run: Run,
    bytes: usize,
    load_ticks: u64,
}

/// One cell of the table: `executions.len()` streams for `seconds`, on a thread of their own.
async fn streams(
    app: &TestApp,
    executions: Vec<String>,
    seconds: f64,
    per_event: usize,
) -> Streamed {
    let url = app.url("/graphql");
    let token = app.token.clone();
    let thread = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async move {
                let ticks = cpu::thread_ticks();
                let mut connections = Vec::new();
                for _ in &executions {
                    connections.push(Connection::open(&url, token.as_deref()).await.unwrap());
                }
                let started = Instant::now();
                let deadline = started + Duration::from_secs_f64(seconds);
                let each = executions
                    .iter()
                    .zip(connections.iter_mut())
                    .enumerate()
                    .map(|(i, (execution, connection))| {
                        stream(connection, execution, i as u64 + 7, per_event, deadline)
                    });
                let done = futures::future::join_all(each).await;
                let elapsed = started.elapsed();
                Streamed {
                    bytes: done.iter().map(|(_, b)| b).sum(),
                    run: Run::joined(done.into_iter().map(|(r, _)| r), elapsed),
                    load_ticks: cpu::thread_ticks() - ticks,
                }
            })
    });
    tokio::task::spawn_blocking(move || thread.join().unwrap())
        .await
        .unwrap()
}

/// Appends `chunks` to one event in batches of `batch` per `ingest` mutation. Returns
/// (appends/s, WAL bytes per appended byte).
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
    gql(app, FINISH_EVENT, json!({ "e": event })).await;
    let bytes: usize = chunks.iter().map(String::len).sum();
    (rate, wal_since(app, &lsn).await as f64 / bytes as f64)
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
    let wal = wal_since(app, &lsn).await as f64 / bytes as f64;
    sqlx::query("DROP TABLE bench_naive")
        .execute(pool)
        .await
        .unwrap();
    wal
}

struct Options {
    seconds: f64,
    streams: Vec<usize>,
    /// The layouts to run (`--layouts`, names comma-separated): both unless it says otherwise.
    layouts: Vec<Layout>,
    only: Option<String>,
    /// Appends per event (`--appends-per-event`): fewer make event creations and finishes,
    /// which take the session's lock, a larger share of the load.
    per_event: usize,
    /// The server's grouping of single appends (`--groups-in-flight`, `--group-window-us`).
    groups: AppendGroupOptions,
    /// Other processes following the change log (`--other-processes`, PostgreSQL only), as
    /// replicas do: the server then announces its commits to them. (They run in this process,
    /// so their CPU counts as the server's.)
    other_processes: usize,
    /// Each cell this many times (`--rounds`).
    rounds: usize,
    /// With `CASEFILE_PARTITION_BY_SESSION`, a plain database beside the partitioned one, each
    /// cell run on both in turn (`--side-by-side`): the machine's drift then reaches both.
    side_by_side: bool,
}

impl Options {
    fn from_args() -> Options {
        let defaults = AppendGroupOptions::default();
        Options {
            seconds: args::arg("--seconds", 5.0),
            streams: args::value("--streams")
                .unwrap_or_else(|| "1,10,50,200".to_owned())
                .split(',')
                .map(|n| {
                    n.trim()
                        .parse()
                        .expect("--streams: numbers, comma-separated")
                })
                .collect(),
            layouts: args::value("--layouts").map_or(Layout::ALL.to_vec(), |names| {
                names
                    .split(',')
                    .map(|name| {
                        Layout::ALL
                            .into_iter()
                            .find(|l| l.name() == name.trim())
                            .expect("--layouts: session-per-stream, one-session")
                    })
                    .collect()
            }),
            only: args::value("--only"),
            per_event: args::arg("--appends-per-event", PER_EVENT),
            other_processes: args::arg("--other-processes", 0),
            rounds: args::arg("--rounds", 1_usize).max(1),
            side_by_side: std::env::args().any(|a| a == "--side-by-side"),
            groups: AppendGroupOptions {
                append_groups_in_flight: args::arg(
                    "--groups-in-flight",
                    defaults.append_groups_in_flight,
                ),
                append_group_window_us: args::arg(
                    "--group-window-us",
                    defaults.append_group_window_us,
                ),
            },
        }
    }

    fn runs(&self, label: &str) -> bool {
        self.only.as_deref().is_none_or(|only| only == label)
    }
}

fn per(value: f64, count: f64) -> String {
    if count > 0.0 {
        format!("{:.0}", value / count)
    } else {
        "–".to_owned()
    }
}

/// A figure rounded, or a dash where there is none.
fn shown(value: Option<f64>) -> String {
    value.map_or("–".to_owned(), |v| format!("{v:.0}"))
}

/// A server measured, on a database of its own.
struct Bench {
    /// Its rows' first column: `embedded`, `plain` or `4 partitions`.
    name: String,
    app: TestApp,
    database: String,
    /// Whether its database is external, so that its PostgreSQL's backends can be measured (the
    /// embedded database runs inside this process: its CPU is the server's).
    external: bool,
    followers: Vec<Arc<Hub>>,
}

/// One cell's figures on one server.
struct Cell {
    appends_per_second: f64,
    postgres_micros: Option<f64>,
    /// Its row of the table.
    row: String,
}

impl Bench {
    /// The server on a fresh database (partitioned into `partitions` on PostgreSQL), warmed up.
    async fn start(
        name: String,
        url: Option<String>,
        partitions: Option<u32>,
        token: Option<&str>,
        options: &Options,
    ) -> Bench {
        let server = HttpOptions {
            append_groups: options.groups,
            ..HttpOptions::default()
        };
        let app = app::start(url.clone(), partitions, token, server).await;
        let database: String = sqlx::query_scalar("SELECT current_database()")
            .fetch_one(app.store.pool())
            .await
            .unwrap();
        let followers = match &url {
            Some(url) if options.other_processes > 0 => {
                other_processes(url, &database, options.other_processes).await
            }
            _ => Vec::new(),
        };
        // Warm-up: plans, pool connections, the first pages of every table.
        let warm = Layout::SessionPerStream.executions(&app, 2).await;
        streams(&app, warm, 1.0, options.per_event).await;
        Bench {
            name,
            app,
            database,
            external: url.is_some(),
            followers,
        }
    }

    /// `n` streams of `layout` for `--seconds`.
    async fn cell(&self, layout: Layout, n: usize, options: &Options) -> Cell {
        let app = &self.app;
        let executions = layout.executions(app, n).await;
        let rows_before = rows_written(app).await;
        let lsn = wal_lsn(app).await;
        let backends = if self.external {
            Some(Backends::of(app.store.pool(), &self.database).await)
        } else {
            None
        };
        let process = cpu::process_ticks(std::process::id());
        let Streamed {
            run,
            bytes,
            load_ticks,
        } = streams(app, executions, options.seconds, options.per_event).await;
        let server_ticks = cpu::process_ticks(std::process::id())
            .saturating_sub(process)
            .saturating_sub(load_ticks);
        let postgres_ticks = match backends {
            Some(before) => Some(
                Backends::of(app.store.pool(), &self.database)
                    .await
                    .since(&before),
            ),
            None => None,
        };
        let wal = wal_since(app, &lsn).await as f64;
        let rows_after = rows_written(app).await;
        let appends = run.ok() as f64;
        let rows = match (rows_before, rows_after) {
            (Some(b), Some(a)) => format!("{:.2}", (a - b) as f64 / appends.max(1.0)),
            _ => "–".to_owned(),
        };
        let failed = match &run.first_failure {
            Some(why) => format!("{} ({})", run.failures, &why[..why.len().min(120)]),
            None => "0".to_owned(),
        };
        let postgres_micros = postgres_ticks
            .filter(|_| appends > 0.0)
            .map(|ticks| cpu::ticks_ms(ticks) * 1000.0 / appends);
        Cell {
            appends_per_second: run.per_second(),
            postgres_micros,
            row: format!(
                "| {} | {} | {n} | {:.0} | {:.2} | {:.2} | {} | {:.1} | {rows} | {} | {} | {failed} |",
                self.name,
                layout.label(),
                run.per_second(),
                run.percentile_ms(0.5),
                run.percentile_ms(0.99),
                per(wal, appends),
                wal / bytes.max(1) as f64,
                per(cpu::ticks_ms(server_ticks) * 1000.0, appends),
                shown(postgres_micros),
            ),
        }
    }

    /// 10,000 appends to one event in `ingest` batches of 50 (PostgreSQL's CPU not measured).
    async fn batched(&self) -> Cell {
        let execution = Layout::SessionPerStream
            .executions(&self.app, 1)
            .await
            .remove(0);
        let (rate, wal) = one_event_batched(&self.app, &execution, &chunks(10_000, 43), 50).await;
        let row = format!(
            "{}: one event, 10,000 appends in `ingest` batches of 50: {rate:.0} appends/s, {wal:.1} WAL bytes per appended byte",
            self.name
        );
        println!("{row}");
        Cell {
            appends_per_second: rate,
            postgres_micros: None,
            row,
        }
    }

    async fn stop(self) {
        for n in [500, 2_000] {
            let baseline = update_baseline(&self.app, &chunks(n, 42)).await;
            println!(
                "{}: baseline UPDATE-append of {n} chunks: {baseline:.1} WAL bytes per appended byte",
                self.name
            );
        }
        for follower in self.followers {
            follower.stop().await;
        }
        self.app.stop().await;
    }
}

/// Every cell on each of `benches`, `--rounds` times, in turn: the order is reversed each
/// round, so that neither server always runs first, and the two meet the machine's drift alike.
/// With two, the second is compared with the first by the means.
async fn run(title: &str, benches: Vec<Bench>, options: &Options) {
    let others = benches[0].followers.len();
    println!(
        "\n{title} (append groups: {} in flight, a {} µs window; {} appends per event; {others} other processes following; {} rounds):\n",
        options.groups.append_groups_in_flight,
        options.groups.append_group_window_us,
        options.per_event,
        options.rounds,
    );
    println!(
        "| database | layout | streams | appends/s | p50 ms | p99 ms | WAL B/append | WAL B/byte | rows/append | server CPU µs/append | PostgreSQL CPU µs/append | failed |"
    );
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    // Per shape, each server's cells.
    let mut measured: Vec<(String, Vec<Vec<Cell>>)> = Vec::new();
    for &layout in &options.layouts {
        for &n in &options.streams {
            let cells = in_turn(&benches, options.rounds, |bench| async move {
                let cell = bench.cell(layout, n, options).await;
                println!("{}", cell.row);
                cell
            })
            .await;
            measured.push((format!("{}, {n}", layout.label()), cells));
        }
    }
    println!();
    let batches = in_turn(&benches, options.rounds, |bench| bench.batched()).await;
    measured.push(("one event, batches of 50".to_owned(), batches));
    if let [first, second] = &benches[..] {
        compared(first, second, &measured);
    }
    for bench in benches {
        bench.stop().await;
    }
}

/// `measure` on each of `benches`, `rounds` times, in turn, the order reversed each round; each
/// server's results in the order they ran.
async fn in_turn<'a, F, Fut>(benches: &'a [Bench], rounds: usize, measure: F) -> Vec<Vec<Cell>>
where
    F: Fn(&'a Bench) -> Fut,
    Fut: std::future::Future<Output = Cell>,
{
    let mut results: Vec<Vec<Cell>> = benches.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds {
        let order = 0..benches.len();
        let order: Vec<usize> = match round % 2 {
            0 => order.collect(),
            _ => order.rev().collect(),
        };
        for i in order {
            results[i].push(measure(&benches[i]).await);
        }
    }
    results
}

/// The second server's figures against the first's, by the means of their rounds.
fn compared(first: &Bench, second: &Bench, measured: &[(String, Vec<Vec<Cell>>)]) {
    fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
        let values: Vec<f64> = values.collect();
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    }
    let change = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if a > 0.0 => format!("{:+.0}%", (b / a - 1.0) * 100.0),
        _ => "–".to_owned(),
    };
    let (a, b) = (&first.name, &second.name);
    println!(
        "\n| shape, streams | {a} appends/s | {b} appends/s | change | {a} PostgreSQL CPU µs/append | {b} | change |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (shape, cells) in measured {
        let rates = |i: usize| mean(cells[i].iter().map(|c| c.appends_per_second));
        let cpu = |i: usize| mean(cells[i].iter().filter_map(|c| c.postgres_micros));
        println!(
            "| {shape} | {} | {} | {} | {} | {} | {} |",
            shown(rates(0)),
            shown(rates(1)),
            change(rates(0), rates(1)),
            shown(cpu(0)),
            shown(cpu(1)),
            change(cpu(0), cpu(1)),
        );
    }
}

/// `n` followers of the benchmark's database beside its server, each on a pool of its own as a
/// replica's would be, started before the server's next heartbeat tells it they are there.
async fn other_processes(server_url: &str, name: &str, n: usize) -> Vec<Arc<Hub>> {
    let (base, _) = server_url.rsplit_once('/').unwrap();
    let mut followers = Vec::new();
    for _ in 0..n {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(3)
            .connect(&format!("{base}/{name}"))
            .await
            .unwrap();
        followers.push(Hub::start(Store::new(pool), 64).await.unwrap());
    }
    // The server learns of other readers at its heartbeat (every 5 s).
    tokio::time::sleep(HubOptions::with_buffer(1).heartbeat_every + Duration::from_secs(1)).await;
    followers
}

#[tokio::main]
async fn main() {
    let options = Options::from_args();
    let token = token::from_args_or_env();
    let token = token.as_deref();
    if options.runs("embedded") {
        let bench = Bench::start("embedded".to_owned(), None, None, token, &options).await;
        run("embedded", vec![bench], &options).await;
    }
    if !options.runs("postgresql") {
        return;
    }
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    match sqlx::PgPool::connect(&url).await {
        Ok(pool) => pool.close().await,
        Err(err) => {
            println!("postgresql: skipped ({err})");
            return;
        }
    }
    // The harness partitions the database when CASEFILE_PARTITION_BY_SESSION says so.
    let partitions = common::partitions_per_table();
    let partitioned = |n: u32| format!("{n} partitions");
    let (title, benches) = match (partitions, options.side_by_side) {
        (Some(n), true) => {
            let plain = Bench::start("plain".to_owned(), Some(url.clone()), None, token, &options);
            let plain = plain.await;
            let split = Bench::start(partitioned(n), Some(url), Some(n), token, &options).await;
            (
                format!("postgresql, plain and partitioned by session into {n}, side by side"),
                vec![plain, split],
            )
        }
        (None, true) => {
            println!(
                "postgresql: --side-by-side compares a partitioned database with a plain one: set CASEFILE_PARTITION_BY_SESSION"
            );
            return;
        }
        (Some(n), false) => (
            format!("postgresql, partitioned by session into {n}"),
            vec![Bench::start(partitioned(n), Some(url), Some(n), token, &options).await],
        ),
        (None, false) => (
            "postgresql".to_owned(),
            vec![Bench::start("plain".to_owned(), Some(url), None, token, &options).await],
        ),
    };
    run(&title, benches, &options).await;
}
