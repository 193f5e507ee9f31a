//! The per-process hub that feeds live subscriptions: late commits, failed reads, start-up,
//! commits read at once only while watched, the dashboard feed, one announcement per burst of
//! commits, pruning below every reader's position, a log pruned past a process or reset by a
//! crash, a long transaction awaited, and slow subscribers' byte budget.

use std::time::Duration;

use casefile::cursor::{TimelinePosition, View};
use casefile::live::timeline::Update;
use casefile::live::{Change, Hub, HubOptions, Interrupted};
use casefile::model::{SessionStatus, Status, Transition};
use casefile::store::change_log::LogKey;
use casefile::store::session_events::ChangeKind;
use futures::StreamExt as _;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::common::ws::Subscription;
use crate::common::{TestApp, persistence_of};
use crate::live::running_execution;
use crate::write_api::Agent;

/// Waits for the next change of `kind` on a hub receiver, skipping others.
async fn next_of_kind(
    rx: &mut casefile::live::Receiver,
    kind: ChangeKind,
) -> std::sync::Arc<Change> {
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            let change = rx.recv().await.expect("a change");
            if change.row.kind == kind {
                return change;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {kind:?} change within 10 s"))
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
    next_of_kind(&mut rx, ChangeKind::EventCreated).await;
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
    let appended = next_of_kind(&mut rx, ChangeKind::EventAppended).await;
    assert_eq!(appended.delta.as_deref(), Some("hello"));
    drop(rx);
    hub.stop().await;
    pool.close().await;
    app.stop().await;
}

const APPEND_MESSAGE: &str = "mutation ($e: ID!, $c: String!) { appendMessage(input: { executionId: $e, role: USER, content: $c }) { uuid } }";

/// A subscription to `session`'s changes with their messages' content, past its first message
/// (the session as it stands).
async fn session_messages(app: &TestApp, session: &str) -> Subscription {
    let mut sub = Subscription::start(
        app.addr,
        false,
        json!({}),
        "subscription ($s: ID!) { session(id: $s) { kind message { content } } }",
        json!({ "s": session }),
    )
    .await;
    assert_eq!(sub.next().await.unwrap()["session"]["kind"], "SESSION");
    sub
}

#[tokio::test]
async fn a_first_subscriber_gets_no_changes_from_before_it_subscribed() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    // Work nobody here watches.
    let (session, exec) = running_execution(&a).await;
    a.ok(APPEND_MESSAGE, json!({ "e": exec, "c": "before" }))
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let mut sub = session_messages(&app, &session).await;
    a.ok(APPEND_MESSAGE, json!({ "e": exec, "c": "after" }))
        .await;
    let next = sub.next().await.unwrap()["session"].clone();
    assert_eq!(
        (next["kind"].as_str(), next["message"]["content"].as_str()),
        (Some("MESSAGE"), Some("after")),
        "the first change after subscribing is the new one"
    );
    sub.disconnect().await;
    app.stop().await;
}

