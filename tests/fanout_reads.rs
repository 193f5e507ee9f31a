//! An update is read from the database once per process, however many subscribers follow it;
//! a token is looked up once per cache period, however many requests carry it.
//! Statements are recorded where sqlx runs them (see `common::statements`); this file is its
//! own test binary so that no other test's statements are counted.

#[path = "it/common/mod.rs"]
mod common;

use serde_json::{Value, json};

use common::ws::Subscription;
use common::{TestApp, statements};

async fn gql(app: &TestApp, query: &str, variables: Value) -> Value {
    app.data(query, variables).await
}

/// A new session's uuid.
async fn new_session(app: &TestApp) -> Value {
    gql(
        app,
        "mutation { createSession(input: { alertType: \"A\", chainId: \"c\" }) { uuid } }",
        json!({}),
    )
    .await["createSession"]["uuid"]
        .clone()
}

/// Appends one delta while `subscribers` follow the session; returns how many statements read
/// appended text (the hub's per-change read).
async fn delta_reads(app: &TestApp, subscribers: usize) -> usize {
    let s = new_session(app).await;
    let st = gql(app, "mutation ($s: ID!) { createStage(input: { sessionId: $s, stageIndex: 0, name: \"S\" }) { uuid } }", json!({ "s": s })).await["createStage"]["uuid"].clone();
    let e = gql(app, "mutation ($s: ID!) { createAgentExecution(input: { stageId: $s, agentIndex: 1, agentName: \"A\", iterationStrategy: \"react\" }) { uuid } }", json!({ "s": st })).await["createAgentExecution"]["uuid"].clone();
    let query = "subscription ($s: ID!) { timeline(sessionId: $s) { kind delta } }";
    let mut subs = Vec::new();
    for _ in 0..subscribers {
        subs.push(Subscription::start(app.addr, false, json!({}), query, json!({ "s": s })).await);
    }
    let ev = gql(app, "mutation ($e: ID!) { createTimelineEvent(input: { executionId: $e, eventType: LLM_RESPONSE }) { uuid } }", json!({ "e": e })).await["createTimelineEvent"]["uuid"].clone();
    // Every subscriber is live once it has seen the event created.
    for sub in &mut subs {
        assert_eq!(sub.next().await.unwrap()["timeline"]["kind"], "CREATED");
    }
    statements::clear();
    gql(app, "mutation ($e: ID!) { appendTimelineContent(input: { eventId: $e, offset: 0, delta: \"hello\" }) { end } }", json!({ "e": ev })).await;
    for sub in &mut subs {
        assert_eq!(sub.next().await.unwrap()["timeline"]["delta"], "hello");
    }
    let reads =
        statements::settled_count(|s| s.contains("timeline_event_chunks") && s.contains("unnest"))
            .await;
    for sub in subs {
        sub.disconnect().await;
    }
    reads
}

/// Adds a stage while `subscribers` follow the session's changes, each selecting the stage;
/// returns how many statements read stages by id.
async fn stage_reads(app: &TestApp, subscribers: usize) -> usize {
    let s = new_session(app).await;
    let query = "subscription ($s: ID!) { session(id: $s) { kind stage { name status } } }";
    let mut subs = Vec::new();
    for _ in 0..subscribers {
        let mut sub =
            Subscription::start(app.addr, false, json!({}), query, json!({ "s": s })).await;
        assert_eq!(sub.next().await.unwrap()["session"]["kind"], "SESSION");
        subs.push(sub);
    }
    statements::clear();
    gql(app, "mutation ($s: ID!) { createStage(input: { sessionId: $s, stageIndex: 0, name: \"S\" }) { uuid } }", json!({ "s": s })).await;
    for sub in &mut subs {
        loop {
            let change = sub.next().await.unwrap()["session"].clone();
            if change["kind"] == "STAGE" {
                assert_eq!(change["stage"]["name"], "S");
                break;
            }
        }
    }
    let reads = statements::settled_count(|s| {
        // One stage: read by key, within its session.
        s.contains("FROM stages t WHERE id = k.id AND session_id =")
    })
    .await;
    for sub in subs {
        sub.disconnect().await;
    }
    reads
}

/// Sends `requests` queries with one token; returns how many statements looked it up and how
/// many wrote its last use.
async fn token_statements(app: &TestApp, requests: usize) -> (usize, usize) {
    let name = format!("t{requests}");
    let secret = app.token(&name, casefile::model::Role::Reader, None).await;
    statements::clear();
    for _ in 0..requests {
        let response = app
            .client
            .post(app.url("/graphql"))
            .bearer_auth(&secret)
            .json(&json!({ "query": "{ viewer { role } }" }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    // The last-use write runs in the background.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let statements = statements::recorded();
    let count = |needle: &str| statements.iter().filter(|s| s.contains(needle)).count();
    (
        count("FROM api_tokens WHERE secret_hash"),
        count("UPDATE api_tokens SET last_used_at"),
    )
}

#[tokio::test]
async fn reads_do_not_grow_with_subscribers_or_requests() {
    statements::record();
    let app = TestApp::start().await;
    let one = delta_reads(&app, 1).await;
    let many = delta_reads(&app, 25).await;
    println!("reads of an appended delta: {one} with 1 subscriber, {many} with 25");
    // Once per change, not per subscriber. A loaded machine may read it once more (CI saw 2
    // with 1 subscriber): the follower reads a change it skipped over again, and a subscriber
    // told it may have missed changes replays them. 25 subscribers reading apart would be 25.
    let once = 1..=2;
    assert!(once.contains(&one) && once.contains(&many), "{one}, {many}");
    // The record a session change names, likewise.
    let one = stage_reads(&app, 1).await;
    let many = stage_reads(&app, 25).await;
    println!("reads of a changed stage: {one} with 1 subscriber, {many} with 25");
    assert!(once.contains(&one) && once.contains(&many), "{one}, {many}");
    app.stop().await;

    let mut options = casefile::http::HttpOptions::default();
    options.auth.mode = casefile::auth::AuthMode::Tokens;
    let app = TestApp::start_with(options).await;
    for requests in [1, 50] {
        let (lookups, touches) = token_statements(&app, requests).await;
        println!(
            "a token used by {requests} requests: {lookups} lookups, {touches} last-use writes"
        );
        assert_eq!((lookups, touches), (1, 1));
    }
    app.stop().await;
}
