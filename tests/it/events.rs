//! One ordered event stream per session: the agent tree behind it, positions without gaps, the
//! `events` subscription (replay, live, resume, filters, merged appends) and the plain SSE
//! endpoint with stream tickets.

use futures::StreamExt as _;
use serde_json::{Value, json};

use crate::common::TestApp;
use crate::common::multipart::MultipartSubscription;
use crate::common::sse::SseSubscription;
use crate::common::ws::Subscription;
use crate::write_api::Agent;

const EVENTS: &str = "subscription ($s: ID!, $after: String, $f: EventFilterInput) {
  events(sessionId: $s, after: $after, filter: $f) {
    sequence firstSequence type cursor
    source { agentName agentType teamName }
    data {
      __typename
      ... on TextAppended { offset text }
      ... on Dispatch { teamName agentName task }
      ... on SystemNotice { level code message }
      ... on ToolCall { tool args }
      ... on AgentLifecycle { status summary }
      ... on SessionLifecycle { status previousStatus }
    }
  }
}";

/// A running supervisor in a new session: (session, stage, supervisor).
pub(crate) async fn supervisor(a: &Agent<'_>) -> (String, String, String) {
    let session = a.session().await;
    let stage = a.stage(&session, 0, 1, None).await;
    let lead = a.execution(&stage, 1, "Lead").await;
    a.start(&lead).await;
    (session, stage, lead)
}

/// Dispatches a sub-agent of `parent`.
pub(crate) async fn dispatch(
    a: &Agent<'_>,
    stage: &str,
    index: i32,
    parent: &str,
    kind: &str,
    team: Option<&str>,
) -> String {
    let d = a
        .ok(
            "mutation ($s: ID!, $i: Int!, $p: ID!, $t: AgentType, $team: String) {
               createAgentExecution(input: { stageId: $s, agentIndex: $i, agentName: \"Sub\",
                 iterationStrategy: \"react\", parentExecutionId: $p, agentType: $t, teamName: $team,
                 task: \"look at the pods\" }) { uuid depth agentType teamName } }",
            json!({ "s": stage, "i": index, "p": parent, "t": kind, "team": team }),
        )
        .await;
    d["createAgentExecution"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Events until one of type `last` (inclusive).
async fn until(sub: &mut Subscription, last: &str) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        let event = tokio::time::timeout(std::time::Duration::from_secs(20), sub.next())
            .await
            .unwrap_or_else(|_| panic!("no {last} within 20 s; got {out:#?}"))
            .expect("an event")["events"]
            .clone();
        let done = event["type"] == last;
        out.push(event);
        if done {
            return out;
        }
    }
}

/// Every position from 1 (or `from`) covered exactly once, in order.
fn assert_gapless(events: &[Value], from: i64) {
    let mut next = from;
    for e in events {
        assert_eq!(e["firstSequence"].as_i64(), Some(next), "{events:#?}");
        next = e["sequence"].as_i64().unwrap() + 1;
    }
}

#[tokio::test]
async fn everything_in_a_session_arrives_in_one_order_and_resumes_exactly() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let (session, stage, lead) = supervisor(&a).await;
    let mut sub =
        Subscription::start(app.addr, false, json!({}), EVENTS, json!({ "s": session })).await;
    let team = dispatch(&a, &stage, 2, &lead, "TEAM_SUPERVISOR", Some("pods")).await;
    let worker = dispatch(&a, &stage, 3, &team, "WORKER", None).await;
    let (event, _) = a.event(&worker, "STREAMING").await;
    let text = "OOMKilled ✓ twice, then 🙂 fine";
    let mut offset = 0;
    for piece in text.split_inclusive(' ') {
        a.append(&event, offset, piece).await;
        offset += piece.chars().count() as i64;
    }
    a.ok(
        "mutation ($e: ID!) { recordSystemNotice(input: { executionId: $e, level: WARNING,
           code: \"MCP_SERVER_UNAVAILABLE\", message: \"kubernetes MCP is down\" }) { eventType } }",
        json!({ "e": worker }),
    )
    .await;
    a.ok(
        "mutation ($w: ID!) { finishAgentExecution(input: { id: $w, status: COMPLETED,
           resultSummary: \"two OOM kills\" }) { status } }",
        json!({ "w": worker }),
    )
    .await;
    let events = until(&mut sub, "lifecycle.completed").await;
    assert_gapless(&events, 1);
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    // The session's own creation and start, the lead's, then the dispatches.
    assert_eq!(types[0], "lifecycle.created", "{types:?}");
    assert_eq!(
        events[0]["source"],
        json!({ "agentName": "orchestrator", "agentType": "GLOBAL_SUPERVISOR", "teamName": null }),
        "the session's own events come from its orchestrator"
    );
    let dispatched: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"].as_str().unwrap().starts_with("dispatch."))
        .collect();
    assert_eq!(dispatched.len(), 2, "{types:?}");
    assert_eq!(dispatched[0]["type"], "dispatch.team");
    assert_eq!(dispatched[0]["source"]["agentName"], "Lead");
    assert_eq!(dispatched[0]["source"]["agentType"], "GLOBAL_SUPERVISOR");
    assert_eq!(dispatched[0]["data"]["teamName"], "pods");
    assert_eq!(dispatched[1]["type"], "dispatch.worker");
    assert_eq!(dispatched[1]["source"]["agentType"], "TEAM_SUPERVISOR");
    assert_eq!(
        dispatched[1]["data"]["teamName"], "pods",
        "a worker joins its parent's team"
    );
    assert_eq!(dispatched[1]["data"]["task"], "look at the pods");
    // The streamed text, exactly, from the worker.
    let streamed: String = events
        .iter()
        .filter(|e| e["type"] == "llm.stream")
        .map(|e| {
            assert_eq!(e["source"]["teamName"], "pods");
            e["data"]["text"].as_str().unwrap()
        })
        .collect();
    assert_eq!(streamed, text);
    let warning = events
        .iter()
        .find(|e| e["type"] == "system.warning")
        .expect("the system warning");
    assert_eq!(
        warning["data"],
        json!({ "__typename": "SystemNotice", "level": "WARNING",
                "code": "MCP_SERVER_UNAVAILABLE", "message": "kubernetes MCP is down" })
    );
    let completed = events.last().unwrap();
    assert_eq!(completed["data"]["summary"], "two OOM kills");
    sub.disconnect().await;

    // Resuming from the middle gives exactly the rest, from the database.
    let middle = &events[events.len() / 2];
    let mut resumed = Subscription::start(
        app.addr,
        false,
        json!({}),
        EVENTS,
        json!({ "s": session, "after": middle["cursor"] }),
    )
    .await;
    let rest = until(&mut resumed, "lifecycle.completed").await;
    assert_gapless(&rest, middle["sequence"].as_i64().unwrap() + 1);
    let tail: String = rest
        .iter()
        .filter(|e| e["type"] == "llm.stream")
        .map(|e| e["data"]["text"].as_str().unwrap())
        .collect();
    assert!(text.ends_with(&tail), "{tail:?}");
    resumed.disconnect().await;

    // A filter keeps the order and skips the rest; the cursor still moves past what it skipped.
    let mut filtered = Subscription::start(
        app.addr,
        false,
        json!({}),
        EVENTS,
        json!({ "s": session, "f": { "categories": ["SYSTEM", "DISPATCH"] } }),
    )
    .await;
    let kept = until(&mut filtered, "system.warning").await;
    let kinds: Vec<&str> = kept.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["dispatch.team", "dispatch.worker", "system.warning"]
    );
    filtered.disconnect().await;
    app.stop().await;
}

