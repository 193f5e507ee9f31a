//! Live timeline subscriptions over real WebSocket connections.

use casefile::live::{Change, Hub, HubOptions};
use serde_json::{Value, json};

use crate::common::TestApp;
use crate::common::sse::SseSubscription;
use crate::common::ws::Subscription;
use crate::write_api::Agent;

const TIMELINE: &str =
    "subscription ($s: ID!, $after: String) { timeline(sessionId: $s, after: $after) {
    kind sequenceNumber offset delta cursor event { uuid status content } } }";

/// A subscription over any transport.
enum Transport {
    Ws(Box<Subscription>),
    Sse(SseSubscription),
}

impl Transport {
    fn ws(subscription: Subscription) -> Transport {
        Transport::Ws(Box::new(subscription))
    }

    async fn next(&mut self) -> Result<Value, Value> {
        match self {
            Transport::Ws(s) => s.next().await,
            Transport::Sse(s) => s.next().await,
        }
    }

    async fn disconnect(self) {
        match self {
            Transport::Ws(s) => s.disconnect().await,
            Transport::Sse(s) => drop(s),
        }
    }
}

/// The text the writer streams: token-sized pieces.
fn pieces(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("tok{i} ")).collect()
}

async fn running_execution(a: &Agent<'_>) -> (String, String) {
    let session = a.session().await;
    let stage = a.stage(&session, 0, 1, None).await;
    let exec = a.execution(&stage, 1, "Agent").await;
    (session, exec)
}

/// Streams `pieces` into a new event and finishes it.
async fn write_stream(
    a: &Agent<'_>,
    exec: &str,
    pieces: &[String],
    pause: std::time::Duration,
) -> String {
    let (event, _) = a.event(exec, "STREAMING").await;
    let mut offset = 0;
    for piece in pieces {
        let r = a.append(&event, offset, piece).await;
        assert!(r.get("errors").is_none(), "{r}");
        offset += piece.chars().count() as i64;
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
    }
    a.ok("mutation ($id: ID!) { finishTimelineEvent(input: { eventId: $id, status: COMPLETED }) { status } }", json!({ "id": event })).await;
    event
}

/// Reads updates until the event finishes; returns (kinds, concatenated deltas).
async fn read_until_finished(sub: &mut Transport) -> (Vec<String>, String, Value) {
    let mut kinds = Vec::new();
    let mut text = String::new();
    loop {
        let update = sub.next().await.expect("an update")["timeline"].clone();
        kinds.push(update["kind"].as_str().unwrap().to_owned());
        if let Some(delta) = update["delta"].as_str() {
            assert_eq!(
                update["offset"].as_i64().unwrap(),
                text.chars().count() as i64,
                "deltas are contiguous"
            );
            text.push_str(delta);
        }
        if update["kind"] == "FINISHED" {
            return (kinds, text, update);
        }
    }
}

#[tokio::test]
async fn subscribers_on_every_transport_receive_exactly_the_writers_content() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let (session, exec) = running_execution(&a).await;
    let mut modern = Transport::ws(
        Subscription::start(
            app.addr,
            false,
            json!({ "token": "t" }),
            TIMELINE,
            json!({ "s": session }),
        )
        .await,
    );
    let mut legacy = Transport::ws(
        Subscription::start(app.addr, true, json!({}), TIMELINE, json!({ "s": session })).await,
    );
    let mut sse =
        Transport::Sse(SseSubscription::start(app.addr, TIMELINE, json!({ "s": session })).await);
    let pieces = pieces(150);
    let expected: String = pieces.concat();
    write_stream(&a, &exec, &pieces, std::time::Duration::ZERO).await;
    for sub in [&mut modern, &mut legacy, &mut sse] {
        let (kinds, text, finished) = read_until_finished(sub).await;
        assert_eq!(kinds.first().map(String::as_str), Some("CREATED"));
        assert_eq!(text, expected);
        assert_eq!(finished["event"]["content"], expected.as_str());
        assert_eq!(finished["event"]["status"], "COMPLETED");
    }
    modern.disconnect().await;
    legacy.disconnect().await;
    sse.disconnect().await;
    app.stop().await;
}

