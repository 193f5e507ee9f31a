//! A session's event log as pages (`Session.eventsConnection`): the `events` subscription's
//! envelopes a page at a time either way, its cursors and filters shared with the subscription.

use serde_json::{Value, json};

use crate::common::TestApp;
use crate::common::ws::Subscription;
use crate::events::{dispatch, supervisor};
use crate::write_api::Agent;

const EVENT: &str = "sequence firstSequence type cursor stageId
    source { agentId agentName }
    data {
      __typename
      ... on TextAppended { offset text }
      ... on Dispatch { agentName task }
      ... on SystemNotice { level code message }
      ... on AgentLifecycle { status summary }
      ... on SessionLifecycle { status previousStatus }
    }";

fn page_query() -> String {
    format!(
        "query ($s: ID!, $first: Int, $after: String, $last: Int, $before: String,
                $f: EventFilterInput) {{
           session(id: $s) {{
             eventsConnection(first: $first, after: $after, last: $last, before: $before,
                              filter: $f) {{
               pageInfo {{ hasPreviousPage hasNextPage startCursor endCursor }}
               edges {{ cursor node {{ {EVENT} }} }} }} }} }}"
    )
}

fn subscription_query() -> String {
    format!(
        "subscription ($s: ID!, $after: String, $f: EventFilterInput) {{
           events(sessionId: $s, after: $after, filter: $f) {{ {EVENT} }} }}"
    )
}

/// One page of the log.
async fn page(app: &TestApp, session: &str, args: Value) -> Value {
    let mut variables = args;
    variables["s"] = json!(session);
    let data = app.data(&page_query(), variables).await;
    data["session"]["eventsConnection"].clone()
}

fn nodes(page: &Value) -> Vec<Value> {
    page["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|edge| {
            assert_eq!(edge["cursor"], edge["node"]["cursor"], "{edge:#}");
            edge["node"].clone()
        })
        .collect()
}

/// The whole log, paged forward `size` at a time.
async fn forward(app: &TestApp, session: &str, size: i64, filter: Value) -> Vec<Value> {
    let mut out = Vec::new();
    let mut after = Value::Null;
    loop {
        let p = page(
            app,
            session,
            json!({ "first": size, "after": after, "f": filter }),
        )
        .await;
        out.extend(nodes(&p));
        if p["pageInfo"]["hasNextPage"] != true {
            return out;
        }
        after = p["pageInfo"]["endCursor"].clone();
    }
}

/// The whole log, paged backward `size` at a time.
async fn backward(app: &TestApp, session: &str, size: i64, filter: Value) -> Vec<Value> {
    let mut pages = Vec::new();
    let mut before = Value::Null;
    loop {
        let p = page(
            app,
            session,
            json!({ "last": size, "before": before, "f": filter }),
        )
        .await;
        pages.push(nodes(&p));
        if p["pageInfo"]["hasPreviousPage"] != true {
            return pages.into_iter().rev().flatten().collect();
        }
        before = p["pageInfo"]["startCursor"].clone();
    }
}

/// What the subscription sends from `after` until the event at position `last`.
async fn streamed(
    app: &TestApp,
    session: &str,
    after: Value,
    filter: Value,
    last: i64,
) -> Vec<Value> {
    let mut sub = Subscription::start(
        app.addr,
        false,
        json!({}),
        &subscription_query(),
        json!({ "s": session, "after": after, "f": filter }),
    )
    .await;
    let mut out: Vec<Value> = Vec::new();
    while out
        .last()
        .is_none_or(|e| e["sequence"].as_i64().unwrap() < last)
    {
        let event = tokio::time::timeout(std::time::Duration::from_secs(20), sub.next())
            .await
            .unwrap_or_else(|_| panic!("nothing within 20 s; got {out:#?}"))
            .expect("an event")["events"]
            .clone();
        out.push(event);
    }
    sub.disconnect().await;
    out
}

/// The streamed events are the paged ones: each the same, except that the stream may merge
/// consecutive appends to one event, which the pages give one per position.
fn assert_same(streamed: &[Value], paged: &[Value]) {
    let mut paged = paged.iter().peekable();
    for event in streamed {
        let (first, last) = (
            event["firstSequence"].as_i64().unwrap(),
            event["sequence"].as_i64().unwrap(),
        );
        let mut covered = Vec::new();
        while let Some(p) = paged.next_if(|p| p["sequence"].as_i64().unwrap() <= last) {
            covered.push(p.clone());
        }
        if first == last {
            assert_eq!(covered, std::slice::from_ref(event), "{event:#}");
            continue;
        }
        assert_eq!(event["type"], "llm.stream", "{event:#}");
        assert_eq!(covered[0]["sequence"].as_i64(), Some(first), "{event:#}");
        assert_eq!(covered[0]["data"]["offset"], event["data"]["offset"]);
        let text: String = covered
            .iter()
            .map(|p| {
                assert_eq!(p["type"], "llm.stream");
                assert_eq!(p["source"], event["source"]);
                p["data"]["text"].as_str().unwrap()
            })
            .collect();
        assert_eq!(text, event["data"]["text"].as_str().unwrap());
        assert_eq!(covered.last().unwrap()["cursor"], event["cursor"]);
    }
    assert!(paged.next().is_none(), "paged beyond what was streamed");
}

