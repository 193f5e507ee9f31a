//! The sessions feed is written by the transaction that changes a status (migration 0124), not
//! by the trigger that records the change in the session's history: that trigger stays within
//! its session (docs/scale-out.md), and an older binary's writes are still fed by it.

use serde_json::json;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::common::TestApp;
use crate::live::running_execution;
use crate::write_api::Agent;

/// Every status change is in the feed once, at the position its history row names, and the
/// feed is 1, 2, 3, … with no gap.
pub(crate) async fn assert_every_change_is_fed(pool: &PgPool) {
    let (changes, unfed, fed_as_named, entries, last): (i64, i64, i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM session_status_changes), \
                    (SELECT count(*) FROM session_status_changes WHERE feed_position IS NULL), \
                    (SELECT count(*) FROM session_status_changes c JOIN session_feed f \
                       ON f.change_id = c.id AND f.session_id = c.session_id \
                      AND f.position = c.feed_position), \
                    (SELECT count(*) FROM session_feed), \
                    (SELECT coalesce(max(position), 0) FROM session_feed)",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert!(changes > 0);
    assert_eq!(unfed, 0, "status changes left without a feed position");
    assert_eq!(
        fed_as_named, changes,
        "changes not in the feed where they say"
    );
    assert_eq!(entries, changes, "feed entries of no change");
    assert_eq!(last, entries, "the feed has gaps");
}

#[tokio::test]
async fn every_status_change_through_the_api_is_fed_by_its_transaction() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    // Created, started by its agent, completed, deleted and restored.
    let (done, exec) = running_execution(&a).await;
    a.start(&exec).await;
    a.finish(&exec, "COMPLETED", None).await;
    a.ok(
        "mutation ($id: ID!) { completeSession(input: { id: $id, finalAnalysis: \"found\" }) { status } }",
        json!({ "id": done }),
    )
    .await;
    for action in ["deleteSession", "restoreSession"] {
        a.ok(
            &format!("mutation ($id: ID!) {{ {action}(id: $id, reason: \"tidying\") {{ uuid }} }}"),
            json!({ "id": done }),
        )
        .await;
    }
    // Cancelled while its agent runs (cancelling), then cancelled as the agent ends.
    let (cancelled, exec) = running_execution(&a).await;
    a.start(&exec).await;
    a.ok(
        "mutation ($id: ID!) { requestSessionCancellation(id: $id) { status } }",
        json!({ "id": cancelled }),
    )
    .await;
    a.finish(&exec, "CANCELLED", None).await;
    let failed = a.session().await;
    a.ok(
        "mutation ($id: ID!) { failSession(input: { id: $id, errorMessage: \"crashed\" }) { status } }",
        json!({ "id": failed }),
    )
    .await;
    // Restored history (the demo's sessions: each its creation).
    casefile::demo::load(&app.store).await.unwrap();

    let actions: Vec<(Uuid, String)> = sqlx::query_as(
        "SELECT c.session_id, c.action || ':' || c.to_status FROM session_feed f \
         JOIN session_status_changes c ON c.id = f.change_id AND c.session_id = f.session_id \
         WHERE c.session_id = ANY($1) ORDER BY f.position",
    )
    .bind(
        [&done, &cancelled]
            .map(|s| s.parse::<Uuid>().unwrap())
            .to_vec(),
    )
    .fetch_all(app.store.pool())
    .await
    .unwrap();
    let of = |session: &str| -> Vec<&str> {
        let session: Uuid = session.parse().unwrap();
        actions
            .iter()
            .filter(|(s, _)| *s == session)
            .map(|(_, a)| a.as_str())
            .collect()
    };
    assert_eq!(
        of(&done),
        [
            "created:pending",
            "status_changed:in_progress",
            "status_changed:completed",
            "deleted:completed",
            "restored:completed"
        ]
    );
    assert_eq!(
        of(&cancelled),
        [
            "created:pending",
            "status_changed:in_progress",
            "status_changed:cancelling",
            "status_changed:cancelled"
        ]
    );
    assert_every_change_is_fed(app.store.pool()).await;
    app.stop().await;
}

/// Changes `session`'s status in `tx`, and has the trigger record the change now (it is
/// deferred to the commit otherwise).
pub(crate) async fn change_status(tx: &mut PgConnection, session: Uuid, status: &str) {
    sqlx::query("UPDATE sessions SET status = $2 WHERE id = $1")
        .bind(session)
        .bind(status)
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query("SET CONSTRAINTS session_status_change IMMEDIATE")
        .execute(&mut *tx)
        .await
        .unwrap();
}

