//! Faults: the server killed mid-stream, PostgreSQL restarted under a running server.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::Connection as _;
use uuid::Uuid;

use crate::common::served::Served;
use crate::common::ws::Subscription;
use crate::common::{LISTEN_CONNECTIONS, TestDb};

/// POSTs a GraphQL request; `None` when no answer came (connection refused or cut, timeout).
async fn post(
    client: &reqwest::Client,
    addr: SocketAddr,
    query: &str,
    vars: &Value,
) -> Option<Value> {
    let response = client
        .post(format!("http://{addr}/graphql"))
        .json(&json!({ "query": query, "variables": vars }))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .ok()?;
    response.json().await.ok()
}

fn code(body: &Value) -> &str {
    body["errors"][0]["extensions"]["code"]
        .as_str()
        .unwrap_or_default()
}

/// Sends a request to whichever server is current until one answers it; any answer but success
/// (or "the database is unreachable, retry") fails the test. Returns how many tries it took.
async fn until_answered(
    client: &reqwest::Client,
    addr: &tokio::sync::watch::Receiver<SocketAddr>,
    query: &str,
    vars: &Value,
) -> (Value, usize) {
    let started = Instant::now();
    let mut tries = 0;
    loop {
        tries += 1;
        let current = *addr.borrow();
        match post(client, current, query, vars).await {
            Some(body) if body.get("errors").is_none() => return (body["data"].clone(), tries),
            Some(body) if code(&body) == "SERVICE_UNAVAILABLE" => {}
            Some(body) => panic!("refused on try {tries}: {body:#}\n{query}\n{vars}"),
            None => {}
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no answer within 60 s: {query}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const CREATE_SESSION: &str = "mutation ($id: UUID!) { createSession(input: { id: $id, alertType: \"OOMKilled\", chainId: \"k8s\" }) { uuid } }";
const CREATE_STAGE: &str = "mutation ($id: UUID!, $s: ID!) { createStage(input: { id: $id, sessionId: $s, stageIndex: 0, name: \"Triage\" }) { uuid } }";
const CREATE_EXECUTION: &str = "mutation ($id: UUID!, $s: ID!) { createAgentExecution(input: { id: $id, stageId: $s, agentIndex: 1, agentName: \"KubernetesAgent\", iterationStrategy: \"react\" }) { uuid } }";
const CREATE_EVENT: &str = "mutation ($id: UUID!, $e: ID!) { createTimelineEvent(input: { id: $id, executionId: $e, eventType: LLM_RESPONSE, status: STREAMING }) { uuid } }";
const APPEND: &str = "mutation ($e: ID!, $o: Int!, $d: String!) { appendTimelineContent(input: { eventId: $e, offset: $o, delta: $d }) { end } }";
const INGEST: &str =
    "mutation ($ops: [IngestOperation!]!) { ingest(operations: $ops) { __typename } }";
const FINISH: &str = "mutation ($id: ID!, $c: String) { finishTimelineEvent(input: { eventId: $id, status: COMPLETED, content: $c }) { status } }";
const CONTENT: &str = "query ($id: ID!) { session(id: $id) { stages { executions { timeline { edges { node { uuid status content } } } } } } }";

/// Where `casefile serve` keeps its data in a test: an embedded data directory, or a database
/// of the external PostgreSQL.
enum Storage {
    Embedded(PathBuf),
    External(Box<TestDb>, String),
}

impl Storage {
    fn args(&self) -> Vec<String> {
        match self {
            Storage::Embedded(dir) => vec!["--data-dir".into(), dir.display().to_string()],
            Storage::External(_, url) => vec!["--database-url".into(), url.clone()],
        }
    }

    async fn remove(self) {
        match self {
            Storage::Embedded(dir) => std::fs::remove_dir_all(dir).unwrap(),
            Storage::External(db, _) => db.stop().await,
        }
    }
}

/// Runs `check` on an embedded data directory, then on a fresh database of the external
/// PostgreSQL when there is one (saying so when there is not).
async fn on_both_databases<F: Future<Output = ()>>(check: impl Fn(Storage) -> F) {
    let dir = std::env::temp_dir().join(format!("casefile-faults-{}", Uuid::new_v4()));
    check(Storage::Embedded(dir)).await;
    match std::env::var("DATABASE_URL") {
        Ok(url) if !url.is_empty() => {
            let db = TestDb::start().await;
            let url = db.url().expect("an external database has a URL");
            check(Storage::External(Box::new(db), url)).await;
        }
        _ => {
            eprintln!("the external-database half of this test is skipped: DATABASE_URL is not set")
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_retrying_through_a_sigkill_stores_exactly_what_it_meant() {
    on_both_databases(writer_survives_sigkill).await;
}

async fn writer_survives_sigkill(storage: Storage) {
    let mut server = Served::start(storage.args()).await;
    let (addr_tx, addr_rx) = tokio::sync::watch::channel(server.addr);

    // 240 pieces: ingest batches of 4 appends alternating with single appends.
    let pieces: Vec<String> = (0..240)
        .map(|i| format!("piece {i:03} ✓ of the reasoning; "))
        .collect();
    let intended = pieces.concat();
    let (session, stage, execution, event) = (
        Uuid::now_v7(),
        Uuid::now_v7(),
        Uuid::now_v7(),
        Uuid::now_v7(),
    );
    let mut requests: Vec<(&str, Value)> = vec![
        (CREATE_SESSION, json!({ "id": session })),
        (CREATE_STAGE, json!({ "id": stage, "s": session })),
        (CREATE_EXECUTION, json!({ "id": execution, "s": stage })),
        (CREATE_EVENT, json!({ "id": event, "e": execution })),
    ];
    let mut offset = 0;
    let mut rest = pieces.as_slice();
    while !rest.is_empty() {
        let batch = &rest[..rest.len().min(4)];
        let ops: Vec<Value> = batch
            .iter()
            .map(|piece| {
                let op = json!({ "appendTimelineContent": { "eventId": event, "offset": offset, "delta": piece } });
                offset += piece.chars().count();
                op
            })
            .collect();
        requests.push((INGEST, json!({ "ops": ops })));
        rest = &rest[batch.len()..];
        if let Some((piece, tail)) = rest.split_first() {
            requests.push((APPEND, json!({ "e": event, "o": offset, "d": piece })));
            offset += piece.chars().count();
            rest = tail;
        }
    }
    let total = requests.len();

    let done = Arc::new(AtomicUsize::new(0));
    let writer = tokio::spawn({
        let done = done.clone();
        async move {
            let client = reqwest::Client::new();
            let mut retried = 0;
            for (query, vars) in &requests {
                let (_, tries) = until_answered(&client, &addr_rx, query, vars).await;
                retried += tries - 1;
                done.fetch_add(1, Ordering::SeqCst);
            }
            retried
        }
    });

    // Mid-stream: some appends answered, most still to send.
    let deadline = Instant::now() + Duration::from_secs(30);
    while done.load(Ordering::SeqCst) < 20 {
        assert!(Instant::now() < deadline, "the writer made no progress");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server.kill();
    let killed_at = done.load(Ordering::SeqCst);
    assert!(killed_at < total, "the writer finished before the kill");
    let server = Served::start(storage.args()).await;
    addr_tx.send(server.addr).unwrap();

    let retried = tokio::time::timeout(Duration::from_secs(60), writer)
        .await
        .expect("the writer finishes")
        .unwrap();
    assert!(
        retried >= 1,
        "no request had to be retried: the kill missed the stream"
    );

    let client = reqwest::Client::new();
    let (_, rx) = tokio::sync::watch::channel(server.addr);
    let (data, _) = until_answered(&client, &rx, FINISH, &json!({ "id": event, "c": null })).await;
    assert_eq!(data["finishTimelineEvent"]["status"], "COMPLETED");
    let (data, _) = until_answered(&client, &rx, CONTENT, &json!({ "id": session })).await;
    let events = &data["session"]["stages"][0]["executions"][0]["timeline"]["edges"];
    assert_eq!(events.as_array().map(Vec::len), Some(1), "{data:#}");
    assert_eq!(events[0]["node"]["uuid"], json!(event));
    let content = events[0]["node"]["content"].as_str().unwrap();
    assert_eq!(
        content.len(),
        intended.len(),
        "killed after {killed_at} of {total} requests"
    );
    assert_eq!(content, intended);
    drop(server);
    storage.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_streams_retrying_through_a_sigkill_store_each_append_once() {
    on_both_databases(streams_survive_sigkill).await;
}

const EVENTS_PAGE: &str = "query ($id: ID!, $after: String) { session(id: $id) { eventsConnection(first: 100, after: $after) { edges { node { sequence firstSequence category action } } pageInfo { hasNextPage endCursor } } } }";
const CREATE_PARALLEL_STAGE: &str = "mutation ($id: UUID!, $s: ID!) { createStage(input: { id: $id, sessionId: $s, stageIndex: 0, name: \"Triage\", expectedAgentCount: 4, parallelType: MULTI_AGENT, successPolicy: ALL }) { uuid } }";
const CREATE_AGENT: &str = "mutation ($id: UUID!, $s: ID!, $i: Int!) { createAgentExecution(input: { id: $id, stageId: $s, agentIndex: $i, agentName: \"Agent\", iterationStrategy: \"react\" }) { uuid } }";

/// Streams appending at once (4 agents of one session, and 4 sessions of one agent each), single
/// appends only, so they are stored in groups; the server is killed mid-stream and each writer
/// resends what was not answered. Every event holds exactly its text, and every session's log
/// one position per append, without gaps.
async fn streams_survive_sigkill(storage: Storage) {
    let mut server = Served::start(storage.args()).await;
    let (addr_tx, addr_rx) = tokio::sync::watch::channel(server.addr);
    let client = reqwest::Client::new();
    let shared = Uuid::now_v7();
    let mut setup: Vec<(&str, Value)> = vec![(CREATE_SESSION, json!({ "id": shared }))];
    let shared_stage = Uuid::now_v7();
    setup.push((
        CREATE_PARALLEL_STAGE,
        json!({ "id": shared_stage, "s": shared }),
    ));
    // (session, event) per stream.
    let mut streams = Vec::new();
    for agent in 1..=4 {
        let (execution, event) = (Uuid::now_v7(), Uuid::now_v7());
        setup.push((
            CREATE_AGENT,
            json!({ "id": execution, "s": shared_stage, "i": agent }),
        ));
        setup.push((CREATE_EVENT, json!({ "id": event, "e": execution })));
        streams.push((shared, event));
    }
    for _ in 0..4 {
        let (session, stage, execution, event) = (
            Uuid::now_v7(),
            Uuid::now_v7(),
            Uuid::now_v7(),
            Uuid::now_v7(),
        );
        setup.push((CREATE_SESSION, json!({ "id": session })));
        setup.push((CREATE_STAGE, json!({ "id": stage, "s": session })));
        setup.push((CREATE_EXECUTION, json!({ "id": execution, "s": stage })));
        setup.push((CREATE_EVENT, json!({ "id": event, "e": execution })));
        streams.push((session, event));
    }
    for (query, vars) in &setup {
        until_answered(&client, &addr_rx, query, vars).await;
    }

    const PIECES: usize = 60;
    let texts: Vec<Vec<String>> = (0..streams.len())
        .map(|s| {
            (0..PIECES)
                .map(|i| format!("s{s} piece {i:02} ✓; "))
                .collect()
        })
        .collect();
    let done = Arc::new(AtomicUsize::new(0));
    let retried = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = streams
        .iter()
        .zip(&texts)
        .map(|((_, event), pieces)| {
            let (event, pieces) = (*event, pieces.clone());
            let (done, retried, addr_rx) = (done.clone(), retried.clone(), addr_rx.clone());
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                let mut offset = 0;
                for piece in &pieces {
                    let vars = json!({ "e": event, "o": offset, "d": piece });
                    let (_, tries) = until_answered(&client, &addr_rx, APPEND, &vars).await;
                    retried.fetch_add(tries - 1, Ordering::SeqCst);
                    done.fetch_add(1, Ordering::SeqCst);
                    offset += piece.chars().count();
                }
            })
        })
        .collect();

    let total = streams.len() * PIECES;
    let deadline = Instant::now() + Duration::from_secs(30);
    while done.load(Ordering::SeqCst) < total / 4 {
        assert!(Instant::now() < deadline, "the writers made no progress");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server.kill();
    let killed_at = done.load(Ordering::SeqCst);
    assert!(killed_at < total, "the writers finished before the kill");
    let server = Served::start(storage.args()).await;
    addr_tx.send(server.addr).unwrap();
    for writer in writers {
        tokio::time::timeout(Duration::from_secs(60), writer)
            .await
            .expect("the writer finishes")
            .unwrap();
    }
    assert!(
        retried.load(Ordering::SeqCst) >= 1,
        "no append had to be resent: the kill missed the streams"
    );

    let (_, rx) = tokio::sync::watch::channel(server.addr);
    for ((session, event), pieces) in streams.iter().zip(&texts) {
        let (data, _) = until_answered(&client, &rx, CONTENT, &json!({ "id": session })).await;
        let content = data["session"]["stages"][0]["executions"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|e| e["timeline"]["edges"].as_array().unwrap().clone())
            .find(|edge| edge["node"]["uuid"] == json!(event))
            .unwrap()["node"]["content"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(
            content,
            pieces.concat(),
            "killed after {killed_at} of {total} appends"
        );
    }
    for session in [shared, streams[4].0] {
        let per_session = streams.iter().filter(|(s, _)| *s == session).count() * PIECES;
        let (mut sequences, mut appends, mut after) = (Vec::new(), 0, Value::Null);
        loop {
            let (data, _) = until_answered(
                &client,
                &rx,
                EVENTS_PAGE,
                &json!({ "id": session, "after": after }),
            )
            .await;
            let page = &data["session"]["eventsConnection"];
            for edge in page["edges"].as_array().unwrap() {
                let node = &edge["node"];
                assert_eq!(
                    node["sequence"], node["firstSequence"],
                    "a page is one position per event"
                );
                sequences.push(node["sequence"].as_i64().unwrap());
                appends += usize::from(node["category"] == "LLM" && node["action"] == "STREAM");
            }
            if page["pageInfo"]["hasNextPage"] != json!(true) {
                break;
            }
            after = page["pageInfo"]["endCursor"].clone();
        }
        let expected: Vec<i64> = (1..=sequences.len() as i64).collect();
        assert_eq!(sequences, expected, "positions with gaps or repeats");
        assert_eq!(
            appends, per_session,
            "appends stored more or less than once"
        );
    }
    drop(server);
    storage.remove().await;
}

/// A private PostgreSQL cluster, run as the `postgres` OS user (PostgreSQL refuses root).
struct Cluster {
    dir: PathBuf,
    port: u16,
}

const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

impl Cluster {
    /// Creates and starts one, or says why it cannot.
    fn start() -> Result<Cluster, String> {
        if !Path::new(PG_BIN).join("initdb").exists() {
            return Err(format!("no initdb in {PG_BIN}"));
        }
        let dir = std::env::temp_dir().join(format!("casefile-pg-{}", Uuid::new_v4().simple()));
        std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let cluster = Cluster {
            dir,
            port: free_port(),
        };
        if is_root() {
            // The cluster's files must belong to the user that runs it.
            let owned = Command::new("chown")
                .args(["postgres:postgres", &cluster.dir.display().to_string()])
                .status()
                .map_err(|e| format!("cannot run chown: {e}"))?;
            if !owned.success() {
                return Err("cannot give the data directory to the `postgres` user".into());
            }
        }
        cluster.pg(&format!(
            "initdb -D {dir}/data -U postgres -A trust --no-sync >{dir}/initdb.log 2>&1",
            dir = cluster.dir.display()
        ))?;
        cluster.up()?;
        Ok(cluster)
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn up(&self) -> Result<(), String> {
        self.pg(&format!(
            "pg_ctl -D {dir}/data -l {dir}/server.log -w -t 30 -o '-p {port} -k {dir} -c listen_addresses=127.0.0.1 -c fsync=off' start >/dev/null",
            dir = self.dir.display(),
            port = self.port
        ))
    }

    fn down(&self, mode: &str) -> Result<(), String> {
        self.pg(&format!(
            "pg_ctl -D {}/data -m {mode} -w -t 30 stop >/dev/null",
            self.dir.display()
        ))
    }

    /// Runs a PostgreSQL program as the `postgres` user when we are root.
    fn pg(&self, command: &str) -> Result<(), String> {
        let command = format!("{PG_BIN}/{command}");
        let output = if is_root() {
            Command::new("runuser")
                .args(["-u", "postgres", "--", "sh", "-c", &command])
                .output()
        } else {
            Command::new("sh").args(["-c", &command]).output()
        };
        match output {
            Ok(o) if o.status.success() => Ok(()),
            Ok(o) => Err(format!(
                "`{command}` failed ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr)
            )),
            Err(e) => Err(format!("cannot run `{command}`: {e}")),
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.down("immediate");
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

const TIMELINE: &str = "subscription ($s: ID!, $after: String) { timeline(sessionId: $s, after: $after) { kind eventId offset delta cursor } }";

/// What a subscriber saw, per event uuid: CREATED count, content from deltas, FINISHED count.
#[derive(Default)]
struct Seen {
    events: std::collections::BTreeMap<String, (usize, String, usize)>,
    cursor: Option<String>,
    resumed: usize,
}

impl Seen {
    fn take(&mut self, update: &Value) {
        let update = &update["timeline"];
        let event = casefile::api::ids::decode_as(
            casefile::api::ids::NodeType::TimelineEvent,
            update["eventId"].as_str().unwrap(),
        )
        .unwrap()
        .to_string();
        let entry = self.events.entry(event).or_default();
        match update["kind"].as_str().unwrap() {
            "CREATED" => entry.0 += 1,
            "APPENDED" => {
                assert_eq!(
                    update["offset"].as_u64().unwrap() as usize,
                    entry.1.chars().count(),
                    "a delta out of place (duplicated or lost): {update}"
                );
                entry.1.push_str(update["delta"].as_str().unwrap());
            }
            "FINISHED" => entry.2 += 1,
            other => panic!("unexpected kind {other}"),
        }
        self.cursor = update["cursor"].as_str().map(str::to_owned);
    }

    fn finished(&self) -> usize {
        self.events.values().filter(|e| e.2 > 0).count()
    }
}

/// Reads until `want` events have finished; when the stream ends, resumes from the last cursor
/// on a new connection.
async fn read_until(
    sub: &mut Subscription,
    seen: &mut Seen,
    addr: SocketAddr,
    session: Uuid,
    want: usize,
) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.finished() < want {
        assert!(
            Instant::now() < deadline,
            "only {} of {want} events arrived",
            seen.finished()
        );
        match sub.next().await {
            Ok(data) => seen.take(&data),
            Err(ended) => {
                eprintln!("the subscription ended ({ended}); resuming from its cursor");
                seen.resumed += 1;
                *sub = Subscription::start(
                    addr,
                    false,
                    json!({}),
                    TIMELINE,
                    json!({ "s": session, "after": seen.cursor }),
                )
                .await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgresql_restarted_under_a_running_server() {
    let cluster = match tokio::task::spawn_blocking(Cluster::start).await.unwrap() {
        Ok(cluster) => cluster,
        Err(why) => {
            eprintln!("skipped: a private PostgreSQL cluster cannot be started here: {why}");
            return;
        }
    };
    let url = cluster.url();
    let server = Served::start(vec!["--database-url".into(), url.clone()]).await;
    let client = reqwest::Client::new();
    let (_, addr) = tokio::sync::watch::channel(server.addr);
    let (session, stage, execution) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
    for (query, vars) in [
        (CREATE_SESSION, json!({ "id": session })),
        (CREATE_STAGE, json!({ "id": stage, "s": session })),
        (CREATE_EXECUTION, json!({ "id": execution, "s": stage })),
    ] {
        until_answered(&client, &addr, query, &vars).await;
    }
    let mut sub = Subscription::start(
        server.addr,
        false,
        json!({}),
        TIMELINE,
        json!({ "s": session }),
    )
    .await;
    let mut seen = Seen::default();
    let write = |i: usize| {
        let (client, addr) = (client.clone(), addr.clone());
        async move {
            let event = Uuid::now_v7();
            let text = format!("event {i}");
            until_answered(
                &client,
                &addr,
                CREATE_EVENT,
                &json!({ "id": event, "e": execution }),
            )
            .await;
            until_answered(
                &client,
                &addr,
                APPEND,
                &json!({ "e": event, "o": 0, "d": text }),
            )
            .await;
            until_answered(&client, &addr, FINISH, &json!({ "id": event, "c": null })).await;
            (event.to_string(), text)
        }
    };
    let mut written = Vec::new();
    for i in 0..3 {
        written.push(write(i).await);
    }
    read_until(&mut sub, &mut seen, server.addr, session, 3).await;

    // The outage.
    cluster.down("fast").expect("PostgreSQL stops");
    let ready = client
        .get(format!("http://{}/readyz", server.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 503, "/readyz during the outage");
    // A query, as plain JSON: 200, a field error with a retryable code, soon.
    let started = Instant::now();
    let body = post(&client, server.addr, CONTENT, &json!({ "id": session }))
        .await
        .expect("an answer");
    assert_eq!(code(&body), "SERVICE_UNAVAILABLE", "{body:#}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    // A mutation, as application/graphql-response+json: no data, so 503.
    let started = Instant::now();
    let response = client
        .post(format!("http://{}/graphql", server.addr))
        .header("accept", "application/graphql-response+json")
        .json(&json!({ "query": CREATE_EVENT, "variables": { "id": Uuid::now_v7(), "e": execution } }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    let body: Value = response.json().await.unwrap();
    assert_eq!(code(&body), "SERVICE_UNAVAILABLE", "{body:#}");
    assert!(body["data"].is_null(), "{body:#}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );

    // Back: ready again without a restart of casefile.
    cluster.up().expect("PostgreSQL starts again");
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let ready = client
            .get(format!("http://{}/readyz", server.addr))
            .send()
            .await
            .unwrap();
        if ready.status() == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "/readyz still {} after the restart",
            ready.status()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The LISTEN connection is back (delivery also polls, so an arriving update alone would
    // not show it).
    let mut conn = sqlx::postgres::PgConnection::connect(&url).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let listening: i64 = sqlx::query_scalar(&format!(
            "SELECT count(*) FROM pg_stat_activity WHERE {LISTEN_CONNECTIONS}"
        ))
        .fetch_one(&mut conn)
        .await
        .unwrap();
        if listening >= 1 {
            break;
        }
        assert!(Instant::now() < deadline, "casefile does not LISTEN again");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    conn.close().await.unwrap();

    for i in 3..6 {
        written.push(write(i).await);
    }
    read_until(&mut sub, &mut seen, server.addr, session, 6).await;
    assert_eq!(
        seen.events.len(),
        6,
        "events seen: {:?}",
        seen.events.keys()
    );
    for (event, text) in &written {
        let (created, content, finished) = seen.events.get(event).expect("every event arrives");
        assert_eq!(
            (*created, content.as_str(), *finished),
            (1, text.as_str(), 1),
            "{event}"
        );
    }
    eprintln!("the subscriber resumed {} time(s)", seen.resumed);
    sub.disconnect().await;
    drop(server);
    drop(cluster);
}
