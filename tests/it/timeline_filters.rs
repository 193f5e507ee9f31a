//! Timelines narrowed to event types and states, as context builders read them: connections of
//! a session, stage and execution, and the `timeline` subscription.

use serde_json::{Value, json};

use crate::common::TestApp;
use crate::common::sse::SseSubscription;
use crate::write_api::Agent;

/// Creates an event of `event_type` with `content`; returns its id.
async fn event(
    a: &Agent<'_>,
    execution: &str,
    event_type: &str,
    status: &str,
    content: &str,
) -> String {
    let d = a
        .ok(
            "mutation ($e: ID!, $t: TimelineEventType!, $s: TimelineEventStatus!, $c: String!) {
               createTimelineEvent(input: { executionId: $e, eventType: $t, status: $s, content: $c }) { uuid } }",
            json!({ "e": execution, "t": event_type, "s": status, "c": content }),
        )
        .await;
    d["createTimelineEvent"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The contents of a connection's events, and its page info.
fn contents(connection: &Value) -> (Vec<String>, Value) {
    let edges = connection["edges"].as_array().unwrap();
    (
        edges
            .iter()
            .map(|e| e["node"]["content"].as_str().unwrap().to_owned())
            .collect(),
        connection["pageInfo"].clone(),
    )
}

struct Investigation {
    session: String,
    stage_a: String,
    e1: String,
    e3: String,
}

/// Stage A runs e1 and e2, stage B runs e3; each leaves thinking, tool calls and an analysis.
async fn investigation(a: &Agent<'_>) -> Investigation {
    let session = a.session().await;
    let stage_a = a.stage(&session, 0, 2, Some("ALL")).await;
    let stage_b = a.stage(&session, 1, 1, None).await;
    let (e1, e2) = (
        a.execution(&stage_a, 1, "K8s").await,
        a.execution(&stage_a, 2, "Logs").await,
    );
    let e3 = a.execution(&stage_b, 1, "Synthesis").await;
    for e in [&e1, &e2, &e3] {
        a.start(e).await;
    }
    event(a, &e1, "LLM_THINKING", "COMPLETED", "t1").await;
    event(a, &e1, "MCP_TOOL_CALL", "COMPLETED", "call1").await;
    event(a, &e1, "FINAL_ANALYSIS", "COMPLETED", "fa1").await;
    event(a, &e2, "MCP_TOOL_CALL", "STREAMING", "call2").await;
    event(a, &e2, "FINAL_ANALYSIS", "COMPLETED", "fa2").await;
    event(a, &e3, "FINAL_ANALYSIS", "COMPLETED", "fa3").await;
    event(a, &e3, "LLM_RESPONSE", "STREAMING", "r3").await;
    Investigation {
        session,
        stage_a,
        e1,
        e3,
    }
}

const PAGE: &str = "edges { cursor node { content } } pageInfo { hasPreviousPage hasNextPage endCursor startCursor }";

#[tokio::test]
async fn timelines_filter_by_event_type_and_state_on_every_parent() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let i = investigation(&a).await;
    let session_timeline = |args: &str| {
        let after = if args.contains("$after") {
            ", $after: String"
        } else {
            ""
        };
        format!(
            "query ($s: ID!, $f: TimelineFilter{after}) {{ session(id: $s) {{ timeline({args}) {{ {PAGE} }} }} }}"
        )
    };
    let analyses = json!({ "eventTypes": ["FINAL_ANALYSIS"] });

    // A page at a time, with page info about the filtered timeline.
    let q = session_timeline("first: 2, after: $after, filter: $f");
    let d = a.ok(&q, json!({ "s": i.session, "f": analyses })).await;
    let (texts, info) = contents(&d["session"]["timeline"]);
    assert_eq!(texts, ["fa1", "fa2"]);
    assert_eq!(info["hasNextPage"], true, "{info}");
    assert_eq!(info["hasPreviousPage"], false, "{info}");
    let d = a
        .ok(
            &q,
            json!({ "s": i.session, "f": analyses, "after": info["endCursor"] }),
        )
        .await;
    let (texts, info) = contents(&d["session"]["timeline"]);
    assert_eq!(texts, ["fa3"]);
    assert_eq!(info["hasPreviousPage"], true, "{info}");
    assert_eq!(info["hasNextPage"], false, "{info}");
    // Backward from the end.
    let q = session_timeline("last: 2, filter: $f");
    let d = a.ok(&q, json!({ "s": i.session, "f": analyses })).await;
    let (texts, info) = contents(&d["session"]["timeline"]);
    assert_eq!(texts, ["fa2", "fa3"]);
    assert_eq!(info["hasPreviousPage"], true, "{info}");

    // Several types; states; both; none.
    let q = session_timeline("filter: $f");
    let cases = [
        (
            json!({ "eventTypes": ["MCP_TOOL_CALL", "LLM_THINKING"] }),
            vec!["t1", "call1", "call2"],
        ),
        (json!({ "status": ["STREAMING"] }), vec!["call2", "r3"]),
        (
            json!({ "eventTypes": ["MCP_TOOL_CALL"], "status": ["COMPLETED"] }),
            vec!["call1"],
        ),
        (json!({ "eventTypes": [] }), vec![]),
        (
            json!({}),
            vec!["t1", "call1", "fa1", "call2", "fa2", "fa3", "r3"],
        ),
    ];
    for (filter, expected) in cases {
        let d = a.ok(&q, json!({ "s": i.session, "f": filter })).await;
        assert_eq!(contents(&d["session"]["timeline"]).0, expected, "{filter}");
    }

    // A stage's analyses, an agent's tool calls: the context builder's reads (in one query,
    // two filters).
    let d = a
        .ok(
            &format!(
                "query ($s: ID!, $f: TimelineFilter, $g: TimelineFilter) {{ session(id: $s) {{
                   stages {{ uuid timeline(filter: $f) {{ {PAGE} }} }}
                   agents {{ uuid timeline(filter: $g) {{ {PAGE} }} }} }} }}"
            ),
            json!({ "s": i.session, "f": analyses, "g": { "eventTypes": ["MCP_TOOL_CALL"] } }),
        )
        .await;
    let of = |list: &str, id: &str| -> Vec<String> {
        let found = d["session"][list]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["uuid"] == id)
            .unwrap();
        contents(&found["timeline"]).0
    };
    assert_eq!(of("stages", &i.stage_a), ["fa1", "fa2"]);
    assert_eq!(of("agents", &i.e1), ["call1"]);
    assert_eq!(of("agents", &i.e3), Vec::<String>::new());
    app.stop().await;
}

