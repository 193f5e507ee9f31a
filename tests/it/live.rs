//! Live timeline subscriptions over real WebSocket connections.

use serde_json::{Value, json};

use crate::common::served::Served;
use crate::common::sse::SseSubscription;
use crate::common::ws::Subscription;
use crate::common::{LISTEN_CONNECTIONS, TestApp};
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

/// A session whose one stage runs two agents in parallel: (session, stage, one, two).
async fn two_agents(a: &Agent<'_>, policy: &str) -> (String, String, String, String) {
    let session = a.session().await;
    let stage = a.stage(&session, 0, 2, Some(policy)).await;
    let one = a.execution(&stage, 1, "One").await;
    let two = a.execution(&stage, 2, "Two").await;
    (session, stage, one, two)
}

/// A timeline subscription over `graphql-transport-ws`, from the start.
async fn watch(app: &TestApp, session: &str) -> Transport {
    Transport::ws(
        Subscription::start(
            app.addr,
            false,
            json!({}),
            TIMELINE,
            json!({ "s": session }),
        )
        .await,
    )
}

/// The text the writer streams: token-sized pieces, some of them beyond ASCII (offsets count
/// characters, not bytes).
fn pieces(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| match i % 3 {
            0 => format!("tok{i} "),
            1 => format!("tök{i}✓ "),
            _ => format!("🙂{i} "),
        })
        .collect()
}

pub(crate) async fn running_execution(a: &Agent<'_>) -> (String, String) {
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
        let mut kinds: Vec<String> = Vec::new();
        let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut reconnects = 0;
        loop {
            // Each reconnection on another transport: WebSocket, legacy WebSocket, SSE.
            let variables = json!({ "s": session, "after": cursor });
            let mut sub = match reconnects % 3 {
                2 => Transport::Sse(SseSubscription::start(app.addr, TIMELINE, variables).await),
                n => Transport::ws(
                    Subscription::start(app.addr, n == 1, json!({}), TIMELINE, variables).await,
                ),
            };
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
                let kind = update["kind"].as_str().unwrap().to_owned();
                if kind != "APPENDED" {
                    kinds.push(kind);
                }
                if update["kind"] == "FINISHED" {
                    sub.disconnect().await;
                    return (text, kinds, reconnects);
                }
            }
            sub.disconnect().await;
            reconnects += 1;
        }
    };
    let (_, (text, kinds, reconnects)) = tokio::join!(writer, reader);
    assert!(
        reconnects >= 3,
        "the stream was interrupted {reconnects} times"
    );
    assert_eq!(text, expected);
    assert_eq!(kinds, ["CREATED", "FINISHED"], "each exactly once");
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

#[tokio::test]
async fn two_processes_on_one_postgresql_deliver_every_update() {
    let Some((app, url)) = TestApp::start_external("a second process").await else {
        return;
    };
    let other = Served::start(vec!["--database-url".into(), url]).await;
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
    let killed: i64 = sqlx::query_scalar(&format!(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE datname = current_database() AND {LISTEN_CONNECTIONS}"
    ))
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
    let mut sub = watch(&app, &session).await;
    let pieces = pieces(200);
    let started = std::time::Instant::now();
    write_stream(&a, &exec, &pieces, std::time::Duration::ZERO).await;
    let (kinds, text, _) = read_until_finished(&mut sub).await;
    let windows = started.elapsed().as_millis() / 50 + 2;
    assert_eq!(text, pieces.concat());
    let appended = kinds.iter().filter(|k| *k == "APPENDED").count();
    println!("200 appends reached the subscriber as {appended} updates (at most {windows})");
    // At most one delivery of appends per 50 ms, however fast (or slow) the writer.
    assert!(
        appended as u128 <= windows.min(199),
        "{appended} updates for 200 appends: deltas were not coalesced"
    );
    sub.disconnect().await;
    app.stop().await;
}