#[tokio::test]
async fn reconnecting_with_the_last_cursor_loses_and_repeats_nothing() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let (session, exec) = running_execution(&a).await;
    let pieces = pieces(300);
    let expected: String = pieces.concat();
    let writer = write_stream(&a, &exec, &pieces, std::time::Duration::from_millis(2));
    let reader = async {
        let mut cursor = Value::Null;
        let mut text = String::new();
        let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut reconnects = 0;
        loop {
            let mut sub = Subscription::start(
                app.addr,
                reconnects % 2 == 1,
                json!({}),
                TIMELINE,
                json!({ "s": session, "after": cursor }),
            )
            .await;
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            // Few updates per connection: deltas arrive coalesced, so there are not many.
            let take = 1 + (rng % 4) as usize;
            for _ in 0..take {
                let update = sub.next().await.expect("an update")["timeline"].clone();
                if let Some(delta) = update["delta"].as_str() {
                    assert_eq!(
                        update["offset"].as_i64().unwrap(),
                        text.chars().count() as i64
                    );
                    text.push_str(delta);
                }
                cursor = update["cursor"].clone();
                if update["kind"] == "FINISHED" {
                    sub.disconnect().await;
                    return (text, reconnects);
                }
            }
            sub.disconnect().await;
            reconnects += 1;
        }
    };
    let (_, (text, reconnects)) = tokio::join!(writer, reader);
    assert!(
        reconnects >= 3,
        "the stream was interrupted {reconnects} times"
    );
    assert_eq!(text, expected);
    app.stop().await;
}

#[tokio::test]
async fn session_changes_and_the_dashboard_feed_follow_the_work() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let session = a.session().await;
    let mut feed = Subscription::start(
        app.addr,
        true,
        json!({}),
        "subscription { sessions(status: [IN_PROGRESS, COMPLETED]) { status session { uuid } } }",
        json!({}),
    )
    .await;
    let mut changes = Subscription::start(
        app.addr,
        false,
        json!({}),
        "subscription ($s: ID!) { session(id: $s) { kind id session { status } stage { status }
           execution { agentName status } message { role } llmInteraction { modelName } } }",
        json!({ "s": session }),
    )
    .await;
    // The first message is the session as it is: from here on, nothing is missed.
    let first = changes.next().await.expect("the current session")["session"].clone();
    assert_eq!(
        (first["kind"].as_str(), first["session"]["status"].as_str()),
        (Some("SESSION"), Some("PENDING"))
    );
    let stage = a.stage(&session, 0, 1, None).await;
    let exec = a.execution(&stage, 1, "KubernetesAgent").await;
    a.ok("mutation ($e: ID!) { appendMessage(input: { executionId: $e, role: USER, content: \"hi\" }) { uuid } }", json!({ "e": exec })).await;
    a.ok("mutation ($e: ID!) { recordLLMInteraction(input: { executionId: $e, interactionType: ITERATION, modelName: \"gpt-4.1\" }) { uuid } }", json!({ "e": exec })).await;
    a.finish(&exec, "COMPLETED", None).await;
    a.ok(
        "mutation ($id: ID!) { completeSession(input: { id: $id }) { status } }",
        json!({ "id": session }),
    )
    .await;

    let mut seen = Vec::new();
    loop {
        let change = changes.next().await.expect("a change")["session"].clone();
        let kind = change["kind"].as_str().unwrap().to_owned();
        match kind.as_str() {
            "MESSAGE" => assert_eq!(change["message"]["role"], "USER"),
            "LLM_INTERACTION" => assert_eq!(change["llmInteraction"]["modelName"], "gpt-4.1"),
            "EXECUTION" => assert_eq!(change["execution"]["agentName"], "KubernetesAgent"),
            "STAGE" => assert!(change["stage"]["status"].is_string()),
            _ => {}
        }
        seen.push(kind);
        // Each change names its record, resolved as it is when delivered; stop once every kind
        // of change this work makes has arrived.
        if [
            "STAGE",
            "EXECUTION",
            "MESSAGE",
            "LLM_INTERACTION",
            "SESSION",
        ]
        .iter()
        .all(|kind| seen.iter().any(|k| k == kind))
        {
            break;
        }
    }
    // The feed: only status changes into the asked statuses, in order.
    let first = feed.next().await.expect("feed update")["sessions"].clone();
    assert_eq!(
        first,
        json!({ "status": "IN_PROGRESS", "session": { "uuid": session } })
    );
    let second = feed.next().await.expect("feed update")["sessions"].clone();
    assert_eq!(second["status"], "COMPLETED");
    changes.disconnect().await;
    feed.disconnect().await;
    app.stop().await;
}

