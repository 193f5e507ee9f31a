//! No deadlocks: batches and single mutations take their locks in one order (sessions by id,
//! then event streams), and a transaction PostgreSQL aborts to break a deadlock is run again.
//! Real concurrency needs the external PostgreSQL (the embedded one has a single connection):
//! without `DATABASE_URL` these tests say they are skipped.

use std::time::Duration;

use serde_json::{Value, json};
use sqlx::{Connection as _, PgConnection};

use crate::common::TestApp;
use crate::write_api::Agent;

const INGEST: &str =
    "mutation ($ops: [IngestOperation!]!) { ingest(operations: $ops) { __typename } }";

fn errors(body: &Value) -> Option<&Value> {
    body.get("errors")
}

/// An event's content and status as stored (streamed chunks included).
async fn event(app: &TestApp, id: &str) -> (String, String) {
    sqlx::query_as("SELECT content, status FROM timeline_events_live WHERE id = $1::uuid")
        .bind(id)
        .fetch_one(app.store.pool())
        .await
        .unwrap()
}

async fn execution_status(app: &TestApp, id: &str) -> String {
    sqlx::query_scalar("SELECT status FROM agent_executions WHERE id = $1::uuid")
        .bind(id)
        .fetch_one(app.store.pool())
        .await
        .unwrap()
}

/// One session of the crossing test: a writer agent `x` that receives messages, events of `x`
/// that batches append to, events of `x` and agents (each with a streaming event holding
/// `r{j}`) that batches from the other session finish.
struct Side {
    x: String,
    appended: Vec<String>,
    finished_events: Vec<String>,
    finished_agents: Vec<(String, String)>,
}

async fn side(a: &Agent<'_>, crossings: usize) -> Side {
    let session = a.session().await;
    let agents = 1 + crossings.div_ceil(2);
    let stage = a.stage(&session, 0, agents as i32, Some("ALL")).await;
    let x = a.execution(&stage, 1, "Writer").await;
    a.start(&x).await;
    let mut side = Side {
        x: x.clone(),
        appended: Vec::new(),
        finished_events: Vec::new(),
        finished_agents: Vec::new(),
    };
    for i in 0..crossings {
        side.appended.push(a.event(&x, "STREAMING").await.0);
        if i.is_multiple_of(2) {
            side.finished_events.push(a.event(&x, "STREAMING").await.0);
        } else {
            let z = a
                .execution(&stage, 2 + i as i32 / 2, &format!("Helper{i}"))
                .await;
            let (r, _) = a.event(&z, "STREAMING").await;
            assert!(errors(&a.append(&r, 0, &format!("r{i}")).await).is_none());
            side.finished_agents.push((z, r));
        }
    }
    side
}

/// A batch that appends in `from`, finishes something in `to`, then writes in `from` again:
/// it needs both sessions, and the batches of the other direction name them the other way
/// round.
fn crossing(from: &Side, to: &Side, i: usize, label: &str) -> Value {
    let finish = if i.is_multiple_of(2) {
        json!({ "finishTimelineEvent": { "eventId": to.finished_events[i / 2], "status": "COMPLETED",
                                         "content": format!("{label} finished {i}") } })
    } else {
        json!({ "finishAgentExecution": { "id": to.finished_agents[i / 2].0, "status": "COMPLETED" } })
    };
    json!({ "ops": [
        { "appendTimelineContent": { "eventId": from.appended[i], "offset": 0, "delta": format!("{label} {i}") } },
        finish,
        { "appendMessage": { "executionId": from.x, "role": "ASSISTANT", "content": format!("{label} {i}") } },
    ] })
}

#[tokio::test]
async fn batches_crossing_two_sessions_in_both_orders_all_succeed() {
    let Some((app, _)) = TestApp::start_external("crossing batches").await else {
        return;
    };
    let a = Agent { app: &app };
    const CROSSINGS: usize = 12;
    let (left, right) = (side(&a, CROSSINGS).await, side(&a, CROSSINGS).await);
    let batches = (0..CROSSINGS).flat_map(|i| {
        [
            crossing(&left, &right, i, "left"),
            crossing(&right, &left, i, "right"),
        ]
    });
    let bodies = futures::future::join_all(batches.map(|vars| app.graphql(INGEST, vars))).await;
    for body in &bodies {
        assert!(errors(body).is_none(), "every batch succeeds: {body:#}");
    }
    for (from, to, label) in [(&left, &right, "left"), (&right, &left, "right")] {
        for (i, id) in from.appended.iter().enumerate() {
            assert_eq!(
                event(&app, id).await,
                (format!("{label} {i}"), "streaming".to_owned())
            );
        }
        for (j, id) in to.finished_events.iter().enumerate() {
            let text = format!("{label} finished {}", 2 * j);
            assert_eq!(event(&app, id).await, (text, "completed".to_owned()));
        }
        for (j, (z, r)) in to.finished_agents.iter().enumerate() {
            assert_eq!(execution_status(&app, z).await, "completed");
            let text = format!("r{}", 2 * j + 1);
            assert_eq!(event(&app, r).await, (text, "completed".to_owned()));
        }
        let messages: Vec<(i32, String)> = sqlx::query_as(
            "SELECT sequence_number, content FROM messages WHERE execution_id = $1::uuid \
             ORDER BY sequence_number",
        )
        .bind(&from.x)
        .fetch_all(app.store.pool())
        .await
        .unwrap();
        let numbers: Vec<i32> = messages.iter().map(|m| m.0).collect();
        assert_eq!(numbers, (1..=CROSSINGS as i32).collect::<Vec<_>>());
        let mut texts: Vec<String> = messages.into_iter().map(|m| m.1).collect();
        texts.sort();
        let mut expected: Vec<String> = (0..CROSSINGS).map(|i| format!("{label} {i}")).collect();
        expected.sort();
        assert_eq!(texts, expected);
    }
    app.stop().await;
}