/// The writer's step before its commit: `sessions`' recorded changes take their feed positions.
pub(crate) async fn feed(tx: &mut PgConnection, sessions: &[Uuid]) {
    sqlx::query("SELECT feed_status_changes($1)")
        .bind(sessions)
        .execute(tx)
        .await
        .unwrap();
}

/// `session`'s latest status change: its feed position, and how many feed entries name it.
async fn latest_change(tx: &mut PgConnection, session: Uuid) -> (Option<i64>, i64) {
    sqlx::query_as(
        "SELECT c.feed_position, (SELECT count(*) FROM session_feed f \
             WHERE f.change_id = c.id AND f.session_id = c.session_id) \
         FROM session_status_changes c WHERE c.session_id = $1 \
         ORDER BY c.id DESC LIMIT 1",
    )
    .bind(session)
    .fetch_one(tx)
    .await
    .unwrap()
}

#[tokio::test]
async fn the_trigger_feeds_only_the_changes_of_writers_that_do_not_feed_them() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let session: Uuid = a.session().await.parse().unwrap();
    // A transaction that feeds its own changes (as every one casefile begins): the trigger
    // records the change in the session's history and leaves the feed to the writer.
    let mut tx = app.store.begin().await.unwrap();
    change_status(&mut tx, session, "in_progress").await;
    assert_eq!(latest_change(&mut tx, session).await, (None, 0));
    feed(&mut tx, &[session]).await;
    assert_eq!(latest_change(&mut tx, session).await, (Some(2), 1));
    tx.commit().await.unwrap();

    // A transaction that does not say so (an older binary's, a change by hand): the trigger
    // feeds it, and feeding again changes nothing.
    let mut tx = app.store.pool().begin().await.unwrap();
    change_status(&mut tx, session, "cancelling").await;
    assert_eq!(latest_change(&mut tx, session).await, (Some(3), 1));
    feed(&mut tx, &[session]).await;
    assert_eq!(latest_change(&mut tx, session).await, (Some(3), 1));
    tx.commit().await.unwrap();
    assert_every_change_is_fed(app.store.pool()).await;
    app.stop().await;
}

#[tokio::test]
async fn sessions_fed_together_take_the_feed_in_the_order_their_changes_were_recorded() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let first: Uuid = a.session().await.parse().unwrap();
    let second: Uuid = a.session().await.parse().unwrap();
    // Recorded first, second, first; fed with the sessions named the other way round (and one
    // twice): the feed follows the recording, not the naming.
    let mut tx = app.store.begin().await.unwrap();
    change_status(&mut tx, first, "in_progress").await;
    change_status(&mut tx, second, "in_progress").await;
    change_status(&mut tx, first, "cancelling").await;
    feed(&mut tx, &[second, first, second]).await;
    tx.commit().await.unwrap();
    let fed: Vec<(Uuid, String)> = sqlx::query_as(
        "SELECT f.session_id, c.to_status FROM session_feed f \
         JOIN session_status_changes c ON c.session_id = f.session_id AND c.id = f.change_id \
         ORDER BY f.position DESC LIMIT 3",
    )
    .fetch_all(app.store.pool())
    .await
    .unwrap();
    assert_eq!(
        fed,
        [
            (first, "cancelling".to_owned()),
            (second, "in_progress".to_owned()),
            (first, "in_progress".to_owned()),
        ]
    );
    assert_every_change_is_fed(app.store.pool()).await;
    app.stop().await;
}

#[tokio::test]
async fn a_change_two_writers_feed_at_once_is_fed_once() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let session: Uuid = a.session().await.parse().unwrap();
    // A change committed unfed (by a writer that said it feeds its changes and did not).
    let mut tx = app.store.begin().await.unwrap();
    change_status(&mut tx, session, "in_progress").await;
    tx.commit().await.unwrap();

    // Two writers that noted the session feed it: the second finds the change unfed, then
    // waits for the feed's lock until the first, which fed it, commits.
    let mut first = app.store.begin().await.unwrap();
    feed(&mut first, &[session]).await;
    let store = app.store.clone();
    let second = tokio::spawn(async move {
        let mut tx = store.begin().await.unwrap();
        feed(&mut tx, &[session]).await;
        tx.commit().await.unwrap();
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    first.commit().await.unwrap();
    second.await.unwrap();
    assert_every_change_is_fed(app.store.pool()).await;
    app.stop().await;
}