/// A finished session with dispatches, streamed text and a warning: (session, its worker).
async fn finished_session(a: &Agent<'_>) -> (String, String) {
    let (session, stage, lead) = supervisor(a).await;
    let team = dispatch(a, &stage, 2, &lead, "TEAM_SUPERVISOR", Some("pods")).await;
    let worker = dispatch(a, &stage, 3, &team, "WORKER", None).await;
    let (event, _) = a.event(&worker, "STREAMING").await;
    let mut offset = 0;
    for piece in "OOMKilled ✓ twice, then 🙂 fine".split_inclusive(' ') {
        a.append(&event, offset, piece).await;
        offset += piece.chars().count() as i64;
    }
    a.ok(
        "mutation ($e: ID!) { recordSystemNotice(input: { executionId: $e, level: WARNING,
           code: \"MCP_SERVER_UNAVAILABLE\", message: \"kubernetes MCP is down\" }) { eventType } }",
        json!({ "e": worker }),
    )
    .await;
    for execution in [&worker, &team, &lead] {
        a.ok(
            "mutation ($w: ID!) { finishAgentExecution(input: { id: $w, status: COMPLETED,
               resultSummary: \"two OOM kills\" }) { status } }",
            json!({ "w": execution }),
        )
        .await;
    }
    a.ok(
        "mutation ($id: ID!) { completeSession(input: { id: $id, finalAnalysis: \"done\" }) {
           status } }",
        json!({ "id": session }),
    )
    .await;
    (session, worker)
}

#[tokio::test]
async fn the_log_pages_both_ways_to_what_the_subscription_replays() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let (session, _) = finished_session(&a).await;

    let all = forward(&app, &session, 3, Value::Null).await;
    let sequences: Vec<i64> = all
        .iter()
        .map(|e| e["sequence"].as_i64().unwrap())
        .collect();
    let expected: Vec<i64> = (1..=all.len() as i64).collect();
    assert_eq!(sequences, expected, "one edge per position, none missing");
    assert!(all.iter().all(|e| e["sequence"] == e["firstSequence"]));
    assert_eq!(backward(&app, &session, 4, Value::Null).await, all);
    assert_eq!(forward(&app, &session, 100, Value::Null).await, all);

    let last = all.len() as i64;
    let replayed = streamed(&app, &session, Value::Null, Value::Null, last).await;
    assert!(
        replayed.iter().any(|e| e["sequence"] != e["firstSequence"]),
        "the replay merges appends: {replayed:#?}"
    );
    assert_same(&replayed, &all);

    // Page edges: the first has nothing before it, the last nothing after it.
    let first = page(&app, &session, json!({ "first": 2 })).await;
    assert_eq!(first["pageInfo"]["hasPreviousPage"], false);
    assert_eq!(first["pageInfo"]["hasNextPage"], true);
    let end = page(&app, &session, json!({ "last": 2 })).await;
    assert_eq!(end["pageInfo"]["hasNextPage"], false);
    assert_eq!(end["pageInfo"]["hasPreviousPage"], true);
    assert_eq!(nodes(&end), all[all.len() - 2..]);
    let counted = app
        .data(
            "query ($s: ID!) { session(id: $s) {
               all: eventsConnection(first: 1) { totalCount }
               some: eventsConnection(first: 1, filter: { categories: [STAGE] }) { totalCount } } }",
            json!({ "s": session }),
        )
        .await;
    assert_eq!(counted["session"]["all"]["totalCount"].as_i64(), Some(last));
    assert!(counted["session"]["some"]["totalCount"].is_null());
    let empty = page(&app, &session, json!({ "first": 0 })).await;
    assert_eq!(nodes(&empty), Vec::<Value>::new());
    assert_eq!(empty["pageInfo"]["hasNextPage"], true);
    app.stop().await;
}

