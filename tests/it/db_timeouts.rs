//! The timeouts every pooled connection sets on itself, and what a client sees when one fires.

use std::time::{Duration, Instant};

use serde_json::json;

use casefile::db::DbTimeouts;
use casefile::http::HttpOptions;

use crate::common::{TestApp, TestDb};

const SHORT: DbTimeouts = DbTimeouts {
    statement: Duration::from_millis(1500),
    lock: Duration::from_millis(300),
    idle_in_transaction: Duration::from_millis(2000),
};

#[tokio::test]
async fn every_pooled_connection_sets_its_timeouts() {
    let db = TestDb::start_with(SHORT).await;
    let pool = db.db.pool();
    for (name, want) in [
        ("statement_timeout", "1500ms"),
        ("lock_timeout", "300ms"),
        ("idle_in_transaction_session_timeout", "2s"),
    ] {
        let got: String = sqlx::query_scalar(&format!("SHOW {name}"))
            .fetch_one(pool)
            .await
            .unwrap();
        assert_eq!(got, want, "{name}");
    }
    // What actually fires depends on the database (the README says so).
    let started = Instant::now();
    let slept = sqlx::query("SELECT pg_sleep(3)").execute(pool).await;
    if db.url().is_some() {
        let err = slept.expect_err("PostgreSQL cancels the statement");
        assert!(err.to_string().contains("statement timeout"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(3));
    } else {
        // pglite (PostgreSQL in WebAssembly) has no timer signals: it keeps the settings and
        // never fires them.
        assert!(slept.is_ok());
        println!("embedded database: timeouts are set but do not fire");
    }
    db.stop().await;
}

#[tokio::test]
async fn a_lock_timeout_is_a_retryable_error_and_keeps_nothing() {
    if std::env::var("DATABASE_URL").map_or(true, |url| url.is_empty()) {
        eprintln!(
            "skipped: a lock held by another connection needs an external PostgreSQL (DATABASE_URL)"
        );
        return;
    }
    let app = TestApp::start_on(TestDb::start_with(SHORT).await, HttpOptions::default()).await;
    let session = app
        .data(
            "mutation { createSession(input: { alertType: \"A\", chainId: \"c\" }) { uuid } }",
            json!({}),
        )
        .await["createSession"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    // Another writer holds the session's row.
    let mut other = app.store.pool().begin().await.unwrap();
    sqlx::query("SELECT 1 FROM sessions WHERE id = $1::uuid FOR UPDATE")
        .bind(&session)
        .execute(&mut *other)
        .await
        .unwrap();
    let started = Instant::now();
    let body = app
        .graphql(
            "mutation ($s: ID!) { ingest(operations: [
                { createStage: { sessionId: $s, stageIndex: 0, name: \"A\" } },
                { createStage: { sessionId: $s, stageIndex: 1, name: \"B\" } }
            ]) { __typename } }",
            json!({ "s": session }),
        )
        .await;
    assert_eq!(body["errors"][0]["extensions"]["code"], "TIMEOUT", "{body}");
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("retry"),
        "{body}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    other.rollback().await.unwrap();
    let stages: i64 = sqlx::query_scalar("SELECT count(*) FROM stages")
        .fetch_one(app.store.pool())
        .await
        .unwrap();
    assert_eq!(stages, 0, "nothing half-written");
    app.stop().await;
}