/// Reads of the change log by the server's hub, as `/readyz` reports them.
async fn follower_reads(app: &TestApp) -> u64 {
    let ready: Value = app
        .client
        .get(app.url("/readyz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    ready["checks"]["change_log"]["reads"]
        .as_u64()
        .unwrap_or_else(|| panic!("no count of reads in {ready}"))
}

#[tokio::test]
async fn commits_wake_the_follower_only_while_someone_here_subscribes() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let (session, exec) = running_execution(&a).await;
    // Nobody here subscribes: commits leave the log to the once-a-second read.
    let started = std::time::Instant::now();
    let before = follower_reads(&app).await;
    for i in 0..40 {
        a.ok(
            APPEND_MESSAGE,
            json!({ "e": exec, "c": format!("unwatched {i}") }),
        )
        .await;
    }
    let reads = follower_reads(&app).await - before;
    let ticks = started.elapsed().as_secs() + 2;
    assert!(
        reads <= ticks,
        "40 commits nobody watches took {reads} reads of the log in {:?}",
        started.elapsed()
    );
    // Someone does: each commit is read at once, not at the next tick (ten ticks would take
    // about ten seconds).
    let mut sub = session_messages(&app, &session).await;
    let started = std::time::Instant::now();
    for i in 0..10 {
        let content = format!("watched {i}");
        a.ok(APPEND_MESSAGE, json!({ "e": exec, "c": content }))
            .await;
        let next = sub.next().await.unwrap()["session"].clone();
        assert_eq!(next["message"]["content"], content.as_str());
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "ten watched commits took {:?} to be delivered one after another",
        started.elapsed()
    );
    sub.disconnect().await;
    app.stop().await;
}

#[tokio::test]
async fn a_log_emptied_by_a_crash_is_noticed_and_subscribers_resume() {
    let app = TestApp::start().await;
    // Partitioned by session (docs/scale-out.md), the log's rows are its partitions'.
    let persistence: Vec<(String, String)> = sqlx::query_as(&format!(
        "SELECT c.relname::text, {} FROM pg_class c \
         WHERE c.relname IN ('live_changes', 'live_changes_id_seq', 'change_log_epoch') \
         ORDER BY c.relname",
        persistence_of("c")
    ))
    .fetch_all(app.store.pool())
    .await
    .unwrap();
    // Unlogged on a PostgreSQL server; logged on the embedded one, which cannot reset unlogged
    // tables after a crash (migrations/0058).
    let log = if app.db.db.is_embedded() { "p" } else { "u" };
    assert_eq!(
        persistence,
        [
            ("change_log_epoch".to_owned(), log.to_owned()),
            ("live_changes".to_owned(), log.to_owned()),
            ("live_changes_id_seq".to_owned(), "p".to_owned()),
        ],
        "the log and its epoch are emptied together by a crash; its sequence survives"
    );
    let a = Agent { app: &app };
    let (session, exec) = running_execution(&a).await;
    let mut timeline = Subscription::start(
        app.addr,
        false,
        json!({}),
        "subscription ($s: ID!) { timeline(sessionId: $s) { kind delta } }",
        json!({ "s": ids(&session) }),
    )
    .await;
    let mut changes = Subscription::start(
        app.addr,
        false,
        json!({}),
        "subscription ($s: ID!) { session(id: $s) { kind } }",
        json!({ "s": session }),
    )
    .await;
    assert_eq!(changes.next().await.unwrap()["session"]["kind"], "SESSION");
    let (event, _) = a.event(&exec, "STREAMING").await;
    assert_eq!(
        timeline.next().await.unwrap()["timeline"]["kind"],
        "CREATED"
    );
    // What a crash does to the unlogged tables, in the transaction of a write: its change is
    // committed and never logged, as if the log had been emptied before anyone read it.
    let mut tx = app.store.pool().begin().await.unwrap();
    sqlx::query(
        "INSERT INTO timeline_event_chunks (event_id, session_id, start_offset, content) \
         SELECT id, session_id, 0, 'lost from the log' FROM timeline_events WHERE id = $1::uuid",
    )
    .bind(&event)
    .execute(&mut *tx)
    .await
    .unwrap();
    // (Changes are numbered and logged as their transaction commits: do it now.)
    sqlx::query("SET CONSTRAINTS ALL IMMEDIATE")
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query("TRUNCATE live_changes, change_log_epoch")
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    // The timeline replays from the data, and goes on live.
    let next = timeline.next().await.expect("the text not in the log")["timeline"].clone();
    assert_eq!(
        (next["kind"].as_str(), next["delta"].as_str()),
        (Some("APPENDED"), Some("lost from the log"))
    );
    a.append(&event, 17, " and after").await;
    let next = timeline.next().await.expect("a change after the reset")["timeline"].clone();
    assert_eq!(next["delta"], " and after");
    // The session subscription resumed from the data too: the change lost from the log comes
    // (an APPENDED change is not one it carries; a message is), then what follows.
    a.ok("mutation ($e: ID!) { appendMessage(input: { executionId: $e, role: USER, content: \"after the reset\" }) { uuid } }", json!({ "e": exec })).await;
    loop {
        let next = changes.next().await.expect("no error: it resumed")["session"].clone();
        if next["kind"] == "MESSAGE" {
            break;
        }
    }
    timeline.disconnect().await;
    changes.disconnect().await;
    app.stop().await;
}

/// The global ID of a session.
fn ids(session: &str) -> String {
    casefile::api::ids::encode(
        casefile::api::ids::NodeType::Session,
        session.parse().unwrap(),
    )
    .to_string()
}

#[tokio::test]
async fn the_feed_carries_creations_and_status_changes_only() {
    let app = TestApp::start().await;
    let hub = Hub::start(app.store.clone(), 64).await.unwrap();
    let mut feed = hub.subscribe_feed();
    let a = Agent { app: &app };
    let session = a.session().await;
    let created = next_of_kind(&mut feed, ChangeKind::Session).await;
    assert_eq!(transition(&created), (Some(SessionStatus::Pending), None));
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
    let started = next_of_kind(&mut feed, ChangeKind::Session).await;
    assert_eq!(
        transition(&started),
        (
            Some(SessionStatus::InProgress),
            Some(SessionStatus::Pending)
        ),
        "the author update is not in the feed"
    );
    // The session's own subscribers get every update.
    let updated = next_of_kind(&mut own, ChangeKind::Session).await;
    assert_eq!(
        transition(&updated),
        (Some(SessionStatus::Pending), Some(SessionStatus::Pending))
    );
    let started = next_of_kind(&mut own, ChangeKind::Session).await;
    assert_eq!(transition(&started).0, Some(SessionStatus::InProgress));
    drop((feed, own));
    hub.stop().await;
    app.stop().await;
}

/// A session change's status after and before it, as the log recorded them.
fn transition(change: &Change) -> (Option<SessionStatus>, Option<SessionStatus>) {
    match change.row.status {
        Some(Status::Session(Transition { to, from })) => (Some(to), from),
        _ => (None, None),
    }
}

#[tokio::test]
async fn commits_are_announced_after_they_commit_once_per_burst_when_another_process_follows() {
    let Some((app, url)) = TestApp::start_external("LISTEN").await else {
        return;
    };
    let a = Agent { app: &app };
    let (session, exec) = running_execution(&a).await;
    let mut listener = sqlx::postgres::PgListener::connect(&url).await.unwrap();
    listener.listen("casefile_live").await.unwrap();
    let messages = |n: usize| -> Value {
        let ops: Vec<Value> = (0..n)
            .map(|i| json!({ "appendMessage": { "executionId": exec, "role": "USER", "content": format!("m{i}") } }))
            .collect();
        json!({ "ops": ops })
    };
    let batch = "mutation ($ops: [IngestOperation!]!) { ingest(operations: $ops) { __typename } }";

    // Alone on its database, the server tells no one.
    a.ok(batch, messages(1)).await;
    let payloads = heard(&mut listener).await;
    assert!(payloads.is_empty(), "announced to no one: {payloads:?}");

    // Another process follows the log: from the server's next heartbeat on, it announces.
    let other = Hub::start(app.store.clone(), 64).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        a.ok(batch, messages(1)).await;
        if !heard(&mut listener).await.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the server never announced its commits to the process that follows"
        );
    }

    // 50 changes in one transaction: one announcement, by the process that committed them.
    a.ok(batch, messages(50)).await;
    let payloads = heard(&mut listener).await;
    assert_eq!(
        payloads.len(),
        1,
        "one commit, one announcement: {payloads:?}"
    );
    assert!(
        payloads[0].parse::<uuid::Uuid>().is_ok(),
        "the announcement names the process that sent it: {payloads:?}"
    );

    // The commit itself notifies no one (a transaction that notifies holds the database's
    // notification lock through its commit): a change written by hand is not announced, and
    // reaches the other process's subscribers by its periodic read of the log.
    let mut own = other.subscribe(session.parse().unwrap());
    sqlx::query("UPDATE sessions SET author = 'by hand' WHERE id = $1::uuid")
        .bind(&session)
        .execute(app.store.pool())
        .await
        .unwrap();
    let payloads = heard(&mut listener).await;
    assert!(payloads.is_empty(), "a commit notified: {payloads:?}");
    next_of_kind(&mut own, ChangeKind::Session).await;
    drop((listener, own));
    other.stop().await;
    app.stop().await;
}

