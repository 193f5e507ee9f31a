//! Read benchmark: casefile against PostGraphile 5 on the same PostgreSQL database (and casefile
//! alone on its embedded database). Prints figures; asserts only that both return the same data.
//!
//!     cargo bench --bench read [-- --quick] [--seconds N] [--only QUERY] [--token cf_…]
//!                               [--skip-peer] [--skip-embedded] [--reuse] [--copies N]
//!                               [--payloads demo|padded|both]
//!
//! The data set is the demo multiplied in SQL (~2,000 sessions) on the local PostgreSQL
//! (`DATABASE_URL` names another server's admin database), in two variants measured one after
//! the other: the demo's own payload sizes (database `casefile_read_bench_demo`), where
//! per-request and per-statement costs show, and payloads padded to tens of KB with one session
//! of multi-megabyte payloads (`casefile_read_bench`), where JSON handling dominates. With
//! `CASEFILE_PARTITION_BY_SESSION=N` the databases (`…_pN`) have their distributed tables
//! partitioned by session (docs/scale-out.md).

#[allow(dead_code)] // the calling thread's ticks: the ingest benchmark's
#[path = "../common/cpu.rs"]
mod cpu;
#[path = "../common/http_load.rs"]
mod http_load;
#[path = "../../tests/it/common/process.rs"]
mod process;
#[path = "../common/token.rs"]
mod token;

mod dataset;
mod load;
mod metrics;
mod queries;
mod report;
mod servers;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use load::Client;
use queries::{By, Query};
use report::Row;
use servers::Server;

const DATABASE: &str = "casefile_read_bench";
const PEER_PORT: u16 = 5679;

struct Options {
    token: String,
    seconds: f64,
    warmup: f64,
    quick: bool,
    only: Option<String>,
    skip_peer: bool,
    skip_embedded: bool,
    reuse: bool,
    /// Copies of the demo (8 sessions each) on PostgreSQL, and on the embedded database.
    copies: u32,
    /// The payload variants measured on PostgreSQL, in order.
    payloads: Vec<dataset::Payloads>,
    embedded_copies: u32,
}

impl Options {
    fn parse() -> Options {
        let args: Vec<String> = std::env::args().collect();
        let has = |flag: &str| args.iter().any(|a| a == flag);
        let value = |flag: &str| {
            args.iter()
                .position(|a| a == flag)
                .and_then(|i| args.get(i + 1).cloned())
        };
        let quick = has("--quick");
        let seconds = value("--seconds")
            .map(|s| s.parse().expect("--seconds N"))
            .unwrap_or(if quick { 2.0 } else { 10.0 });
        Options {
            token: token::from_args_or_env().unwrap_or_else(new_token),
            seconds,
            warmup: (seconds / 5.0).clamp(0.5, 2.0),
            quick,
            only: value("--only"),
            skip_peer: has("--skip-peer"),
            skip_embedded: has("--skip-embedded"),
            reuse: has("--reuse"),
            copies: value("--copies").map_or(255, |s| s.parse().expect("--copies N")),
            payloads: match value("--payloads").as_deref() {
                Some("demo") => vec![dataset::Payloads::Demo],
                Some("padded") => vec![dataset::Payloads::Padded],
                None | Some("both") => vec![dataset::Payloads::Demo, dataset::Payloads::Padded],
                Some(other) => panic!("--payloads takes demo, padded or both, not {other}"),
            },
            embedded_copies: if quick { 10 } else { 60 },
        }
    }

    fn queries(&self) -> Vec<&'static Query> {
        let all: Vec<_> = queries::ALL
            .into_iter()
            .filter(|q| self.only.as_deref().is_none_or(|o| o == q.name))
            .collect();
        assert!(!all.is_empty(), "--only takes list, session, debug or deep");
        all
    }
}

/// A fresh admin token for the server under test (it is bootstrapped with it).
fn new_token() -> String {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).expect("random bytes");
    format!("cf_{}", hex::encode(secret))
}