#[tokio::test]
async fn the_event_stream_is_the_same_over_websocket_sse_and_multipart() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let (session, _, lead) = supervisor(&a).await;
    let (event, _) = a.event(&lead, "STREAMING").await;
    a.append(&event, 0, "two OOM kills, ").await;
    a.append(&event, 15, "then ✓").await;
    a.ok(
        "mutation ($e: ID!) { finishTimelineEvent(input: { eventId: $e, status: COMPLETED }) { status } }",
        json!({ "e": event }),
    )
    .await;
    let vars = json!({ "s": session });
    let mut ws = Subscription::start(app.addr, false, json!({}), EVENTS, vars.clone()).await;
    let over_ws = until(&mut ws, "timeline.finished").await;
    ws.disconnect().await;
    let mut sse = SseSubscription::start(app.addr, EVENTS, vars.clone()).await;
    let mut multipart = MultipartSubscription::open(app.addr, EVENTS, vars)
        .await
        .unwrap();
    let mut over_sse = Vec::new();
    while over_sse.len() < over_ws.len() {
        over_sse.push(sse.next().await.expect("an event")["events"].clone());
    }
    let mut over_multipart = Vec::new();
    while over_multipart.len() < over_ws.len() {
        let data = multipart.try_next().await.unwrap().expect("an event");
        over_multipart.push(data["events"].clone());
    }
    assert_eq!(over_sse, over_ws);
    assert_eq!(over_multipart, over_ws);
    assert_gapless(&over_ws, 1);
    let text: String = over_ws
        .iter()
        .filter(|e| e["type"] == "llm.stream")
        .map(|e| e["data"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "two OOM kills, then ✓");
    app.stop().await;
}