#[tokio::test]
async fn cursors_pass_between_pages_and_the_subscription_both_ways() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let (session, _) = finished_session(&a).await;
    let all = forward(&app, &session, 100, Value::Null).await;
    let last = all.len() as i64;

    // An edge's cursor resumes the subscription right after its event.
    let middle = &all[all.len() / 2];
    let rest = streamed(&app, &session, middle["cursor"].clone(), Value::Null, last).await;
    assert_eq!(
        rest[0]["firstSequence"].as_i64(),
        Some(middle["sequence"].as_i64().unwrap() + 1)
    );
    assert_same(&rest, &all[all.len() / 2 + 1..]);

    // A streamed event's cursor (a merged one among them) pages on from it, either way.
    let replayed = streamed(&app, &session, Value::Null, Value::Null, last).await;
    let merged = replayed
        .iter()
        .find(|e| e["sequence"] != e["firstSequence"])
        .expect("merged appends");
    let at = merged["sequence"].as_i64().unwrap() as usize;
    let after = page(
        &app,
        &session,
        json!({ "first": 3, "after": merged["cursor"] }),
    )
    .await;
    assert_eq!(nodes(&after), all[at..at + 3]);
    assert_eq!(after["pageInfo"]["hasPreviousPage"], true);
    let before = page(
        &app,
        &session,
        json!({ "last": 3, "before": merged["cursor"] }),
    )
    .await;
    assert_eq!(nodes(&before), all[at - 4..at - 1]);
    assert_eq!(before["pageInfo"]["hasNextPage"], true);
    let between = page(
        &app,
        &session,
        json!({ "first": 100, "after": all[1]["cursor"], "before": merged["cursor"] }),
    )
    .await;
    assert_eq!(nodes(&between), all[2..at - 1]);
    app.stop().await;
}

#[tokio::test]
async fn filters_are_the_subscriptions() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let (session, _) = finished_session(&a).await;
    let all = forward(&app, &session, 100, Value::Null).await;

    let categories = json!({ "categories": ["SYSTEM", "DISPATCH"] });
    let kept = forward(&app, &session, 1, categories.clone()).await;
    let types: Vec<&str> = kept.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        ["dispatch.team", "dispatch.worker", "system.warning"]
    );
    assert_eq!(backward(&app, &session, 2, categories.clone()).await, kept);
    let system_last = kept.last().unwrap()["sequence"].as_i64().unwrap();
    assert_same(
        &streamed(&app, &session, Value::Null, categories, system_last).await,
        &kept,
    );

    // One agent: what it is the source of, as the subscription gives it.
    let worker_id =
        all.iter().find(|e| e["type"] == "system.warning").unwrap()["source"]["agentId"].clone();
    let agent = json!({ "agentIds": [worker_id] });
    let its = forward(&app, &session, 2, agent.clone()).await;
    let expected: Vec<Value> = all
        .iter()
        .filter(|e| e["source"]["agentId"] == worker_id)
        .cloned()
        .collect();
    assert_eq!(its, expected);
    assert!(its.iter().any(|e| e["type"] == "llm.stream"), "{its:#?}");
    let its_last = its.last().unwrap()["sequence"].as_i64().unwrap();
    assert_same(
        &streamed(&app, &session, Value::Null, agent, its_last).await,
        &its,
    );

    // A stage: all of this session's events of the stage.
    let stage = all.iter().find_map(|e| e["stageId"].as_str()).unwrap();
    let staged = forward(&app, &session, 5, json!({ "stageIds": [stage] })).await;
    let expected: Vec<Value> = all
        .iter()
        .filter(|e| e["stageId"] == stage)
        .cloned()
        .collect();
    assert_eq!(staged, expected);
    assert!(
        all.len() > staged.len(),
        "the session's own events are not the stage's"
    );
    app.stop().await;
}

#[tokio::test]
async fn bad_cursors_and_sizes_are_bad_input() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let (session, _) = finished_session(&a).await;
    let other = a.session().await;
    let theirs = page(&app, &other, json!({ "first": 1 })).await["edges"][0]["cursor"].clone();
    let timeline_page = app
        .data(
            "query ($s: ID!) { session(id: $s) { timeline(first: 1) { edges { cursor } } } }",
            json!({ "s": session }),
        )
        .await;
    let timeline = timeline_page["session"]["timeline"]["edges"][0]["cursor"].clone();
    for args in [
        json!({ "after": "garbage" }),
        json!({ "before": "eyJldmVudHMiOnt9fQ" }),
        json!({ "after": theirs }),
        json!({ "after": timeline }),
        json!({ "first": 1000 }),
        json!({ "first": 1, "last": 1 }),
        json!({ "f": { "agentIds": ["not an id"] } }),
    ] {
        let mut variables = args.clone();
        variables["s"] = json!(session);
        let (code, message) = app.error(&page_query(), variables).await;
        assert_eq!(code, "BAD_USER_INPUT", "{args}: {message}");
    }
    app.stop().await;
}