#[tokio::test]
async fn a_subscriber_that_stops_reading_is_closed_with_its_cursor() {
    let app = TestApp::start_with(casefile::http::HttpOptions {
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
    let flood = |content: &str, events: usize| -> Value {
        let ops: Vec<Value> = (0..events)
            .map(|_| json!({ "createTimelineEvent": { "executionId": exec, "eventType": "LLM_RESPONSE", "status": "COMPLETED", "content": content } }))
            .collect();
        json!({ "ops": ops })
    };
    let ingest = "mutation ($ops: [IngestOperation!]!) { ingest(operations: $ops) { __typename } }";
    // It follows live (a first event reached it), then stops reading.
    a.ok(ingest, flood("first", 1)).await;
    let mut received = 0;
    while slow.next().await.expect("the first event")["timeline"]["kind"] != "FINISHED" {
        received += 1;
    }
    // Far more than a subscriber may have pending, and more than the socket buffers hold.
    let content = "x".repeat(256 * 1024);
    for _ in 0..10 {
        a.ok(ingest, flood(&content, 20)).await;
    }
    // Now it reads: what it had buffered, then the end, telling it where to resume.
    let end = loop {
        match slow.next().await {
            Ok(_) => received += 1,
            Err(end) => break end,
        }
    };
    assert!(
        received < 3 * 201,
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
    while finished.last() != Some(&201) {
        let update = resumed.next().await.expect("an update")["timeline"].clone();
        if update["kind"] == "FINISHED" {
            assert!(
                finished.insert(update["sequenceNumber"].as_i64().unwrap()),
                "finished twice"
            );
        }
    }
    let done = 201 - finished.len() as i64;
    assert_eq!(
        finished.into_iter().collect::<Vec<_>>(),
        ((done + 1)..=201).collect::<Vec<_>>()
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

/// Whether a subscription ended with an error of this code.
fn ended_with(end: &Value, code: &str) -> bool {
    end.to_string().contains(&format!("\"code\":\"{code}\""))
}

#[tokio::test]
async fn a_timeline_page_cursor_resumes_in_the_middle_of_a_streaming_event() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let (session, exec) = running_execution(&a).await;
    write_stream(&a, &exec, &pieces(3), std::time::Duration::ZERO).await;
    let (event, _) = a.event(&exec, "STREAMING").await;
    let head = pieces(10).concat();
    a.append(&event, 0, &head).await;
    // A page read while the event streams, then a subscription from its end cursor. Read
    // backward (the latest event only), its end cursor is the forward page's.
    let page = |args: &'static str| {
        let query = format!(
            "query ($s: ID!) {{ session(id: $s) {{ timeline({args}) {{
               edges {{ node {{ status content }} }} pageInfo {{ endCursor }} }} }} }}"
        );
        let session = session.clone();
        let a = &a;
        async move { a.ok(&query, json!({ "s": session })).await["session"]["timeline"].clone() }
    };
    let forward = page("first: 10").await;
    assert_eq!(forward["edges"][1]["node"]["content"], head.as_str());
    let page = page("last: 1").await;
    assert_eq!(page["edges"][0]["node"]["content"], head.as_str());
    assert_eq!(
        page["pageInfo"]["endCursor"],
        forward["pageInfo"]["endCursor"]
    );
    let mut sub = Transport::ws(
        Subscription::start(
            app.addr,
            false,
            json!({}),
            TIMELINE,
            json!({ "s": session, "after": page["pageInfo"]["endCursor"] }),
        )
        .await,
    );
    let tail: String = pieces(20)[10..].concat();
    a.append(&event, head.chars().count() as i64, &tail).await;
    a.ok(
        "mutation ($id: ID!) { finishTimelineEvent(input: { eventId: $id, status: COMPLETED }) { status } }",
        json!({ "id": event }),
    )
    .await;
    let mut kinds = Vec::new();
    let mut text = head.clone();
    loop {
        let update = sub.next().await.expect("an update")["timeline"].clone();
        kinds.push(update["kind"].as_str().unwrap().to_owned());
        if let Some(delta) = update["delta"].as_str() {
            assert_eq!(
                update["offset"].as_i64().unwrap(),
                text.chars().count() as i64
            );
            text.push_str(delta);
        }
        if update["kind"] == "FINISHED" {
            break;
        }
    }
    assert!(!kinds.contains(&"CREATED".to_owned()), "{kinds:?}");
    assert_eq!(text, head + &tail);
    sub.disconnect().await;
    app.stop().await;
}