/// The payloads of what `listener` hears until it has been quiet for half a second.
async fn heard(listener: &mut sqlx::postgres::PgListener) -> Vec<String> {
    let mut payloads = Vec::new();
    while let Ok(Ok(n)) = tokio::time::timeout(Duration::from_millis(500), listener.recv()).await {
        payloads.push(n.payload().to_owned());
    }
    payloads
}

/// A streaming event in a new session, followed through `hub` by a subscriber of the session's
/// changes and by a timeline subscription, both of which have seen it created: (changes,
/// timeline, event).
async fn watched_event(
    app: &TestApp,
    hub: &std::sync::Arc<Hub>,
) -> (
    casefile::live::Receiver,
    futures::stream::BoxStream<'static, casefile::error::Result<Update>>,
    String,
) {
    let a = Agent { app };
    let (session, exec) = running_execution(&a).await;
    let session: uuid::Uuid = session.parse().unwrap();
    let mut rx = hub.subscribe(session);
    let mut timeline = casefile::live::timeline::stream(
        app.store.clone(),
        hub.clone(),
        TimelinePosition::new(session, View::default()),
    )
    .boxed();
    let (event, _) = a.event(&exec, "STREAMING").await;
    next_of_kind(&mut rx, ChangeKind::EventCreated).await;
    let created = timeline.next().await.unwrap().unwrap();
    assert_eq!(created.sequence_number, 1);
    (rx, timeline, event)
}