#[tokio::test]
async fn the_agent_tree_is_validated_and_reads_as_one_flat_list() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let (session, stage, lead) = supervisor(&a).await;
    let team = dispatch(&a, &stage, 2, &lead, "TEAM_SUPERVISOR", Some("net")).await;
    dispatch(&a, &stage, 3, &team, "WORKER", None).await;
    dispatch(&a, &stage, 4, &lead, "TEAM_SUPERVISOR", Some("db")).await;
    let tree = a
        .ok(
            "query ($s: ID!) { session(id: $s) { agents { id agentName agentIndex agentType teamName depth parentId } } }",
            json!({ "s": casefile::api::ids::encode(casefile::api::ids::NodeType::Session, session.parse().unwrap()) }),
        )
        .await;
    let agents = tree["session"]["agents"].as_array().unwrap();
    let order: Vec<(i64, i64, &str)> = agents
        .iter()
        .map(|a| {
            (
                a["agentIndex"].as_i64().unwrap(),
                a["depth"].as_i64().unwrap(),
                a["teamName"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    assert_eq!(
        order,
        [(1, 0, "-"), (2, 1, "net"), (3, 2, "net"), (4, 1, "db")],
        "each agent right after its parent"
    );
    assert!(agents[0]["parentId"].is_null());
    assert_eq!(agents[2]["parentId"], agents[1]["id"]);
    assert_eq!(agents[3]["parentId"], agents[0]["id"]);

    // The rules of seed 004 and seed 003, as clear errors.
    let refused = |query: &'static str, vars: Value| {
        let app = &app;
        async move { app.error(query, vars).await }
    };
    let create = "mutation ($s: ID!, $i: Int!, $p: ID, $t: AgentType, $team: String) {
        createAgentExecution(input: { stageId: $s, agentIndex: $i, agentName: \"X\",
          iterationStrategy: \"react\", parentExecutionId: $p, agentType: $t, teamName: $team }) { uuid } }";
    let (code, message) = refused(
        create,
        json!({ "s": stage, "i": 9, "p": lead, "t": "GLOBAL_SUPERVISOR" }),
    )
    .await;
    assert_eq!(code, "BAD_USER_INPUT", "{message}");
    assert!(message.contains("root of its tree"), "{message}");
    let (code, message) = refused(
        create,
        json!({ "s": stage, "i": 9, "p": lead, "t": "WORKER", "team": "" }),
    )
    .await;
    assert_eq!(code, "BAD_USER_INPUT", "{message}");
    // A chain ten deep is the limit.
    let mut parent = lead.clone();
    for depth in 1..=10 {
        parent = dispatch(&a, &stage, 10 + depth, &parent, "WORKER", Some("deep")).await;
    }
    let (code, message) = refused(
        create,
        json!({ "s": stage, "i": 30, "p": parent, "t": "WORKER", "team": "deep" }),
    )
    .await;
    assert_eq!(code, "BAD_USER_INPUT", "{message}");
    assert!(message.contains("at most 10 deep"), "{message}");
    app.stop().await;
}

/// A plain SSE client: (id, JSON data) per event.
struct PlainStream {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: Vec<u8>,
}

impl PlainStream {
    async fn open(url: String, headers: &[(&str, &str)]) -> Result<PlainStream, (u16, Value)> {
        let mut request = reqwest::Client::new().get(url);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.expect("answered");
        if !response.status().is_success() {
            let status = response.status().as_u16();
            return Err((status, response.json().await.unwrap_or_default()));
        }
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Ok(PlainStream {
            body: response.bytes_stream().boxed(),
            buffer: Vec::new(),
        })
    }

    async fn next(&mut self) -> (Option<String>, Value) {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            if let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                let raw: Vec<u8> = self.buffer.drain(..end + 2).collect();
                let raw = String::from_utf8(raw).unwrap();
                let mut id = None;
                let mut data = String::new();
                for line in raw.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.strip_prefix(' ').unwrap_or(v));
                    }
                }
                if data.is_empty() {
                    continue; // a heartbeat comment
                }
                return (id, serde_json::from_str(&data).unwrap());
            }
            let chunk = tokio::time::timeout_at(deadline, self.body.next())
                .await
                .expect("an event within 20 s")
                .expect("the stream is open")
                .unwrap();
            self.buffer.extend_from_slice(&chunk);
        }
    }
}