/// Progress, with the time since the start.
fn say(started: Instant, what: impl std::fmt::Display) {
    println!("[{:>6.1} s] {what}", started.elapsed().as_secs_f64());
}

/// Cursors of the first `n` pages of 20 sessions (`null` for the first page).
async fn pages(server: &Server, n: usize) -> anyhow::Result<Vec<Value>> {
    let client = Client::new(server);
    let peer = server.name == "PG5";
    let mut cursors = vec![Value::Null];
    while cursors.len() < n {
        let body = queries::LIST.body(peer, cursors.last().unwrap());
        let answer = client.json(&body).await.map_err(anyhow::Error::msg)?;
        let cursor = &answer["data"]["sessions"]["pageInfo"]["endCursor"];
        if cursor.is_null() {
            break;
        }
        cursors.push(cursor.clone());
    }
    Ok(cursors)
}

/// The requests one server gets for a query, in rotation.
fn bodies(query: &Query, peer: bool, cursors: &[Value], ids: &[Value]) -> Arc<Vec<String>> {
    let args = match query.by {
        By::Page => cursors,
        By::Session => ids,
    };
    Arc::new(args.iter().map(|a| query.body(peer, a)).collect())
}

/// An error unless both servers answer the first few requests of `query` with the same data
/// (returned, not exited on, so that the servers are stopped as they are dropped).
async fn same_data(
    query: &Query,
    ours: &Server,
    peer: &Server,
    cf: &[String],
    pg: &[String],
) -> anyhow::Result<()> {
    let (a, b) = (Client::new(ours), Client::new(peer));
    let mut items = 0;
    for (x, y) in cf.iter().zip(pg).take(3) {
        let x = a.json(x).await.map_err(|e| failed(query, "casefile", &e))?;
        let y = b.json(y).await.map_err(|e| failed(query, "PG5", &e))?;
        let (x, y) = (queries::normal(&x["data"]), queries::normal(&y["data"]));
        if let Some(diff) = queries::difference("data", &x, &y) {
            anyhow::bail!(
                "{}: casefile and PostGraphile 5 return different data: {diff}",
                query.name
            );
        }
        items += queries::items(&x);
    }
    println!(
        "  {}: same data: yes ({items} list items compared)",
        query.name
    );
    Ok(())
}

/// A server's failed answer to `query`, its error cut to 2,000 characters.
fn failed(query: &Query, server: &str, error: &str) -> anyhow::Error {
    let error: String = error.chars().take(2000).collect();
    anyhow::anyhow!("{}: {server} failed: {error}", query.name)
}

/// Measures one cell: warm-up, then `seconds` of load, with CPU and statement counts.
async fn measure(
    options: &Options,
    query: &'static Query,
    clients: usize,
    server: &Server,
    postgres: Option<&metrics::Postgres>,
    requests: Arc<Vec<String>>,
) -> Row {
    load::run(
        server,
        requests.clone(),
        clients,
        Duration::from_secs_f64(options.warmup),
    )
    .await;
    if let Some(pg) = postgres {
        pg.reset().await;
    }
    let pg_before = match postgres {
        Some(pg) => Some(pg.backends().await),
        None => None,
    };
    let cpu_before = cpu::process_ticks(server.pid());
    let run = load::run(
        server,
        requests,
        clients,
        Duration::from_secs_f64(options.seconds),
    )
    .await;
    let cpu = cpu::process_ticks(server.pid()).saturating_sub(cpu_before);
    let per = |total: f64| total / run.ok().max(1) as f64;
    let (pg_cpu_ms, statements) = match (postgres, pg_before) {
        (Some(pg), Some(before)) => {
            let ticks = pg.backends().await.since(&before);
            let statements = match pg.statements().await {
                Some(n) => Ok(per(n as f64)),
                None => Err("n/a".to_owned()),
            };
            (Some(per(cpu::ticks_ms(ticks))), statements)
        }
        _ => (None, Err("–".to_owned())),
    };
    if run.failures > 0 {
        println!(
            "  !! {} {} at {clients} clients: {} FAILED requests, first: {}",
            server.name,
            query.name,
            run.failures,
            run.first_failure
                .as_deref()
                .unwrap_or("?")
                .chars()
                .take(500)
                .collect::<String>()
        );
    }
    Row {
        query: query.name,
        clients,
        server: server.name,
        p50: run.percentile_ms(0.5),
        p99: run.percentile_ms(0.99),
        rps: run.per_second(),
        failures: run.failures,
        server_cpu_ms: per(cpu::ticks_ms(cpu)),
        pg_cpu_ms,
        statements,
        bytes: run.mean_bytes(),
    }
}

