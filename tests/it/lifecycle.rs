//! Start-up and shutdown: the embedded database stops promptly (never hangs a test), and the
//! real binary serves, persists its data directory and exits cleanly on SIGTERM.

use std::net::SocketAddr;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use casefile::db::{Database, EmbeddedPostgres};

use crate::common::process;
use serde_json::{Value, json};

#[tokio::test]
async fn embedded_database_starts_and_stops_repeatedly() {
    for _ in 0..3 {
        let db = Database::embedded(
            EmbeddedPostgres::start_temporary().await.unwrap(),
            &casefile::db::DbTimeouts::default(),
        )
        .await
        .unwrap();
        db.migrate().await.unwrap();
        let store = casefile::store::Store::new(db.pool().clone());
        let one: i32 = sqlx::query_scalar("SELECT 1")
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert_eq!(one, 1);
        drop(store);
        // Shutdown is bounded by its own grace period; a hang would fail this test by timeout.
        tokio::time::timeout(Duration::from_secs(30), db.shutdown())
            .await
            .expect("shutdown returns");
    }
}

/// A `casefile serve` child process on a temporary data directory (always embedded).
struct Served {
    child: Child,
    addr: SocketAddr,
}

fn serve(data_dir: &std::path::Path) -> Served {
    let (child, addr) = process::serve([
        "--demo".as_ref(),
        "--data-dir".as_ref(),
        data_dir.as_os_str(),
    ]);
    Served { child, addr }
}

impl Served {
    async fn total_sessions(&self) -> i64 {
        let body: Value = reqwest::Client::new()
            .post(format!("http://{}/graphql", self.addr))
            .json(&json!({ "query": "{ sessions(filter: { includeDeleted: true }) { totalCount } }" }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        body["data"]["sessions"]["totalCount"].as_i64().unwrap()
    }

    /// SIGTERM, then wait (bounded) for a clean exit.
    fn terminate(mut self) -> Duration {
        let started = Instant::now();
        assert!(process::sigterm(&self.child), "SIGTERM could not be sent");
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "exit status {status}");
                return started.elapsed();
            }
            if started.elapsed() > Duration::from_secs(60) {
                self.child.kill().unwrap();
                panic!("casefile did not exit within 60 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[tokio::test]
async fn the_binary_serves_persists_and_exits_on_sigterm() {
    let data_dir =
        std::env::temp_dir().join(format!("casefile-lifecycle-{}", uuid::Uuid::new_v4()));
    let first = serve(&data_dir);
    let health = reqwest::get(format!("http://{}/healthz", first.addr))
        .await
        .unwrap();
    assert_eq!(health.text().await.unwrap(), "ok");
    let demo_sessions = first.total_sessions().await;
    assert!(demo_sessions > 0);
    first.terminate();

    // Same data directory: the data is still there, and --demo again adds nothing.
    let second = serve(&data_dir);
    assert_eq!(second.total_sessions().await, demo_sessions);
    second.terminate();
    std::fs::remove_dir_all(&data_dir).unwrap();
}

#[tokio::test]
async fn simulate_plays_an_investigation_through_the_api() {
    let app = crate::common::TestApp::start().await;
    let url = app.url("/graphql");
    let output = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_casefile"))
            .args(["simulate", "--token-rate", "5000", "--url", &url])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("subscription { timeline(sessionId:"),
        "{stdout}"
    );
    let data = app
        .data(
            "{ sessions(first: 1) { edges { node { status counts { stages executions } stages { status executions { status } }
               timeline(first: 100) { edges { node { eventType status } } } } } } }",
            json!({}),
        )
        .await;
    let s = &data["sessions"]["edges"][0]["node"];
    assert_eq!(s["status"], "COMPLETED");
    assert_eq!(s["counts"], json!({ "stages": 3, "executions": 5 }));
    assert!(
        s["stages"]
            .as_array()
            .unwrap()
            .iter()
            .all(|st| st["status"] == "COMPLETED")
    );
    let types: std::collections::BTreeSet<&str> = s["timeline"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["node"]["eventType"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        ["FINAL_ANALYSIS", "LLM_THINKING", "MCP_TOOL_CALL"]
            .into_iter()
            .collect()
    );
    app.stop().await;
}