#[tokio::test]
async fn the_plain_stream_serves_seed_004s_envelope_and_resumes_from_last_event_id() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let (session, _, lead) = supervisor(&a).await;
    let (event, _) = a.event(&lead, "STREAMING").await;
    a.append(&event, 0, "thinking about it").await;
    let url = app.url(&format!("/sessions/{session}/events"));
    let mut stream = PlainStream::open(url.clone(), &[]).await.unwrap();
    let (id, first) = stream.next().await;
    assert_eq!(id.as_deref(), Some("1"));
    assert_eq!(first["run_id"], session.as_str());
    assert_eq!(first["sequence"], 1);
    assert_eq!(
        first["event"],
        json!({ "category": "lifecycle", "action": "created" })
    );
    assert_eq!(first["source"], orchestrator(&session));
    assert!(first["timestamp"].as_str().unwrap().ends_with('Z'));
    let mut last = (id, first);
    while last.1["event"]["action"] != "stream" {
        last = stream.next().await;
    }
    let streamed = last.1.clone();
    assert_eq!(streamed["data"]["content"], "thinking about it");
    assert_eq!(
        streamed["source"],
        json!({ "agent_id": lead, "agent_type": "global_supervisor", "agent_name": "Lead",
                "team_name": null })
    );
    drop(stream);
    // Resume as a reconnecting EventSource does: the next event after the last id.
    a.append(&event, 17, " more").await;
    let id = last.0.unwrap();
    let mut resumed = PlainStream::open(url.clone(), &[("last-event-id", &id)])
        .await
        .unwrap();
    let (next_id, next) = resumed.next().await;
    assert_eq!(
        next_id.unwrap().parse::<i64>().unwrap(),
        id.parse::<i64>().unwrap() + 1
    );
    assert_eq!(next["data"]["content"], " more");
    // A topology snapshot first, as of where the stream starts: the tree had only the lead
    // then.
    let mut topology = PlainStream::open(format!("{url}?topology=true&after=3"), &[])
        .await
        .unwrap();
    let (id, snapshot) = topology.next().await;
    assert_eq!(id.as_deref(), Some("3"));
    assert_eq!(
        snapshot["event"],
        json!({ "category": "system", "action": "topology" })
    );
    let hierarchy = snapshot["data"]["hierarchy"].as_object().unwrap();
    assert_eq!(hierarchy.len(), 1, "{snapshot}");
    assert_eq!(hierarchy[&lead]["agent_name"], "Lead");
    assert_eq!(hierarchy[&lead]["children"], json!({}));
    drop(topology);
    // Bad input is a clear error, not a stream.
    let (status, body) = PlainStream::open(url.clone(), &[("last-event-id", "soon")])
        .await
        .err()
        .unwrap();
    assert_eq!(status, 400);
    assert_eq!(body["errors"][0]["extensions"]["code"], "BAD_USER_INPUT");
    let (status, body) = PlainStream::open(
        app.url(&format!("/sessions/{}/events", uuid::Uuid::now_v7())),
        &[],
    )
    .await
    .err()
    .unwrap();
    assert_eq!(
        (status, body["errors"][0]["extensions"]["code"].clone()),
        (404, json!("NOT_FOUND"))
    );
    app.stop().await;
}

#[tokio::test]
async fn a_stream_ticket_opens_one_session_for_a_client_without_headers() {
    let mut options = casefile::http::HttpOptions::default();
    options.auth.mode = casefile::auth::AuthMode::Tokens;
    let mut app = TestApp::start_with(options).await;
    let admin = app
        .token("ticket-admin", casefile::model::Role::Admin, None)
        .await;
    app.token = Some(admin);
    let a = Agent { app: &app };
    let (session, _, _) = supervisor(&a).await;
    let other = a.session().await;
    let url = |s: &str, ticket: Option<&str>| {
        let base = app.url(&format!("/sessions/{s}/events"));
        match ticket {
            Some(t) => format!("{base}?ticket={t}"),
            None => base,
        }
    };
    // No credentials: refused.
    let (status, body) = PlainStream::open(url(&session, None), &[])
        .await
        .err()
        .unwrap();
    assert_eq!(
        (status, body["errors"][0]["extensions"]["code"].clone()),
        (401, json!("UNAUTHENTICATED"))
    );
    let minted = a
        .ok(
            "mutation ($s: ID!) { createEventStreamTicket(sessionId: $s) { ticket expiresAt url } }",
            json!({ "s": session }),
        )
        .await["createEventStreamTicket"]
        .clone();
    let ticket = minted["ticket"].as_str().unwrap();
    assert!(minted["url"].as_str().unwrap().ends_with(ticket));
    let mut stream = PlainStream::open(url(&session, Some(ticket)), &[])
        .await
        .unwrap();
    assert_eq!(stream.next().await.1["run_id"], session.as_str());
    // Not for another session, and not a made-up one.
    let (status, _) = PlainStream::open(url(&other, Some(ticket)), &[])
        .await
        .err()
        .unwrap();
    assert_eq!(status, 401);
    let (status, _) = PlainStream::open(url(&session, Some("cfst_0000")), &[])
        .await
        .err()
        .unwrap();
    assert_eq!(status, 401);
    // Stored as a hash only.
    let stored: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM event_stream_tickets WHERE ticket_hash = sha256($1::bytea)",
    )
    .bind(ticket.as_bytes())
    .fetch_one(app.store.pool())
    .await
    .unwrap();
    assert_eq!(stored, 1);
    drop(stream);
    app.stop().await;
}