/// A second `casefile serve` process on the same database.
struct OtherProcess {
    child: std::process::Child,
    addr: std::net::SocketAddr,
}

impl OtherProcess {
    fn start(database_url: &str) -> OtherProcess {
        use std::io::BufRead as _;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_casefile"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--database-url",
                database_url,
            ])
            .env("RUST_LOG", "info")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let addr = loop {
            let line = lines.next().expect("the other process exited").unwrap();
            if let Some(rest) = line.split("casefile listening on http://").nth(1) {
                break rest.trim_end_matches("/graphql").parse().unwrap();
            }
        };
        std::thread::spawn(move || lines.for_each(drop));
        OtherProcess { child, addr }
    }
}

impl Drop for OtherProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn two_processes_on_one_postgresql_deliver_every_update() {
    let app = TestApp::start().await;
    let Some(url) = app.db.url() else {
        eprintln!(
            "two processes need a shared PostgreSQL (DATABASE_URL); the embedded database serves one process"
        );
        app.stop().await;
        return;
    };
    let other = OtherProcess::start(&url);
    let a = Agent { app: &app };
    let (session, exec) = running_execution(&a).await;
    // Subscribed on the other process; written through this one.
    let mut sub = Transport::ws(
        Subscription::start(
            other.addr,
            false,
            json!({}),
            TIMELINE,
            json!({ "s": session }),
        )
        .await,
    );
    let first = pieces(100);
    write_stream(&a, &exec, &first, std::time::Duration::ZERO).await;
    let (_, text, _) = read_until_finished(&mut sub).await;
    assert_eq!(text, first.concat());

    // The other process's LISTEN connection drops: it catches up from the last change it read.
    let killed: i64 = sqlx::query_scalar(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE datname = current_database() AND query ILIKE 'LISTEN%'",
    )
    .fetch_one(app.store.pool())
    .await
    .unwrap();
    assert!(killed >= 1, "the other process listens");
    let second = pieces(80);
    write_stream(&a, &exec, &second, std::time::Duration::ZERO).await;
    let (_, text, _) = read_until_finished(&mut sub).await;
    assert_eq!(text, second.concat());
    sub.disconnect().await;
    drop(other);
    app.stop().await;
}

#[tokio::test]
async fn token_rate_streams_are_coalesced_without_losing_text() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let (session, exec) = running_execution(&a).await;
    let mut sub = Transport::ws(
        Subscription::start(
            app.addr,
            false,
            json!({}),
            TIMELINE,
            json!({ "s": session }),
        )
        .await,
    );
    let pieces = pieces(200);
    write_stream(&a, &exec, &pieces, std::time::Duration::ZERO).await;
    let (kinds, text, _) = read_until_finished(&mut sub).await;
    assert_eq!(text, pieces.concat());
    let appended = kinds.iter().filter(|k| *k == "APPENDED").count();
    println!("200 appends reached the subscriber as {appended} updates");
    assert!(
        appended <= 100,
        "{appended} updates for 200 appends: deltas were not coalesced"
    );
    sub.disconnect().await;
    app.stop().await;
}