/// The kinds and contents of updates until `until` is the content of a finished event.
async fn updates_until(sub: &mut SseSubscription, until: &str) -> Vec<(String, String)> {
    let mut seen = Vec::new();
    loop {
        let update = sub.next().await.unwrap()["timeline"].clone();
        let kind = update["kind"].as_str().unwrap().to_owned();
        let text = match kind.as_str() {
            "APPENDED" => update["delta"].as_str().unwrap().to_owned(),
            _ => update["event"]["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        };
        let done = kind == "FINISHED" && text == until;
        seen.push((kind, text));
        if done {
            return seen;
        }
    }
}

/// The contents of the events that finished among `updates`.
fn finished(updates: &[(String, String)]) -> Vec<&str> {
    updates
        .iter()
        .filter(|(kind, _)| kind == "FINISHED")
        .map(|(_, text)| text.as_str())
        .collect()
}

#[tokio::test]
async fn the_timeline_subscription_follows_only_the_types_asked_for() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let i = investigation(&a).await;
    let subscription = "subscription ($s: ID!, $t: [TimelineEventType!], $after: String) {
        timeline(sessionId: $s, eventTypes: $t, after: $after) { kind delta event { content } cursor } }";
    let mut sub = SseSubscription::start(
        app.addr,
        subscription,
        json!({ "s": i.session, "t": ["FINAL_ANALYSIS"] }),
    )
    .await;
    // The replay: the analyses, nothing else.
    let replayed = updates_until(&mut sub, "fa3").await;
    assert_eq!(finished(&replayed), ["fa1", "fa2", "fa3"], "{replayed:?}");
    // Live: a tool call is passed over, the analysis arrives.
    event(&a, &i.e3, "MCP_TOOL_CALL", "COMPLETED", "call3").await;
    event(&a, &i.e3, "FINAL_ANALYSIS", "COMPLETED", "fa4").await;
    let live = updates_until(&mut sub, "fa4").await;
    assert!(live.iter().all(|(_, text)| text != "call3"), "{live:?}");
    assert_eq!(
        live.first().map(|(k, _)| k.as_str()),
        Some("CREATED"),
        "{live:?}"
    );

    // A cursor from a page of analyses resumes a subscription to analyses, not a wider one
    // (that page passed over other events).
    let d = a
        .ok(
            &format!("query ($s: ID!) {{ session(id: $s) {{ timeline(first: 1, filter: {{ eventTypes: [FINAL_ANALYSIS] }}) {{ {PAGE} }} }} }}"),
            json!({ "s": i.session }),
        )
        .await;
    let cursor = d["session"]["timeline"]["pageInfo"]["endCursor"].clone();
    let mut resumed = SseSubscription::start(
        app.addr,
        subscription,
        json!({ "s": i.session, "t": ["FINAL_ANALYSIS"], "after": cursor }),
    )
    .await;
    let rest = updates_until(&mut resumed, "fa4").await;
    assert_eq!(finished(&rest), ["fa2", "fa3", "fa4"], "{rest:?}");
    let refused = SseSubscription::start(
        app.addr,
        subscription,
        json!({ "s": i.session, "after": cursor }),
    )
    .await
    .next()
    .await
    .unwrap_err();
    assert_eq!(
        refused["errors"][0]["extensions"]["code"], "BAD_USER_INPUT",
        "{refused}"
    );
    assert!(
        refused["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("narrower"),
        "{refused}"
    );

    // A page filtered by state resumes no subscription.
    let d = a
        .ok(
            &format!("query ($s: ID!) {{ session(id: $s) {{ timeline(filter: {{ status: [COMPLETED] }}) {{ {PAGE} }} }} }}"),
            json!({ "s": i.session }),
        )
        .await;
    let cursor = d["session"]["timeline"]["pageInfo"]["endCursor"].clone();
    let refused = SseSubscription::start(
        app.addr,
        subscription,
        json!({ "s": i.session, "after": cursor }),
    )
    .await
    .next()
    .await
    .unwrap_err();
    assert!(
        refused["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("filtered by status"),
        "{refused}"
    );
    app.stop().await;
}

/// At volume (one session of 30,000 events, one in 500 an analysis), a page of one type reads
/// the (parent, event_type, sequence_number) index of its parent, never the whole timeline.
#[tokio::test]
async fn a_type_filtered_page_reads_its_index_at_volume() {
    use casefile::model::TimelineEventType;
    use casefile::store::page::Slice;
    use casefile::store::{Key, Scope, TimelineEventRow, TimelineFilter, TimelinePageKey};

    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let i = investigation(&a).await;
    let ids: (uuid::Uuid, uuid::Uuid, uuid::Uuid) = (
        i.session.parse().unwrap(),
        i.stage_a.parse().unwrap(),
        i.e1.parse().unwrap(),
    );
    let mut conn = app.store.pool().acquire().await.unwrap();
    // Rows as an import would write them; the triggers that record live changes are not
    // what is measured here.
    sqlx::query("SET session_replication_role = replica")
        .execute(&mut *conn)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO timeline_events (id, session_id, stage_id, execution_id, sequence_number, \
             event_type, status, content, metadata) \
         SELECT gen_random_uuid(), $1, $2, $3, n, \
                CASE WHEN n % 500 = 0 THEN 'final_analysis' ELSE 'llm_response' END, \
                'completed', 'token', '{}' \
         FROM generate_series(100, 30099) n",
    )
    .bind(ids.0)
    .bind(ids.1)
    .bind(ids.2)
    .execute(&mut *conn)
    .await
    .unwrap();
    sqlx::query("RESET session_replication_role")
        .execute(&mut *conn)
        .await
        .unwrap();
    sqlx::query("ANALYZE timeline_events")
        .execute(&mut *conn)
        .await
        .unwrap();
    drop(conn);

    let filter = TimelineFilter {
        event_types: Some(vec![TimelineEventType::FinalAnalysis]),
        statuses: None,
    };
    for (scope, parent, index) in [
        (Scope::Session, ids.0, "timeline_events_session_type_idx"),
        (Scope::Stage, ids.1, "timeline_events_stage_type_idx"),
        (
            Scope::Execution,
            ids.2,
            "timeline_events_execution_type_idx",
        ),
    ] {
        let key = TimelinePageKey {
            session: ids.0,
            parent,
            slice: Slice {
                after: Some(5_000),
                before: None,
                size: 20,
                from_end: false,
            },
            filter: filter.clone(),
        };
        let plan = app
            .store
            .explain_timeline_pages(scope, &filter, &[key])
            .await
            .unwrap();
        println!("{scope:?}, FINAL_ANALYSIS, 20 after sequence 5,000:\n{plan}\n");
        assert!(
            plan.contains(index),
            "{scope:?} does not read {index}:\n{plan}"
        );
        assert!(!plan.contains("Seq Scan on timeline_events"), "{plan}");
    }
    // An event read from a row at hand (a search match's, a live change's) is read by key,
    // along the primary key, however many events its session has.
    let events: Vec<Key> = sqlx::query_scalar::<_, uuid::Uuid>(
        "SELECT id FROM timeline_events WHERE session_id = $1 AND sequence_number % 1000 = 0",
    )
    .bind(ids.0)
    .fetch_all(app.store.pool())
    .await
    .unwrap()
    .into_iter()
    .map(|id| Key::new(ids.0, id))
    .collect();
    assert_eq!(events.len(), 30);
    let plan = app
        .store
        .explain_by_keys::<TimelineEventRow>(&events)
        .await
        .unwrap();
    assert!(plan.contains("timeline_events_pkey"), "by key:\n{plan}");
    // (On a database partitioned by session, the session's partition is read along its copy
    // of the key, `timeline_events_pkey_pN`; the empty others may be scanned.)
    assert!(!plan.contains("Seq Scan on timeline_events "), "{plan}");
    // And the page is right: the analyses after 5,000, in order.
    let d = a
        .ok(
            &format!("query ($s: ID!, $after: String) {{ session(id: $s) {{ timeline(first: 3, after: $after, filter: {{ eventTypes: [FINAL_ANALYSIS] }}) {{ {PAGE} }} }} }}"),
            json!({ "s": i.session, "after": null }),
        )
        .await;
    assert_eq!(contents(&d["session"]["timeline"]).0, ["fa1", "fa2", "fa3"]);
    app.stop().await;
}