/// Both servers on the bench database of a payload variant: equivalence, the table, then (with
/// padded payloads) memory on the big session.
async fn external(
    options: &Options,
    started: Instant,
    payloads: dataset::Payloads,
) -> anyhow::Result<()> {
    let admin = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    let database = match payloads {
        dataset::Payloads::Padded => DATABASE.to_owned(),
        dataset::Payloads::Demo => format!("{DATABASE}_demo"),
    };
    // A partitioned layout is a database of its own (`--reuse` never mixes the two).
    let database = match dataset::partitions()? {
        Some(n) => format!("{database}_p{n}"),
        None => database,
    };
    say(
        started,
        format!(
            "building database {database} (demo × {} copies, {})",
            options.copies,
            payloads.name()
        ),
    );
    let url = dataset::external(&admin, &database, options.copies, options.reuse, payloads).await?;
    let postgres = metrics::Postgres::connect(&url, &database).await?;
    say(
        started,
        format!("data set: {}", dataset::volume(postgres.pool()).await?),
    );
    let big = dataset::big_session(postgres.pool()).await?;
    let rotation =
        dataset::rotation(postgres.pool(), if options.quick { 50 } else { 200 }, big).await?;
    let ids: Vec<Value> = rotation
        .iter()
        .map(|id| Value::String(id.to_string()))
        .collect();

    say(started, "starting casefile");
    let ours = Server::casefile("casefile", ["--database-url", &url], &options.token);
    let peer = if options.skip_peer {
        None
    } else {
        say(
            started,
            "starting PostGraphile 5 (installs itself on first use)",
        );
        Some(Server::postgraphile(&url, PEER_PORT).await?)
    };
    say(started, "collecting page cursors");
    let page_count = if options.quick { 10 } else { 40 };
    let cf_pages = pages(&ours, page_count).await?;
    let pg_pages = match &peer {
        Some(p) => pages(p, page_count).await?,
        None => Vec::new(),
    };

    let mut rows = Vec::new();
    for query in options.queries() {
        let cf = bodies(query, false, &cf_pages, &ids);
        let pg = bodies(query, true, &pg_pages, &ids);
        match &peer {
            Some(p) => same_data(query, &ours, p, &cf, &pg).await?,
            None => {
                Client::new(&ours)
                    .json(&cf[0])
                    .await
                    .map_err(|e| failed(query, "casefile", &e))?;
            }
        }
        for clients in [1, 8] {
            say(started, format!("{} at {clients} clients", query.name));
            rows.push(measure(options, query, clients, &ours, Some(&postgres), cf.clone()).await);
            if let Some(p) = &peer {
                rows.push(measure(options, query, clients, p, Some(&postgres), pg.clone()).await);
            }
        }
    }
    say(
        started,
        format!(
            "PostgreSQL, casefile vs PostGraphile 5, {}:",
            payloads.name()
        ),
    );
    report::print(&rows);
    if let Some(why) = &postgres.statements_unavailable {
        println!("statements/req: {why}\n");
    }
    drop(ours);
    if payloads == dataset::Payloads::Demo {
        return Ok(());
    }

    // Peak memory: a fresh casefile serving the debug tab of the multi-megabyte session.
    say(
        started,
        format!("memory: debug tab of session {big} (multi-megabyte payloads) at 8 clients"),
    );
    let ours = Server::casefile("casefile", ["--database-url", &url], &options.token);
    let mut servers = vec![&ours];
    servers.extend(&peer);
    for server in servers {
        let body = Arc::new(vec![
            queries::DEBUG.body(server.name == "PG5", &Value::String(big.to_string())),
        ]);
        let before = process::status_kib(server.pid(), "VmHWM");
        let run = load::run(server, body, 8, Duration::from_secs_f64(options.seconds)).await;
        println!(
            "  {}: peak RSS (VmHWM) {:.1} MiB (before this load {:.1} MiB{}), response {:.1} MB, p50 {:.0} ms, {} requests, {} failed{}",
            server.name,
            process::status_kib(server.pid(), "VmHWM") as f64 / 1024.0,
            before as f64 / 1024.0,
            if server.name == "PG5" {
                ", after the table's runs"
            } else {
                ", fresh process"
            },
            run.mean_bytes() as f64 / 1e6,
            run.percentile_ms(0.5),
            run.ok(),
            run.failures,
            run.first_failure
                .map(|f| format!(" (first: {})", f.chars().take(300).collect::<String>()))
                .unwrap_or_default()
        );
    }
    Ok(())
}