#[tokio::test]
async fn appends_then_finish_in_one_session_race_finish_agent_execution() {
    let Some((app, _)) = TestApp::start_external("racing batches").await else {
        return;
    };
    let a = Agent { app: &app };
    const ROUNDS: usize = 4;
    const BATCHES: usize = 16;
    let mut applied = 0;
    for _ in 0..ROUNDS {
        // `x` streams the events the batches append to and the execution finish closes; `y`
        // streams the events the batches finish.
        let session = a.session().await;
        let stage = a.stage(&session, 0, 2, Some("ALL")).await;
        let (x, y) = (
            a.execution(&stage, 1, "Streamer").await,
            a.execution(&stage, 2, "Other").await,
        );
        let (mut streamed, mut finished) = (Vec::new(), Vec::new());
        for _ in 0..BATCHES {
            streamed.push(a.event(&x, "STREAMING").await.0);
            finished.push(a.event(&y, "STREAMING").await.0);
        }
        let batch = |i: usize| {
            let vars = json!({ "ops": [
                { "appendTimelineContent": { "eventId": streamed[i], "offset": 0, "delta": "to" } },
                { "appendTimelineContent": { "eventId": streamed[i], "offset": 2, "delta": format!("ken {i}") } },
                { "finishTimelineEvent": { "eventId": finished[i], "status": "COMPLETED", "content": format!("done {i}") } },
            ] });
            app.graphql(INGEST, vars)
        };
        // The execution finishes while the batches run: sent in the middle of them.
        let (mut bodies, finish, later) = tokio::join!(
            futures::future::join_all((0..BATCHES / 2).map(batch)),
            a.finish(&x, "COMPLETED", None),
            futures::future::join_all((BATCHES / 2..BATCHES).map(batch)),
        );
        bodies.extend(later);
        assert!(
            errors(&finish).is_none(),
            "the execution finishes: {finish:#}"
        );
        assert_eq!(execution_status(&app, &x).await, "completed");
        for (i, body) in bodies.iter().enumerate() {
            let (streamed, finished) = (
                event(&app, &streamed[i]).await,
                event(&app, &finished[i]).await,
            );
            match errors(body) {
                // Before the execution finished: all of it, closed with the execution.
                None => {
                    applied += 1;
                    assert_eq!(streamed, (format!("token {i}"), "completed".to_owned()));
                    assert_eq!(finished, (format!("done {i}"), "completed".to_owned()));
                }
                // After: refused for the closed event, none of it stored.
                Some(_) => {
                    assert_eq!(
                        body["errors"][0]["extensions"]["code"], "CONFLICT",
                        "{body:#}"
                    );
                    let message = body["errors"][0]["message"].as_str().unwrap();
                    assert!(
                        message.contains("a finished event never changes"),
                        "{message}"
                    );
                    assert_eq!(streamed, (String::new(), "completed".to_owned()));
                    assert_eq!(finished, (String::new(), "streaming".to_owned()));
                }
            }
        }
    }
    assert!(
        applied > 0,
        "some batches ran before the execution finished"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_transaction_aborted_for_a_deadlock_is_run_again() {
    let Some((app, url)) = TestApp::start_external("a forced deadlock").await else {
        return;
    };
    let a = Agent { app: &app };
    let session = a.session().await;
    let stage = a.stage(&session, 0, 1, None).await;
    let x = a.execution(&stage, 1, "Agent").await;
    a.start(&x).await;

    // Another writer holds the execution's row; finishing it locks the session, then waits.
    let mut other = PgConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut other).await.unwrap();
    sqlx::query("SELECT 1 FROM agent_executions WHERE id = $1::uuid FOR UPDATE")
        .bind(&x)
        .execute(&mut other)
        .await
        .unwrap();
    let (finish, ()) = tokio::join!(a.finish(&x, "COMPLETED", None), async {
        let mut monitor = PgConnection::connect(&url).await.unwrap();
        loop {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE datname = current_database() AND wait_event_type = 'Lock'",
            )
            .fetch_one(&mut monitor)
            .await
            .unwrap();
            if waiting > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Now the other writer wants the session: a cycle. The server's transaction, waiting
        // longer, is the one PostgreSQL aborts; this statement then gets the lock.
        sqlx::query("SELECT 1 FROM sessions WHERE id = $1::uuid FOR UPDATE")
            .bind(&session)
            .execute(&mut other)
            .await
            .expect("the other writer is not the deadlock's victim");
        tokio::time::sleep(Duration::from_millis(100)).await;
        sqlx::query("COMMIT").execute(&mut other).await.unwrap();
    });
    other.close().await.unwrap();
    assert!(
        errors(&finish).is_none(),
        "the aborted transaction ran again and succeeded: {finish:#}"
    );
    assert_eq!(
        finish["data"]["finishAgentExecution"]["status"],
        "COMPLETED"
    );
    assert_eq!(execution_status(&app, &x).await, "completed");
    app.stop().await;
}