#[tokio::test]
async fn scoped_subscriptions_follow_one_execution_and_check_their_ids_and_cursors() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let (session, stage, one, two) = two_agents(&a, "ALL").await;
    let scoped = "subscription ($s: ID!, $st: ID, $e: ID, $after: String) {
        timeline(sessionId: $s, stageId: $st, executionId: $e, after: $after) {
          kind offset delta cursor event { uuid content } } }";
    let mut sub = Transport::ws(
        Subscription::start(
            app.addr,
            false,
            json!({}),
            scoped,
            json!({ "s": session, "st": stage, "e": two }),
        )
        .await,
    );
    let first = pieces(20);
    let second = pieces(30);
    let (e1, e2) = tokio::join!(
        write_stream(&a, &one, &first, std::time::Duration::ZERO),
        write_stream(&a, &two, &second, std::time::Duration::ZERO)
    );
    let (kinds, text, finished) = read_until_finished(&mut sub).await;
    assert_eq!(kinds[0], "CREATED");
    assert_eq!(
        finished["event"]["uuid"],
        e2.as_str(),
        "only the execution's events"
    );
    assert_eq!(text, second.concat());
    let cursor = finished["cursor"].clone();
    sub.disconnect().await;
    assert_ne!(e1, e2);

    // Its cursor resumes the same view (or a narrower one), not the whole timeline.
    let mut again = Subscription::start(
        app.addr,
        false,
        json!({}),
        scoped,
        json!({ "s": session, "after": cursor }),
    )
    .await;
    let end = again.next().await.expect_err("refused");
    assert!(ended_with(&end, "BAD_USER_INPUT"), "{end}");
    again.disconnect().await;

    // Ids must be of this session, and the execution of the stage.
    let other = a.session().await;
    let other_stage = a.stage(&other, 0, 1, None).await;
    for variables in [
        json!({ "s": session, "st": other_stage }),
        json!({ "s": session, "e": a.execution(&other_stage, 1, "X").await }),
        json!({ "s": other, "st": other_stage, "e": one }),
    ] {
        let mut bad = Subscription::start(app.addr, false, json!({}), scoped, variables).await;
        let end = bad.next().await.expect_err("refused");
        assert!(ended_with(&end, "BAD_USER_INPUT"), "{end}");
        bad.disconnect().await;
    }
    app.stop().await;
}

#[tokio::test]
async fn parallel_streams_are_coalesced_per_event_and_created_carries_no_content() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let (session, _, one, two) = two_agents(&a, "ANY").await;
    let mut sub = watch(&app, &session).await;
    // Two agents' streams, interleaved token by token, committed together (so they reach the
    // subscriber within one window, however busy the machine).
    let first = pieces(50);
    let second: Vec<String> = pieces(50).into_iter().rev().collect();
    let events = [
        a.event(&one, "STREAMING").await.0,
        a.event(&two, "STREAMING").await.0,
    ];
    let mut offsets = [0, 0];
    let mut ops = Vec::new();
    for (x, y) in first.iter().zip(&second) {
        for (i, piece) in [x, y].into_iter().enumerate() {
            ops.push(json!({ "appendTimelineContent": { "eventId": events[i], "offset": offsets[i], "delta": piece } }));
            offsets[i] += piece.chars().count();
        }
    }
    for event in &events {
        ops.push(json!({ "finishTimelineEvent": { "eventId": event, "status": "COMPLETED" } }));
    }
    a.ok(
        "mutation ($ops: [IngestOperation!]!) { ingest(operations: $ops) { __typename } }",
        json!({ "ops": ops }),
    )
    .await;
    let mut texts: std::collections::HashMap<i64, String> = Default::default();
    let (mut appended, mut finished) = (0, 0);
    while finished < 2 {
        let update = sub.next().await.expect("an update")["timeline"].clone();
        let seq = update["sequenceNumber"].as_i64().unwrap();
        let text = texts.entry(seq).or_default();
        match update["kind"].as_str().unwrap() {
            "CREATED" => assert_eq!(update["event"]["content"], "", "{update}"),
            "APPENDED" => {
                assert_eq!(
                    update["offset"].as_i64().unwrap(),
                    text.chars().count() as i64
                );
                text.push_str(update["delta"].as_str().unwrap());
                appended += 1;
            }
            _ => {
                assert_eq!(update["event"]["content"], text.as_str());
                finished += 1;
            }
        }
    }
    let mut got: Vec<&String> = texts.values().collect();
    got.sort();
    let (f, s) = (first.concat(), second.concat());
    let mut want = vec![&f, &s];
    want.sort();
    assert_eq!(got, want);
    println!("100 interleaved appends reached the subscriber as {appended} updates");
    assert!(
        appended <= 6,
        "{appended} updates: interleaved streams were not coalesced"
    );
    sub.disconnect().await;
    app.stop().await;
}

#[tokio::test]
async fn a_stream_finished_with_replacement_content_ends_with_that_content() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let (session, exec) = running_execution(&a).await;
    let mut sub = watch(&app, &session).await;
    let (event, _) = a.event(&exec, "STREAMING").await;
    a.append(&event, 0, "Hello wor").await;
    for kind in ["CREATED", "APPENDED"] {
        assert_eq!(sub.next().await.unwrap()["timeline"]["kind"], kind);
    }
    a.ok(
        "mutation ($id: ID!) { finishTimelineEvent(input: { eventId: $id, status: COMPLETED, content: \"Bye\" }) { status } }",
        json!({ "id": event }),
    )
    .await;
    // Nothing more is appended from the shorter final content; it comes whole with FINISHED.
    let (kinds, _, finished) = read_until_finished(&mut sub).await;
    assert_eq!(kinds, ["FINISHED"]);
    assert_eq!(finished["event"]["content"], "Bye");
    sub.disconnect().await;
    app.stop().await;
}