#[tokio::test]
async fn session_and_dashboard_subscriptions_resume_with_exactly_what_they_missed() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let (session, stage, lead) = supervisor(&a).await;
    let query = "subscription ($s: ID!, $after: String) { session(id: $s, after: $after) { kind cursor message { content } } }";
    let feed = "subscription ($after: String) { sessions(after: $after) { action status cursor session { uuid } } }";
    let mut changes =
        Subscription::start(app.addr, false, json!({}), query, json!({ "s": session })).await;
    let mut dashboard = Subscription::start(app.addr, false, json!({}), feed, json!({})).await;
    let first = changes.next().await.unwrap()["session"].clone();
    assert_eq!(first["kind"], "SESSION");
    let message = |text: &str| {
        a.ok(
            "mutation ($e: ID!, $c: String!) { appendMessage(input: { executionId: $e, role: USER, content: $c }) { uuid } }",
            json!({ "e": lead, "c": text }),
        )
    };
    message("one").await;
    let one = loop {
        let next = changes.next().await.unwrap()["session"].clone();
        if next["kind"] == "MESSAGE" {
            break next;
        }
    };
    assert_eq!(one["message"]["content"], "one");
    let other = a.session().await;
    let created = dashboard.next().await.unwrap()["sessions"].clone();
    assert_eq!(
        (
            created["action"].as_str(),
            created["session"]["uuid"].as_str()
        ),
        (Some("CREATED"), Some(other.as_str()))
    );
    changes.disconnect().await;
    dashboard.disconnect().await;

    // Missed while away: two messages, a stage, two status changes elsewhere.
    message("two").await;
    a.stage(&session, 1, 1, None).await;
    message("three").await;
    a.ok(
        "mutation ($id: ID!) { startSession(id: $id) { status } }",
        json!({ "id": other }),
    )
    .await;
    a.ok(
        "mutation ($id: ID!) { failSession(input: { id: $id, errorMessage: \"no data\" }) { status } }",
        json!({ "id": other }),
    )
    .await;

    let mut changes = Subscription::start(
        app.addr,
        false,
        json!({}),
        query,
        json!({ "s": session, "after": one["cursor"] }),
    )
    .await;
    let mut missed = Vec::new();
    while missed
        .iter()
        .filter(|c: &&Value| c["kind"] == "MESSAGE")
        .count()
        < 2
    {
        missed.push(changes.next().await.unwrap()["session"].clone());
    }
    let kinds: Vec<&str> = missed.iter().map(|c| c["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["MESSAGE", "STAGE", "MESSAGE"], "{missed:#?}");
    assert_eq!(missed[0]["message"]["content"], "two");
    assert_eq!(missed[2]["message"]["content"], "three");
    changes.disconnect().await;

    let mut dashboard = Subscription::start(
        app.addr,
        false,
        json!({}),
        feed,
        json!({ "after": created["cursor"] }),
    )
    .await;
    let mut statuses = Vec::new();
    for _ in 0..2 {
        let entry = dashboard.next().await.unwrap()["sessions"].clone();
        assert_eq!(entry["session"]["uuid"], other.as_str());
        statuses.push(entry["status"].as_str().unwrap().to_owned());
    }
    assert_eq!(statuses, ["IN_PROGRESS", "FAILED"]);
    dashboard.disconnect().await;
    let _ = stage;
    app.stop().await;
}

/// A notification's life in its session's stream: written with the completion, then each
/// outcome a worker reports (a claim is not an event), on the subscription and the plain
/// stream alike.
#[tokio::test]
async fn notifications_take_their_place_in_the_event_stream() {
    const NOTIFICATION_EVENTS: &str = "subscription ($s: ID!, $f: EventFilterInput) {
      events(sessionId: $s, filter: $f) {
        type source { agentName }
        data { ... on NotificationChange { status previousStatus
                                           notification { destination status } } } } }";
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let session = a.session().await;
    a.ok(
        "mutation ($id: ID!) { startSession(id: $id) { status } }",
        json!({ "id": session }),
    )
    .await;
    let mut sub = Subscription::start(
        app.addr,
        false,
        json!({}),
        NOTIFICATION_EVENTS,
        json!({ "s": session, "f": { "categories": ["NOTIFICATION"] } }),
    )
    .await;
    a.ok(
        "mutation ($id: ID!) { completeSession(input: { id: $id, finalAnalysis: \"done\",
           notify: [{ type: SLACK, destination: \"#ok\" },
                    { type: EMAIL, destination: \"gone@example.com\", maxAttempts: 1 },
                    { type: WEBHOOK, destination: \"https://hooks/1\", maxAttempts: 2 }] })
           { status } }",
        json!({ "id": session }),
    )
    .await;
    let claim = uuid::Uuid::now_v7().to_string();
    let claimed = a
        .ok(
            "mutation ($c: UUID!) { claimNotifications(claimId: $c, limit: 10, leaseSeconds: 60)
               { id sessionId destination } }",
            json!({ "c": claim }),
        )
        .await;
    let of = |destination: &str| {
        let n = claimed["claimNotifications"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["destination"] == destination)
            .unwrap();
        json!({ "sessionId": n["sessionId"], "id": n["id"] })
    };
    a.ok(
        "mutation ($n: NotificationRef!, $c: UUID!) {
           markNotificationSent(notification: $n, claimId: $c) { status } }",
        json!({ "n": of("#ok"), "c": claim }),
    )
    .await;
    a.ok(
        "mutation ($n: NotificationRef!) { markNotificationDelivered(notification: $n) { status } }",
        json!({ "n": of("#ok") }),
    )
    .await;
    for destination in ["gone@example.com", "https://hooks/1"] {
        a.ok(
            "mutation ($n: NotificationRef!, $c: UUID!) {
               markNotificationFailed(notification: $n, claimId: $c, error: \"503\") { status } }",
            json!({ "n": of(destination), "c": claim }),
        )
        .await;
    }
    let mut events = Vec::new();
    while events.len() < 7 {
        let event = tokio::time::timeout(std::time::Duration::from_secs(20), sub.next())
            .await
            .unwrap_or_else(|_| panic!("7 notification events within 20 s; got {events:#?}"))
            .expect("an event")["events"]
            .clone();
        events.push(event);
    }
    let seen: Vec<(String, String, Value)> = events
        .iter()
        .map(|e| {
            assert_eq!(e["source"]["agentName"], "orchestrator", "{e}");
            (
                e["type"].as_str().unwrap().to_owned(),
                e["data"]["status"].as_str().unwrap().to_owned(),
                e["data"]["previousStatus"].clone(),
            )
        })
        .collect();
    let expected = [
        ("notification.created", "PENDING", Value::Null),
        ("notification.created", "PENDING", Value::Null),
        ("notification.created", "PENDING", Value::Null),
        ("notification.sent", "SENT", json!("SENDING")),
        ("notification.delivered", "DELIVERED", json!("SENT")),
        ("notification.failed", "FAILED", json!("SENDING")),
        ("notification.failed", "PENDING", json!("SENDING")),
    ]
    .map(|(t, s, p)| (t.to_owned(), s.to_owned(), p));
    assert_eq!(seen, expected);
    assert_eq!(
        events[4]["data"]["notification"],
        json!({ "destination": "#ok", "status": "DELIVERED" })
    );
    sub.disconnect().await;

    // The plain stream says the same, from the database.
    let url = app.url(&format!(
        "/sessions/{session}/events?categories=notification"
    ));
    let mut stream = PlainStream::open(url, &[]).await.unwrap();
    let mut plain = Vec::new();
    while plain.len() < 7 {
        plain.push(stream.next().await.1);
    }
    assert_eq!(
        plain[0]["event"],
        json!({ "category": "notification", "action": "created" })
    );
    assert_eq!(
        plain[5]["event"],
        json!({ "category": "notification", "action": "failed" })
    );
    assert_eq!(plain[5]["data"]["status"], "failed");
    assert_eq!(plain[5]["data"]["previous_status"], "sending");
    assert!(plain[5]["data"]["notification_id"].is_string());
    app.stop().await;
}

/// The orchestrator as seed 004's `source`, plain (the session's UUID as its id).
fn orchestrator(session: &str) -> Value {
    json!({ "agent_id": session, "agent_type": "global_supervisor", "agent_name": "orchestrator",
            "team_name": null })
}

/// Seed 004's envelope on both renderings: every event has a source (what concerns the session
/// as a whole, the orchestrator's), the session's completion carries its summary and its
/// failure its error, and `system.topology`'s `hierarchy` is a record of the tree.
#[tokio::test]
async fn the_sessions_own_events_carry_a_source_its_outcome_and_a_hierarchy() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let (session, stage, lead) = supervisor(&a).await;
    let url = app.url(&format!("/sessions/{session}/events?topology=true"));
    let mut plain = PlainStream::open(url.clone(), &[]).await.unwrap();
    let (_, empty) = plain.next().await;
    assert_eq!(empty["event"]["action"], "topology");
    assert_eq!(empty["source"], orchestrator(&session));
    assert_eq!(empty["data"]["hierarchy"], json!({}), "nothing yet at 0");
    let team = dispatch(&a, &stage, 2, &lead, "TEAM_SUPERVISOR", Some("pods")).await;
    let worker = dispatch(&a, &stage, 3, &team, "WORKER", None).await;
    for agent in [&worker, &team, &lead] {
        a.start(agent).await;
        a.finish(agent, "COMPLETED", None).await;
    }
    let complete = "mutation ($id: ID!, $e: String) { completeSession(input: { id: $id,
        finalAnalysis: \"the pods ran out of memory\", executiveSummary: $e }) { status } }";
    a.ok(complete, json!({ "id": session, "e": "two OOM kills" }))
        .await;

    // The plain stream, live: a source on every event, the session's completion its summary.
    let mut last = Value::Null;
    while !(last["data"]["subject"] == "session" && last["event"]["action"] == "completed") {
        last = plain.next().await.1;
        let source = &last["source"];
        assert!(source["agent_id"].is_string(), "{last}");
        if last["data"]["subject"] == "session" || last["event"]["category"] == "stage" {
            assert_eq!(source, &orchestrator(&session), "{last}");
        }
    }
    assert_eq!(last["data"]["summary"], "two OOM kills");
    drop(plain);
    let at = last["sequence"].as_i64().unwrap();
    let mut plain = PlainStream::open(format!("{url}&after={at}"), &[])
        .await
        .unwrap();
    let (_, snapshot) = plain.next().await;
    let node = |id: &str, kind: &str, name: &str, team: Value, children: Value| {
        json!({ id: { "agent_id": id, "agent_type": kind, "agent_name": name, "team_name": team,
                      "status": "completed", "children": children } })
    };
    let tree = |id: &dyn Fn(&str) -> String| {
        let worker = node(&id(&worker), "worker", "Sub", json!("pods"), json!({}));
        let team = node(&id(&team), "team_supervisor", "Sub", json!("pods"), worker);
        node(&id(&lead), "global_supervisor", "Lead", Value::Null, team)
    };
    assert_eq!(snapshot["data"]["hierarchy"], tree(&|id| id.to_owned()));
    drop(plain);

    // The GraphQL rendering: the log's pages and the subscription's snapshot.
    let gid = |node, id: &str| casefile::api::ids::encode(node, id.parse().unwrap()).0;
    use casefile::api::ids::NodeType;
    let page = a
        .ok(
            "query ($s: ID!) { session(id: $s) { eventsConnection(first: 100) { edges { node {
               type source { agentId agentType agentName teamName orchestrator
                             execution { id } }
               data { ... on SessionLifecycle { status summary error } } } } } } }",
            json!({ "s": session }),
        )
        .await;
    let events = page["session"]["eventsConnection"]["edges"]
        .as_array()
        .unwrap();
    let orchestrated = json!({ "agentId": gid(NodeType::Session, &session),
        "agentType": "GLOBAL_SUPERVISOR", "agentName": "orchestrator", "teamName": null,
        "orchestrator": true, "execution": null });
    for edge in events {
        let event = &edge["node"];
        assert!(event["source"]["agentId"].is_string(), "{event}");
        if event["data"]["status"].is_string() {
            assert_eq!(event["source"], orchestrated, "{event}");
        }
    }
    // The orchestrator's `agentId` filters as an agent's does: exactly its events.
    let own: Vec<&Value> = events
        .iter()
        .map(|e| &e["node"])
        .filter(|e| e["source"]["orchestrator"] == true)
        .collect();
    let filtered = a
        .ok(
            "query ($s: ID!, $f: EventFilterInput) { session(id: $s) {
               eventsConnection(first: 100, filter: $f) { edges { node { type source {
                 agentId agentType agentName teamName orchestrator execution { id } }
               data { ... on SessionLifecycle { status summary error } } } } } } }",
            json!({ "s": session, "f": { "agentIds": [gid(NodeType::Session, &session)] } }),
        )
        .await;
    let filtered: Vec<&Value> = filtered["session"]["eventsConnection"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["node"])
        .collect();
    assert_eq!(filtered, own);
    let url = app.url(&format!("/sessions/{session}/events?agents={session}"));
    let mut plain = PlainStream::open(url, &[]).await.unwrap();
    for expected in &own {
        let (_, event) = plain.next().await;
        assert_eq!(event["source"], orchestrator(&session), "{event}");
        let kind = format!(
            "{}.{}",
            event["event"]["category"].as_str().unwrap(),
            event["event"]["action"].as_str().unwrap()
        );
        assert_eq!(expected["type"], kind.as_str(), "{event}");
    }
    drop(plain);
    let completed = &events.last().unwrap()["node"];
    assert_eq!(completed["type"], "lifecycle.completed");
    assert_eq!(
        completed["data"],
        json!({ "status": "COMPLETED", "summary": "two OOM kills", "error": null })
    );
    let mut sub = Subscription::start(
        app.addr,
        false,
        json!({}),
        "subscription ($s: ID!, $after: String) {
           events(sessionId: $s, after: $after, topology: true) {
             type source { orchestrator } data { ... on Topology { hierarchy } } } }",
        json!({ "s": session, "after": edge_cursor(&a, &session).await }),
    )
    .await;
    let snapshot = sub.next().await.expect("the snapshot")["events"].clone();
    assert_eq!(snapshot["type"], "system.topology");
    assert_eq!(snapshot["source"]["orchestrator"], true);
    let global = |id: &str| gid(NodeType::AgentExecution, id);
    assert_eq!(snapshot["data"]["hierarchy"], tree(&global));
    drop(sub);

    // A failure carries its error; a completion without an executive summary its analysis.
    let (failed, done) = (a.session().await, a.session().await);
    for id in [&failed, &done] {
        a.ok(
            "mutation ($id: ID!) { startSession(id: $id) { status } }",
            json!({ "id": id }),
        )
        .await;
    }
    a.ok(
        "mutation ($id: ID!) { failSession(input: { id: $id, errorMessage: \"no cluster\" })
           { status } }",
        json!({ "id": failed }),
    )
    .await;
    a.ok(complete, json!({ "id": done, "e": null })).await;
    for (id, action, data) in [
        (&failed, "failed", json!({ "error": "no cluster" })),
        (
            &done,
            "completed",
            json!({ "summary": "the pods ran out of memory" }),
        ),
    ] {
        let url = app.url(&format!("/sessions/{id}/events"));
        let mut plain = PlainStream::open(url, &[]).await.unwrap();
        let mut event = Value::Null;
        while event["event"]["action"] != action {
            event = plain.next().await.1;
            assert_eq!(event["source"], orchestrator(id), "{event}");
        }
        for (key, value) in data.as_object().unwrap() {
            assert_eq!(&event["data"][key], value, "{event}");
        }
        let page = a
            .ok(
                "query ($s: ID!) { session(id: $s) { eventsConnection(last: 1) { edges { node {
                   data { ... on SessionLifecycle { summary error } } } } } } }",
                json!({ "s": id }),
            )
            .await;
        let last = &page["session"]["eventsConnection"]["edges"][0]["node"]["data"];
        let key = data.as_object().unwrap().keys().next().unwrap();
        assert_eq!(&last[key], &data[key], "{page}");
    }
    app.stop().await;
}

