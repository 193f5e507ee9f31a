//! Connections of the pool, as concurrent reads use them.

use serde_json::json;

use crate::common::TestApp;

/// A session page's statements of one level run side by side on the pool's connections, and
/// clients reading at once share them, without the pool ever opening a connection it then
/// loses: a statement that stops waiting for the pool (its operation parked a connection
/// meanwhile) leaves the pool's acquire to finish, and what it brings to the pool. Before, such
/// an acquire was abandoned halfway, and the database forked a new server process again and
/// again.
#[tokio::test]
async fn concurrent_statements_keep_the_pools_connections() {
    let app = TestApp::start().await;
    let Some(url) = app.db.url() else {
        println!(
            "skipped: the embedded database has one connection (nothing runs side by side); \
             set DATABASE_URL to run this test"
        );
        return;
    };
    casefile::demo::load(&app.store).await.unwrap();
    let ids = app.session_ids(8).await;
    let page = "query($id: ID!) { session(id: $id) { stages { executions {
        timeline(first: 100) { edges { node { content } } }
        messagesConnection(first: 100) { edges { node { content } } }
        llmInteractionsConnection(first: 100) { edges { node { modelName llmResponse } } }
        mcpInteractionsConnection(first: 100) { edges { node { toolName toolResult } } } } } } }";
    let monitor = sqlx::PgPool::connect(&url).await.unwrap();
    let opened = || async {
        let sessions: i64 = sqlx::query_scalar(
            "SELECT sessions FROM pg_stat_database WHERE datname = current_database()",
        )
        .fetch_one(&monitor)
        .await
        .unwrap();
        sessions
    };
    // One client, then eight at once (more statements than the pool has connections).
    let read = |clients: usize| {
        let (app, ids) = (&app, &ids);
        futures::future::join_all((0..clients).map(move |client| async move {
            for round in 0..20 {
                let id = &ids[(client + round) % ids.len()];
                app.data(page, json!({ "id": id })).await;
            }
        }))
    };
    let before = opened().await;
    read(1).await;
    read(8).await;
    let during = opened().await - before;
    println!("connections opened for 180 requests: {during}");
    // The pool opens its 5 connections once.
    assert!(during <= 5, "{during} connections opened for 180 requests");
    app.stop().await;
}