/// casefile alone on its embedded database (PostGraphile cannot use it: one connection, in-process).
async fn embedded(options: &Options, started: Instant) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("casefile-read-bench-{}", std::process::id()));
    say(
        started,
        format!(
            "building the embedded database in {} (demo × {} copies; pglite builds slowly, so smaller)",
            dir.display(),
            options.embedded_copies
        ),
    );
    let volume = dataset::embedded(&dir, options.embedded_copies).await?;
    say(started, format!("embedded data set: {volume}"));
    let dir_arg = dir.to_string_lossy().into_owned();
    let ours = Server::casefile(
        "casefile (embedded)",
        ["--data-dir", &dir_arg],
        &options.token,
    );
    let cursors = pages(&ours, if options.quick { 5 } else { 10 }).await?;
    // Session ids from the list itself (the database belongs to the server now).
    let client = Client::new(&ours);
    let mut ids = Vec::new();
    for cursor in &cursors {
        let page = client
            .json(&queries::LIST.body(false, cursor))
            .await
            .map_err(anyhow::Error::msg)?;
        for edge in page["data"]["sessions"]["edges"]
            .as_array()
            .into_iter()
            .flatten()
        {
            ids.push(edge["node"]["uuid"].clone());
        }
    }
    let mut rows = Vec::new();
    for query in options.queries() {
        let requests = bodies(query, false, &cursors, &ids);
        client
            .json(&requests[0])
            .await
            .map_err(|e| failed(query, "casefile (embedded)", &e))?;
        for clients in [1, 8] {
            say(
                started,
                format!("embedded: {} at {clients} clients", query.name),
            );
            rows.push(measure(options, query, clients, &ours, None, requests.clone()).await);
        }
    }
    say(
        started,
        "embedded database, casefile alone (server CPU includes the database):",
    );
    report::print(&rows);
    drop(ours);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[tokio::main]
async fn main() {
    let options = Options::parse();
    let started = Instant::now();
    say(
        started,
        format!(
            "read benchmark: {} s per cell after {} s of warm-up, 1 and 8 clients{}",
            options.seconds,
            options.warmup,
            if options.quick { " (quick)" } else { "" }
        ),
    );
    for payloads in &options.payloads {
        if let Err(err) = external(&options, started, *payloads).await {
            println!("PostgreSQL, {}: not measured: {err:#}", payloads.name());
        }
    }
    if !options.skip_embedded
        && let Err(err) = embedded(&options, started).await
    {
        println!("embedded: not measured: {err:#}");
    }
    say(started, "done");
}