/// The cursor of a session's last event.
async fn edge_cursor(a: &Agent<'_>, session: &str) -> String {
    let page = a
        .ok(
            "query ($s: ID!) { session(id: $s) { eventsConnection(last: 1) {
               edges { cursor } } } }",
            json!({ "s": session }),
        )
        .await;
    page["session"]["eventsConnection"]["edges"][0]["cursor"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// A chat's deletion and restore reach the plain stream (which the share page follows) as
/// `chat` events naming the chat, after its opening.
#[tokio::test]
async fn a_chats_deletion_and_restore_are_chat_events_on_the_plain_stream() {
    let app = TestApp::start().await;
    let d = app
        .data(
            "mutation { createSession(input: { alertType: \"Disk\", chainId: \"c\" }) { uuid } }",
            json!({}),
        )
        .await;
    let session = d["createSession"]["uuid"].as_str().unwrap().to_owned();
    let d = app
        .data(
            "mutation ($id: ID!) { startSession(id: $id) { status }
               completeSession(input: { id: $id }) { status }
               openChat(input: { sessionId: $id }) { id uuid } }",
            json!({ "id": session }),
        )
        .await;
    let (chat, uuid) = (&d["openChat"]["id"], &d["openChat"]["uuid"]);
    app.data(
        "mutation ($c: ID!) { deleteChat(input: { id: $c }) { id } }",
        json!({ "c": chat }),
    )
    .await;
    app.data(
        "mutation ($c: ID!) { restoreChat(input: { id: $c }) { id } }",
        json!({ "c": chat }),
    )
    .await;
    let url = app.url(&format!("/sessions/{session}/events?categories=chat"));
    let mut stream = PlainStream::open(url, &[]).await.unwrap();
    for action in ["opened", "deleted", "restored"] {
        let (_, event) = stream.next().await;
        assert_eq!(
            event["event"],
            json!({ "category": "chat", "action": action })
        );
        assert_eq!(event["data"], json!({ "chat_id": uuid }), "{event}");
    }
    app.stop().await;
}