#[tokio::test]
async fn a_subscriber_that_stops_reading_is_closed_with_its_cursor() {
    let app = TestApp::start_with(casefile::config::HttpOptions {
        subscriber_buffer: 64,
        ..Default::default()
    })
    .await;
    let a = Agent { app: &app };
    let (session, exec) = running_execution(&a).await;
    let mut slow = Subscription::start(
        app.addr,
        false,
        json!({}),
        TIMELINE,
        json!({ "s": session }),
    )
    .await;
    // Far more than a subscriber may have pending, and more than the socket buffers hold.
    let content = "x".repeat(256 * 1024);
    for _ in 0..10 {
        let ops: Vec<Value> = (0..20)
            .map(|_| json!({ "createTimelineEvent": { "executionId": exec, "eventType": "LLM_RESPONSE", "status": "COMPLETED", "content": content } }))
            .collect();
        a.ok(
            "mutation ($ops: [IngestOperation!]!) { ingest(operations: $ops) { __typename } }",
            json!({ "ops": ops }),
        )
        .await;
    }
    // Now it reads: what it had buffered, then the end, telling it where to resume.
    let mut received = 0;
    let end = loop {
        match slow.next().await {
            Ok(_) => received += 1,
            Err(end) => break end,
        }
    };
    assert!(
        received < 6 * 3 * 1000,
        "it was cut off before the end ({received} updates)"
    );
    let error = &end["payload"]["errors"][0];
    assert_eq!(error["extensions"]["code"], "SUBSCRIBER_TOO_SLOW", "{end}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("subscribe again with after:"), "{end}");
    // Resuming from the cursor it was given delivers the rest, each event once.
    let cursor = message.split('"').nth(1).unwrap();
    let mut resumed = Subscription::start(
        app.addr,
        false,
        json!({}),
        TIMELINE,
        json!({ "s": session, "after": cursor }),
    )
    .await;
    let mut finished = std::collections::BTreeSet::new();
    while finished.last() != Some(&200) {
        let update = resumed.next().await.expect("an update")["timeline"].clone();
        if update["kind"] == "FINISHED" {
            assert!(
                finished.insert(update["sequenceNumber"].as_i64().unwrap()),
                "finished twice"
            );
        }
    }
    let done = 200 - finished.len() as i64;
    assert_eq!(
        finished.into_iter().collect::<Vec<_>>(),
        ((done + 1)..=200).collect::<Vec<_>>()
    );
    resumed.disconnect().await;
    slow.disconnect().await;
    app.stop().await;
}

#[tokio::test]
async fn subscriptions_also_stream_as_multipart_http() {
    use futures::StreamExt as _;
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let session = a.session().await;
    let response = app
        .client
        .post(app.url("/graphql"))
        .header("accept", "multipart/mixed")
        .json(&json!({ "query": "subscription ($s: ID!) { session(id: $s) { kind session { status } } }", "variables": { "s": session } }))
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.headers()["content-type"],
        "multipart/mixed; boundary=graphql"
    );
    let mut body = response.bytes_stream();
    let mut text = String::new();
    while !text.contains("PENDING") {
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(10), body.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(text.contains("--graphql"), "{text}");
    assert!(text.contains(r#""kind":"SESSION""#), "{text}");
    drop(body);
    app.stop().await;
}

/// Waits for the next change of `kind` on a hub receiver, skipping others.
async fn next_of_kind(rx: &mut casefile::live::Receiver, kind: &str) -> std::sync::Arc<Change> {
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            let change = rx.recv().await.expect("a change");
            if change.row.kind == kind {
                return change;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {kind} change within 10 s"))
}

#[tokio::test]
async fn a_change_committed_long_after_later_ones_is_still_delivered() {
    let app = TestApp::start().await;
    if app.db.url().is_none() {
        eprintln!("holding a transaction open needs a second connection (DATABASE_URL)");
        app.stop().await;
        return;
    }
    let a = Agent { app: &app };
    let session = a.session().await;
    let mut sub = Subscription::start(
        app.addr,
        false,
        json!({}),
        "subscription ($s: ID!) { session(id: $s) { kind session { author } } }",
        json!({ "s": session }),
    )
    .await;
    assert_eq!(sub.next().await.unwrap()["session"]["kind"], "SESSION");
    // A slow batch: its change id is taken now, committed only after another session's
    // changes and after longer than any time limit on waiting for it.
    let mut slow = app.store.pool().begin().await.unwrap();
    sqlx::query("UPDATE sessions SET author = 'slow batch' WHERE id = $1::uuid")
        .bind(&session)
        .execute(&mut *slow)
        .await
        .unwrap();
    for _ in 0..3 {
        a.session().await;
    }
    tokio::time::sleep(std::time::Duration::from_secs(12)).await;
    slow.commit().await.unwrap();
    let change = sub.next().await.expect("the slow batch's change")["session"].clone();
    assert_eq!(change["kind"], "SESSION");
    assert_eq!(change["session"]["author"], "slow batch");
    sub.disconnect().await;
    app.stop().await;
}

#[tokio::test]
async fn a_change_whose_reading_failed_is_read_again() {
    let app = TestApp::start().await;
    let Some(url) = app.db.url() else {
        eprintln!("a second hub with its own connections needs DATABASE_URL");
        app.stop().await;
        return;
    };
    // A hub whose view of appended text fails while `faulty.switch` says so.
    for statement in [
        "CREATE SCHEMA faulty",
        "CREATE TABLE faulty.switch (ok int NOT NULL)",
        "INSERT INTO faulty.switch VALUES (1)",
        "CREATE VIEW faulty.timeline_events_live AS SELECT * FROM public.timeline_events_live \
         WHERE 1 / (SELECT ok FROM faulty.switch) = 1",
    ] {
        sqlx::query(statement)
            .execute(app.store.pool())
            .await
            .unwrap();
    }
    let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect_with(options.options([("search_path", "faulty,public")]))
        .await
        .unwrap();
    let hub = Hub::start(casefile::store::Store::new(pool.clone()), 64)
        .await
        .unwrap();
    let a = Agent { app: &app };
    let (session, exec) = running_execution(&a).await;
    let mut rx = hub.subscribe(session.parse().unwrap());
    let (event, _) = a.event(&exec, "STREAMING").await;
    next_of_kind(&mut rx, "event_created").await;
    sqlx::query("UPDATE faulty.switch SET ok = 0")
        .execute(app.store.pool())
        .await
        .unwrap();
    a.append(&event, 0, "hello").await;
    // A few reads fail meanwhile.
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    sqlx::query("UPDATE faulty.switch SET ok = 1")
        .execute(app.store.pool())
        .await
        .unwrap();
    let appended = next_of_kind(&mut rx, "event_appended").await;
    assert_eq!(appended.delta.as_deref(), Some("hello"));
    drop(rx);
    hub.shutdown();
    pool.close().await;
    app.stop().await;
}

#[tokio::test]
async fn a_first_subscriber_gets_no_changes_from_before_it_subscribed() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    // Work nobody here watches.
    let (session, exec) = running_execution(&a).await;
    a.ok("mutation ($e: ID!) { appendMessage(input: { executionId: $e, role: USER, content: \"before\" }) { uuid } }", json!({ "e": exec })).await;
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let mut sub = Subscription::start(
        app.addr,
        false,
        json!({}),
        "subscription ($s: ID!) { session(id: $s) { kind message { content } } }",
        json!({ "s": session }),
    )
    .await;
    assert_eq!(sub.next().await.unwrap()["session"]["kind"], "SESSION");
    a.ok("mutation ($e: ID!) { appendMessage(input: { executionId: $e, role: USER, content: \"after\" }) { uuid } }", json!({ "e": exec })).await;
    let next = sub.next().await.unwrap()["session"].clone();
    assert_eq!(
        (next["kind"].as_str(), next["message"]["content"].as_str()),
        (Some("MESSAGE"), Some("after")),
        "the first change after subscribing is the new one"
    );
    sub.disconnect().await;
    app.stop().await;
}

#[tokio::test]
async fn the_log_sequence_is_logged_and_a_reset_log_is_followed_from_its_start() {
    let app = TestApp::start().await;
    let persistence: String = sqlx::query_scalar(
        "SELECT relpersistence::text FROM pg_class WHERE relname = 'live_changes_id_seq'",
    )
    .fetch_one(app.store.pool())
    .await
    .unwrap();
    assert_eq!(persistence, "p", "the log's sequence survives a crash");
    let a = Agent { app: &app };
    let (session, exec) = running_execution(&a).await;
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let mut sub = Subscription::start(
        app.addr,
        false,
        json!({}),
        "subscription ($s: ID!) { session(id: $s) { kind message { content } } }",
        json!({ "s": session }),
    )
    .await;
    assert_eq!(sub.next().await.unwrap()["session"]["kind"], "SESSION");
    // What a crash does to an unlogged table whose sequence is unlogged too.
    sqlx::query("TRUNCATE live_changes RESTART IDENTITY")
        .execute(app.store.pool())
        .await
        .unwrap();
    a.ok("mutation ($e: ID!) { appendMessage(input: { executionId: $e, role: USER, content: \"after the reset\" }) { uuid } }", json!({ "e": exec })).await;
    let next = sub.next().await.expect("a change after the reset")["session"].clone();
    assert_eq!(next["message"]["content"], "after the reset");
    sub.disconnect().await;
    app.stop().await;
}

#[tokio::test]
async fn the_feed_carries_creations_and_status_changes_only() {
    let app = TestApp::start().await;
    let hub = Hub::start(app.store.clone(), 64).await.unwrap();
    let mut feed = hub.subscribe_feed();
    let a = Agent { app: &app };
    let session = a.session().await;
    let created = next_of_kind(&mut feed, "session").await;
    assert_eq!(
        (
            created.row.status.as_deref(),
            created.row.previous_status.as_deref()
        ),
        (Some("pending"), None)
    );
    let mut own = hub.subscribe(session.parse().unwrap());
    sqlx::query("UPDATE sessions SET author = 'someone' WHERE id = $1::uuid")
        .bind(&session)
        .execute(app.store.pool())
        .await
        .unwrap();
    a.ok(
        "mutation ($id: ID!) { startSession(id: $id) { status } }",
        json!({ "id": session }),
    )
    .await;
    let started = next_of_kind(&mut feed, "session").await;
    assert_eq!(
        (
            started.row.status.as_deref(),
            started.row.previous_status.as_deref()
        ),
        (Some("in_progress"), Some("pending")),
        "the author update is not in the feed"
    );
    // The session's own subscribers get every update.
    let updated = next_of_kind(&mut own, "session").await;
    assert_eq!(
        (
            updated.row.status.as_deref(),
            updated.row.previous_status.as_deref()
        ),
        (Some("pending"), Some("pending"))
    );
    let started = next_of_kind(&mut own, "session").await;
    assert_eq!(started.row.status.as_deref(), Some("in_progress"));
    drop((feed, own));
    hub.shutdown();
    app.stop().await;
}

#[tokio::test]
async fn a_batch_notifies_listeners_once() {
    let app = TestApp::start().await;
    let Some(url) = app.db.url() else {
        eprintln!("LISTEN needs an external PostgreSQL (DATABASE_URL)");
        app.stop().await;
        return;
    };
    let a = Agent { app: &app };
    let (_, exec) = running_execution(&a).await;
    let mut listener = sqlx::postgres::PgListener::connect(&url).await.unwrap();
    listener.listen("casefile_live").await.unwrap();
    let ops: Vec<Value> = (0..50)
        .map(|i| json!({ "appendMessage": { "executionId": exec, "role": "USER", "content": format!("m{i}") } }))
        .collect();
    a.ok(
        "mutation ($ops: [IngestOperation!]!) { ingest(operations: $ops) { __typename } }",
        json!({ "ops": ops }),
    )
    .await;
    let mut received = 0;
    while let Ok(Ok(_)) =
        tokio::time::timeout(std::time::Duration::from_millis(500), listener.recv()).await
    {
        received += 1;
    }
    assert_eq!(
        received, 1,
        "50 changes in one transaction, one notification"
    );
    drop(listener);
    app.stop().await;
}

#[tokio::test]
async fn the_log_is_pruned_by_id_after_its_retention() {
    let app = TestApp::start().await;
    let hub = Hub::start_with(
        app.store.clone(),
        HubOptions {
            retention: std::time::Duration::from_secs(1),
            prune_every: std::time::Duration::from_millis(200),
            ..HubOptions::with_buffer(64)
        },
    )
    .await
    .unwrap();
    let a = Agent { app: &app };
    a.session().await;
    let old: i64 = sqlx::query_scalar("SELECT max(id) FROM live_changes")
        .fetch_one(app.store.pool())
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let left: i64 = sqlx::query_scalar("SELECT count(*) FROM live_changes WHERE id <= $1")
            .bind(old)
            .fetch_one(app.store.pool())
            .await
            .unwrap();
        if left == 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "old changes stay");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // A change made now is newer than anything seen a retention ago: it stays for now.
    a.session().await;
    let recent: i64 = sqlx::query_scalar("SELECT count(*) FROM live_changes WHERE id > $1")
        .bind(old)
        .fetch_one(app.store.pool())
        .await
        .unwrap();
    assert_eq!(recent, 1);
    hub.shutdown();
    app.stop().await;
}

#[tokio::test]
async fn a_subscriber_holding_too_many_bytes_is_cut_off() {
    let app = TestApp::start().await;
    let hub = Hub::start_with(
        app.store.clone(),
        HubOptions {
            byte_budget: 256 * 1024,
            ..HubOptions::with_buffer(4096)
        },
    )
    .await
    .unwrap();
    let a = Agent { app: &app };
    let (session, exec) = running_execution(&a).await;
    let session: uuid::Uuid = session.parse().unwrap();
    let mut stalled = hub.subscribe(session);
    let mut reading = hub.subscribe(session);
    // 20 events of 64 KiB, one at a time: far fewer changes than the buffer, far more bytes
    // than the budget; the subscriber that keeps reading is never near it.
    let content = "x".repeat(64 * 1024);
    for _ in 0..20 {
        a.ok(
            "mutation ($e: ID!, $c: String!) { createTimelineEvent(input: { executionId: $e, \
             eventType: LLM_RESPONSE, status: COMPLETED, content: $c }) { uuid } }",
            json!({ "e": exec, "c": content }),
        )
        .await;
        let created = next_of_kind(&mut reading, "event_created").await;
        assert_eq!(created.event.as_ref().unwrap().content.len(), 64 * 1024);
    }
    let mut received = 0;
    let end = loop {
        match tokio::time::timeout(std::time::Duration::from_secs(10), stalled.recv())
            .await
            .expect("the stalled subscriber ends")
        {
            Ok(_) => received += 1,
            Err(end) => break end,
        }
    };
    assert!(
        matches!(end, tokio::sync::broadcast::error::RecvError::Lagged(_)),
        "{end:?}"
    );
    assert!(received <= 4, "{received} changes of 64 KiB fit in 256 KiB");
    drop((stalled, reading));
    hub.shutdown();
    app.stop().await;
}