#[tokio::test]
async fn a_deleted_sessions_log_reads_as_its_other_connections_do() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let (session, _) = finished_session(&a).await;
    let before = forward(&app, &session, 100, Value::Null).await;
    a.ok(
        "mutation ($s: ID!) { deleteSession(id: $s, reason: \"cleanup\") { uuid } }",
        json!({ "s": session }),
    )
    .await;
    // Looked up by id, a deleted session still answers, its relationships with it.
    let d = app
        .data(
            "query ($s: ID!) { session(id: $s) { deletedAt chatsConnection(first: 1) { totalCount }
               eventsConnection(last: 1) { edges { node { type sequence } } } } }",
            json!({ "s": session }),
        )
        .await;
    assert!(d["session"]["deletedAt"].is_string(), "{d}");
    let deleted = &d["session"]["eventsConnection"]["edges"][0]["node"];
    assert_eq!(deleted["type"], "lifecycle.deleted", "{d}");
    assert_eq!(deleted["sequence"].as_i64(), Some(before.len() as i64 + 1));
    let after = forward(&app, &session, 100, Value::Null).await;
    assert_eq!(after[..before.len()], before[..]);
    app.stop().await;
}

#[tokio::test]
async fn a_page_of_the_log_reads_the_primary_key_either_way() {
    use casefile::store::session_events::{ChangeKind, EventRange};

    let app = TestApp::start().await;
    let mut conn = app.store.pool().acquire().await.unwrap();
    // Rows as an import would write them (the live-change triggers are not measured here).
    for statement in [
        "SET session_replication_role = replica",
        "INSERT INTO session_events (session_id, position, kind, entity_id, stage_id) \
         SELECT s.id, n, CASE WHEN n % 10 = 0 THEN 'stage' ELSE 'message' END::change_kind, \
                gen_random_uuid(), s.id \
         FROM (SELECT gen_random_uuid() AS id FROM generate_series(1, 300)) s, \
              generate_series(1, 100) n",
        // Runs after them, and events (only the plans are read: the runs' logs stay empty). A
        // table analyzed while empty, as a partitioned database's are when converted, is
        // rightly read whole; these are not.
        "INSERT INTO session_event_runs (session_id, first_position, created_at, events, \
                                         appends, log) \
         SELECT s.session_id, 101 + 10 * k, now(), ARRAY[gen_random_uuid()], 10, ''::bytea \
         FROM (SELECT DISTINCT session_id FROM session_events) s, generate_series(0, 9) k",
        "INSERT INTO timeline_events (id, session_id, stage_id, execution_id, sequence_number, \
                                      event_type) \
         SELECT gen_random_uuid(), s.session_id, s.session_id, s.session_id, n, 'llm_response' \
         FROM (SELECT DISTINCT session_id FROM session_events) s, generate_series(1, 10) n",
        "RESET session_replication_role",
        "ANALYZE session_events",
        "ANALYZE session_event_runs",
        "ANALYZE timeline_events",
    ] {
        sqlx::query(statement).execute(&mut *conn).await.unwrap();
    }
    let session: uuid::Uuid = sqlx::query_scalar("SELECT session_id FROM session_events LIMIT 1")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    drop(conn);
    let ranges = [
        EventRange {
            session,
            after: 10,
            ..EventRange::default()
        },
        EventRange {
            session,
            after: 10,
            before: Some(90),
            kinds: vec![ChangeKind::Stage],
            stages: vec![session],
            executions: vec![session],
        },
    ];
    for range in &ranges {
        for backward in [false, true] {
            let plan = app
                .store
                .explain_session_events_in(range, backward, 21)
                .await
                .unwrap();
            assert!(plan.contains("session_events_pkey"), "{plan}");
            assert!(!plan.contains("Seq Scan"), "a sequential scan:\n{plan}");
            // Unfiltered, the page's rows are read in order and stop at its size (only the
            // changes of those rows are sorted); a filter the planner expects few rows to pass
            // may be checked on the session's range first.
            if range.kinds.is_empty() {
                let nodes: Vec<&str> = plan.lines().filter(|l| l.contains("->")).collect();
                let scan = nodes
                    .iter()
                    .position(|l| l.contains("session_events_pkey"))
                    .unwrap();
                assert!(
                    scan > 0 && nodes[scan - 1].contains("Limit"),
                    "the rows are sorted, not read in order:\n{plan}"
                );
            }
        }
    }
    app.stop().await;
}
