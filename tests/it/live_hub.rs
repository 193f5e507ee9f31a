//! The per-process hub that feeds live subscriptions: late commits, failed reads, start-up,
//! the dashboard feed, NOTIFY per transaction, pruning, and slow subscribers' byte budget.

use casefile::live::{Change, Hub, HubOptions};
use serde_json::{Value, json};

use crate::common::TestApp;
use crate::common::ws::Subscription;
use crate::live::running_execution;
use crate::write_api::Agent;

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
    let Some((app, _)) = TestApp::start_external("holding a transaction open").await else {
        return;
    };
    let a = Agent { app: &app };
    let session = a.session().await;
    // The dashboard feed: each message carries the status the change itself recorded.
    let mut sub = Subscription::start(
        app.addr,
        false,
        json!({}),
        "subscription { sessions { status session { uuid } } }",
        json!({}),
    )
    .await;
    // A slow batch: its change id is taken now, committed only after other sessions'
    // changes and after longer than any time limit on waiting for it.
    let mut slow = app.store.pool().begin().await.unwrap();
    sqlx::query(
        "UPDATE sessions SET status = 'in_progress', started_at = now() WHERE id = $1::uuid",
    )
    .bind(&session)
    .execute(&mut *slow)
    .await
    .unwrap();
    for _ in 0..3 {
        a.session().await;
    }
    tokio::time::sleep(std::time::Duration::from_secs(12)).await;
    slow.commit().await.unwrap();
    // Other sessions' creations come first (and maybe this one's, if the subscription started
    // before the hub had read it); then the slow batch's own change.
    loop {
        let change = sub.next().await.expect("the slow batch's change")["sessions"].clone();
        if change["session"]["uuid"] == session.as_str() && change["status"] == "IN_PROGRESS" {
            break;
        }
    }
    sub.disconnect().await;
    app.stop().await;
}

#[tokio::test]
async fn a_change_whose_reading_failed_is_read_again() {
    let Some((app, url)) = TestApp::start_external("a second hub").await else {
        return;
    };
    // A hub whose reads of appended text fail while `faulty.switch` says so.
    for statement in [
        "CREATE SCHEMA faulty",
        "CREATE TABLE faulty.switch (ok int NOT NULL)",
        "INSERT INTO faulty.switch VALUES (1)",
        "CREATE VIEW faulty.timeline_event_chunks AS SELECT * FROM public.timeline_event_chunks \
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
    let Some((app, url)) = TestApp::start_external("LISTEN").await else {
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