fn fast_pruning() -> HubOptions {
    HubOptions {
        reader_timeout: Duration::from_secs(2),
        heartbeat_every: Duration::from_millis(100),
        prune_every: Duration::from_millis(100),
        ..HubOptions::with_buffer(64)
    }
}

/// The changes logged by transactions up to `transaction`.
async fn count_changes_up_to(app: &TestApp, transaction: i64) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM live_changes WHERE logged_in <= $1::text::xid8")
        .bind(transaction.to_string())
        .fetch_one(app.store.pool())
        .await
        .unwrap()
}

/// The newest change's transaction and id.
async fn newest_change(app: &TestApp) -> (i64, i64) {
    sqlx::query_as(
        "SELECT logged_in::text::bigint, id FROM live_changes ORDER BY logged_in DESC, id DESC \
         LIMIT 1",
    )
    .fetch_one(app.store.pool())
    .await
    .unwrap()
}

/// Waits until `done` holds (checked every 100 ms), for at most 10 s.
async fn eventually<F: std::future::Future<Output = bool>>(what: &str, done: impl Fn() -> F) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !done().await {
        assert!(std::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_log_is_pruned_below_every_live_readers_position_only() {
    let app = TestApp::start().await;
    let hub = Hub::start_with(app.store.clone(), fast_pruning())
        .await
        .unwrap();
    let a = Agent { app: &app };
    a.session().await;
    let (first, _) = newest_change(&app).await;
    // Another process that has read every change logged before `first`, and is alive.
    let other = uuid::Uuid::now_v7();
    sqlx::query(
        "INSERT INTO change_log_readers (reader_id, name, position, read_below) \
         VALUES ($1, 'other', 0, $2)",
    )
    .bind(other)
    .bind(first)
    .execute(app.store.pool())
    .await
    .unwrap();
    a.session().await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(
        count_changes_up_to(&app, first).await,
        1,
        "the change the other reader has not read stays"
    );
    // The other reader's heartbeat stops: past the timeout it no longer holds the log back.
    eventually("the log is pruned past a reader gone silent", || async {
        count_changes_up_to(&app, first).await == 0
    })
    .await;
    let pruned: i64 = sqlx::query_scalar("SELECT pruned_below FROM change_log_state")
        .fetch_one(app.store.pool())
        .await
        .unwrap();
    assert!(pruned > first, "{pruned} <= {first}");
    // This process's own place is recorded; it leaves when it stops.
    let readers: Vec<String> =
        sqlx::query_scalar("SELECT name FROM change_log_readers ORDER BY name")
            .fetch_all(app.store.pool())
            .await
            .unwrap();
    assert_eq!(
        readers.len(),
        3,
        "{readers:?}: the app's hub, this hub, the silent one"
    );
    hub.stop().await;
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM change_log_readers")
        .fetch_one(app.store.pool())
        .await
        .unwrap();
    assert_eq!(left, 2, "a stopped hub no longer holds the log back");
    app.stop().await;
}

/// During a rolling upgrade past migration 0127, a reader of an older binary (it reads by `id`,
/// and reports no `read_below`) holds the log back by `id`, and this version's readers report
/// position 0, which holds an older binary's own pruning (by `id`, below every position) back.
#[tokio::test]
async fn a_reader_of_an_older_binary_holds_the_log_back_by_id() {
    let app = TestApp::start().await;
    let pool = app.store.pool();
    let a = Agent { app: &app };
    a.session().await;
    let (_, read_id) = newest_change(&app).await;
    a.session().await;
    let (unread, unread_id) = newest_change(&app).await;
    sqlx::query(
        "INSERT INTO change_log_readers (reader_id, name, position) VALUES ($1, 'older', $2)",
    )
    .bind(uuid::Uuid::now_v7())
    .bind(read_id)
    .execute(pool)
    .await
    .unwrap();
    eventually("this version's readers read past both", || async {
        sqlx::query_scalar::<_, bool>(
            "SELECT bool_and(read_below > $1 AND position = 0) FROM change_log_readers \
             WHERE read_below IS NOT NULL",
        )
        .bind(unread)
        .fetch_one(pool)
        .await
        .unwrap()
    })
    .await;
    let ids = || async {
        sqlx::query_scalar::<_, i64>("SELECT id FROM live_changes WHERE id >= $1 ORDER BY id")
            .bind(read_id)
            .fetch_all(pool)
            .await
            .unwrap()
    };
    let day = Duration::from_secs(86_400);
    app.store
        .prune_change_log(Duration::from_secs(300), day)
        .await
        .unwrap();
    let left = ids().await;
    assert!(
        left.contains(&unread_id) && left.iter().all(|id| *id > read_id),
        "what the older reader read goes, the rest stays: {left:?} (read up to {read_id})"
    );
    let pruned_through: i64 = sqlx::query_scalar("SELECT pruned_through FROM change_log_state")
        .fetch_one(pool)
        .await
        .unwrap();
    assert!(pruned_through <= read_id, "{pruned_through} > {read_id}");
    // Once it is gone, the rest goes.
    sqlx::query("DELETE FROM change_log_readers WHERE name = 'older'")
        .execute(pool)
        .await
        .unwrap();
    app.store
        .prune_change_log(Duration::from_secs(300), day)
        .await
        .unwrap();
    assert_eq!(ids().await, Vec::<i64>::new());
    app.stop().await;
}

#[tokio::test]
async fn a_process_the_log_was_pruned_past_resumes_its_subscribers() {
    let app = TestApp::start().await;
    let hub = Hub::start_with(app.store.clone(), HubOptions::with_buffer(64))
        .await
        .unwrap();
    let a = Agent { app: &app };
    let (mut rx, mut timeline, event) = watched_event(&app, &hub).await;
    // Other processes pruned the log past this one (as if it had stalled past the timeout),
    // in the transaction of a write this process never reads.
    let mut tx = app.store.pool().begin().await.unwrap();
    sqlx::query(
        "INSERT INTO timeline_event_chunks (event_id, session_id, start_offset, content) \
         SELECT id, session_id, 0, 'pruned unread' FROM timeline_events WHERE id = $1::uuid",
    )
    .bind(&event)
    .execute(&mut *tx)
    .await
    .unwrap();
    sqlx::query("SET CONSTRAINTS ALL IMMEDIATE")
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query(
        "WITH gone AS (DELETE FROM live_changes RETURNING logged_in) \
         UPDATE change_log_state \
         SET pruned_below = (SELECT max(logged_in)::text::bigint + 1 FROM gone)",
    )
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let end = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("the subscriber is told");
    assert_eq!(end.unwrap_err(), Interrupted::Missed);
    // A timeline subscription resumes from the data by itself: nothing lost, nothing twice.
    let appended = tokio::time::timeout(Duration::from_secs(10), timeline.next())
        .await
        .expect("the text that was pruned unread")
        .unwrap()
        .unwrap();
    assert_eq!(appended.delta.as_deref(), Some("pruned unread"));
    a.append(&event, 13, "!").await;
    let appended = timeline.next().await.unwrap().unwrap();
    assert_eq!(
        (appended.offset, appended.delta.as_deref()),
        (Some(13), Some("!"))
    );
    drop(timeline);
    hub.stop().await;
    app.stop().await;
}

/// A transaction that logged changes and stays open is awaited, however much commits after
/// it: this process's place in the log (what it holds back from pruning) stays below it, and
/// its changes are delivered when it commits, with nothing missed.
#[tokio::test]
async fn a_long_transaction_is_awaited_and_holds_the_log_back() {
    let Some((app, _)) = TestApp::start_external("holding a transaction open").await else {
        return;
    };
    let hub = Hub::start_with(app.store.clone(), fast_pruning())
        .await
        .unwrap();
    let a = Agent { app: &app };
    let (mut rx, mut timeline, event) = watched_event(&app, &hub).await;
    let mut feed = hub.subscribe_feed();
    // An older transaction of another database on the server: it logs nothing here, and is not
    // awaited.
    let options = (*app.store.pool().connect_options())
        .clone()
        .database("postgres");
    let mut elsewhere: sqlx::PgConnection = sqlx::Connection::connect_with(&options).await.unwrap();
    let mut elsewhere = sqlx::Connection::begin(&mut elsewhere).await.unwrap();
    let other_id: i64 = sqlx::query_scalar("SELECT pg_current_xact_id()::text::bigint")
        .fetch_one(&mut *elsewhere)
        .await
        .unwrap();
    // A long transaction logs five changes (as its commit would), then is held open.
    let mut slow = app.store.pool().begin().await.unwrap();
    for i in 0..5 {
        sqlx::query(
            "INSERT INTO timeline_event_chunks (event_id, session_id, start_offset, content) \
             SELECT id, session_id, $2, 'x' FROM timeline_events WHERE id = $1::uuid",
        )
        .bind(&event)
        .bind(i)
        .execute(&mut *slow)
        .await
        .unwrap();
    }
    sqlx::query("SET CONSTRAINTS ALL IMMEDIATE")
        .execute(&mut *slow)
        .await
        .unwrap();
    let slow_id: i64 = sqlx::query_scalar("SELECT pg_current_xact_id()::text::bigint")
        .fetch_one(&mut *slow)
        .await
        .unwrap();
    // Later transactions commit and are delivered meanwhile.
    for _ in 0..3 {
        a.session().await;
        next_of_kind(&mut feed, ChangeKind::Session).await;
    }
    let held_at = || async {
        sqlx::query_scalar::<_, Option<i64>>("SELECT min(read_below) FROM change_log_readers")
            .fetch_one(app.store.pool())
            .await
            .unwrap()
            .unwrap_or(0)
    };
    assert!(other_id < slow_id);
    eventually("the readers wait at the long transaction", || async {
        held_at().await == slow_id
    })
    .await;
    assert_eq!(
        held_at().await,
        slow_id,
        "the readers wait for the long transaction"
    );
    slow.commit().await.unwrap();
    let mut appended = 0;
    while appended < 5 {
        let change = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("the long transaction's changes")
            .expect("delivered, not missed");
        appended += usize::from(change.row.kind == ChangeKind::EventAppended);
    }
    let mut text = String::new();
    while text.len() < 5 {
        let update = timeline.next().await.unwrap().unwrap();
        text.push_str(update.delta.as_deref().unwrap_or_default());
    }
    assert_eq!(text, "xxxxx");
    eventually("the readers move past it", || async {
        held_at().await > slow_id
    })
    .await;
    elsewhere.rollback().await.unwrap();
    drop(timeline);
    hub.stop().await;
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
        let created = next_of_kind(&mut reading, ChangeKind::EventCreated).await;
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
    assert_eq!(end, Interrupted::TooSlow);
    assert!(received <= 4, "{received} changes of 64 KiB fit in 256 KiB");
    drop((stalled, reading));
    hub.stop().await;
    app.stop().await;
}

/// The follower's read keeps a plan that reads only what is new and what the awaited
/// transactions logged, along the log's key, however long the log is (not a walk of the whole
/// log filtered).
#[tokio::test]
async fn the_followers_read_keeps_a_plan_along_the_logs_key() {
    let app = TestApp::start().await;
    let pool = app.store.pool();
    // A log much longer than one read, as under a steady stream of appends.
    sqlx::query(
        "INSERT INTO live_changes (session_id, position) \
         SELECT gen_random_uuid(), n FROM generate_series(1, 20000) n",
    )
    .execute(pool)
    .await
    .unwrap();
    // And an event log as small as a new database's, whose statistics say so: the plan made
    // now is the one a connection keeps while the log grows.
    sqlx::query(
        "INSERT INTO session_events (session_id, position, kind, entity_id) \
         SELECT gen_random_uuid(), 1, 'session', gen_random_uuid() FROM generate_series(1, 400)",
    )
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("ANALYZE live_changes, session_events")
        .execute(pool)
        .await
        .unwrap();
    let (transaction, session, position): (i64, Uuid, i64) = sqlx::query_as(
        "SELECT logged_in::text::bigint, session_id, position FROM live_changes \
         ORDER BY logged_in DESC, session_id DESC, position DESC OFFSET 10 LIMIT 1",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    let after = LogKey {
        transaction,
        session,
        position,
    };
    let awaited = [
        LogKey::before(transaction - 5),
        LogKey::before(transaction - 3),
    ];
    let plan = app
        .store
        .explain_read_change_log(after, &awaited)
        .await
        .unwrap();
    // Each branch reads the log (each of its partitions, partitioned) by its key.
    let log_scans: Vec<&str> = plan
        .lines()
        .filter(|l| l.contains(" on public.live_changes"))
        .collect();
    assert!(
        log_scans.len() >= 2 && log_scans.len().is_multiple_of(2),
        "{plan}"
    );
    assert!(
        log_scans
            .iter()
            .all(|l| l.contains("Scan using live_changes_pkey")),
        "{plan}"
    );
    assert_eq!(
        plan.lines()
            .filter(|l| l.contains("Index Cond:") && l.contains("logged_in"))
            .count(),
        log_scans.len(),
        "{plan}"
    );
    assert!(
        !plan
            .lines()
            .any(|l| l.contains("Filter:") && l.contains("logged_in")),
        "a filtered walk of the log: {plan}"
    );
    // Each change's event is found by its own look-up, never by a join that reads the event
    // log whole (a hash join over it, chosen while it was small).
    let event_log_scans: Vec<&str> = plan
        .lines()
        .filter(|l| l.contains(" on public.session_events"))
        .collect();
    assert!(!event_log_scans.is_empty(), "{plan}");
    assert!(
        event_log_scans.iter().all(|l| l.contains("Index")),
        "a join over the whole event log: {plan}"
    );
    app.stop().await;
}
