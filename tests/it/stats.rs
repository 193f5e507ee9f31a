//! Analytics: `sessionStats` groups sessions and LLM usage, in SQL, over the `sessions` filter.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::common::TestApp;
use crate::common::fixtures::{self, At, NewSession};

const GROUPS: &str = "query ($by: [SessionDimension!]!, $tz: String!, $filter: SessionFilterInput,
    $first: Int) {
  sessionStats(filter: $filter, timeZone: $tz) {
    groups(by: $by, first: $first) {
      totalCount
      nodes { key { status alertType chainId author periodStart }
        sessionCount activeCount completedCount failedCount timedOutCount cancelledCount
        successRate duration { sessionCount p50Ms p95Ms avgMs } } } } }";

const USAGE: &str = "query ($by: [UsageDimension!]!, $filter: SessionFilterInput) {
  sessionStats(filter: $filter) {
    usage(by: $by) {
      totalCount
      nodes { key { model provider agentName chainId }
        llmCalls failedLlmCalls llmFailureRate inputTokens outputTokens totalTokens
        thinkingTokens estimatedCostUsd executionCount failedExecutionCount
        executionFailureRate } } } }";

fn at(iso: &str) -> DateTime<Utc> {
    iso.parse().unwrap()
}

async fn groups(app: &TestApp, by: Value, tz: &str, filter: Value) -> (Vec<Value>, i64) {
    let data = app
        .data(
            GROUPS,
            json!({ "by": by, "tz": tz, "filter": filter, "first": 100 }),
        )
        .await;
    let groups = &data["sessionStats"]["groups"];
    (
        groups["nodes"].as_array().unwrap().clone(),
        groups["totalCount"].as_i64().unwrap(),
    )
}

/// (period start, session count) of each group.
fn periods(nodes: &[Value]) -> Vec<(String, i64)> {
    nodes
        .iter()
        .map(|n| {
            (
                n["key"]["periodStart"].as_str().unwrap().to_owned(),
                n["sessionCount"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// Five sessions around Europe's switch to summer time (Sunday 2026-03-29, 02:00 CET), one
/// deleted.
async fn five_sessions(app: &TestApp) {
    let pool = app.store.pool();
    for s in [
        NewSession {
            alert_type: "PodCrashLooping",
            status: "completed",
            author: Some("alice"),
            duration_secs: Some(10),
            created_at: at("2026-03-28T23:30:00Z"),
            ..NewSession::default()
        },
        NewSession {
            alert_type: "PodCrashLooping",
            status: "completed",
            author: Some("alice"),
            duration_secs: Some(30),
            final_analysis: Some("The memory limit was too low"),
            created_at: at("2026-03-29T00:30:00Z"),
            ..NewSession::default()
        },
        NewSession {
            alert_type: "HighLatency",
            chain_id: "latency-investigation",
            status: "failed",
            author: Some("bob"),
            duration_secs: Some(20),
            created_at: at("2026-03-29T22:30:00Z"),
            ..NewSession::default()
        },
        NewSession {
            alert_type: "HighLatency",
            chain_id: "latency-investigation",
            status: "cancelled",
            created_at: at("2026-03-30T10:00:00Z"),
            ..NewSession::default()
        },
        NewSession {
            alert_type: "PodCrashLooping",
            status: "in_progress",
            created_at: at("2026-03-30T11:00:00Z"),
            ..NewSession::default()
        },
        NewSession {
            status: "completed",
            duration_secs: Some(1000),
            deleted: true,
            created_at: at("2026-03-30T12:00:00Z"),
            ..NewSession::default()
        },
    ] {
        fixtures::session(pool, s).await;
    }
}

#[tokio::test]
async fn session_figures_are_grouped_by_outcome_type_author_and_calendar() {
    let app = TestApp::start().await;
    five_sessions(&app).await;

    // One group of every session the filter matches (not the deleted one).
    let (all, count) = groups(&app, json!([]), "UTC", json!(null)).await;
    assert_eq!(count, 1);
    let total = &all[0];
    assert_eq!(
        total["key"],
        json!({ "status": null, "alertType": null, "chainId": null,
        "author": null, "periodStart": null })
    );
    assert_eq!(total["sessionCount"], 5);
    assert_eq!(
        (
            &total["activeCount"],
            &total["completedCount"],
            &total["failedCount"],
            &total["cancelledCount"],
            &total["timedOutCount"]
        ),
        (&json!(1), &json!(2), &json!(1), &json!(1), &json!(0))
    );
    // Cancelled sessions have no outcome: 2 completed of 3.
    let rate = total["successRate"].as_f64().unwrap();
    assert!((rate - 2.0 / 3.0).abs() < 1e-9, "{rate}");
    let duration = &total["duration"];
    assert_eq!(
        (
            &duration["sessionCount"],
            &duration["p50Ms"],
            &duration["avgMs"]
        ),
        (&json!(3), &json!(20000.0), &json!(20000.0))
    );
    // Interpolated between 20 and 30 seconds.
    let p95 = duration["p95Ms"].as_f64().unwrap();
    assert!((p95 - 29000.0).abs() < 1e-6, "{p95}");

    // Largest group first.
    let (by_type, count) = groups(&app, json!(["ALERT_TYPE"]), "UTC", json!(null)).await;
    assert_eq!(count, 2);
    assert_eq!(by_type[0]["key"]["alertType"], "PodCrashLooping");
    assert_eq!(by_type[0]["sessionCount"], 3);
    assert_eq!(by_type[0]["successRate"], 1.0);
    assert_eq!(by_type[1]["key"]["alertType"], "HighLatency");
    assert_eq!(by_type[1]["successRate"], 0.0);
    assert_eq!(by_type[1]["duration"]["p50Ms"], 20000.0);

    // Days in UTC, oldest first; in Berlin, the day of 2026-03-30 starts at 22:00 UTC (CEST).
    let (utc_days, _) = groups(&app, json!(["DAY"]), "UTC", json!(null)).await;
    assert_eq!(
        periods(&utc_days),
        [
            ("2026-03-28T00:00:00+00:00".to_owned(), 1),
            ("2026-03-29T00:00:00+00:00".to_owned(), 2),
            ("2026-03-30T00:00:00+00:00".to_owned(), 2)
        ]
    );
    let (berlin_days, _) = groups(&app, json!(["DAY"]), "Europe/Berlin", json!(null)).await;
    assert_eq!(
        periods(&berlin_days),
        [
            ("2026-03-28T23:00:00+00:00".to_owned(), 2),
            ("2026-03-29T22:00:00+00:00".to_owned(), 3)
        ]
    );
    // Weeks start on Monday: Sunday the 29th is in the week of the 23rd.
    let (weeks, _) = groups(&app, json!(["WEEK"]), "UTC", json!(null)).await;
    assert_eq!(
        periods(&weeks),
        [
            ("2026-03-23T00:00:00+00:00".to_owned(), 3),
            ("2026-03-30T00:00:00+00:00".to_owned(), 2)
        ]
    );

    // Several dimensions; sessions without an author form their own group (last in key order).
    let (by_status_author, count) =
        groups(&app, json!(["STATUS", "AUTHOR"]), "UTC", json!(null)).await;
    assert_eq!(count, 4);
    let keys: Vec<(Value, Value, i64)> = by_status_author
        .iter()
        .map(|n| {
            (
                n["key"]["status"].clone(),
                n["key"]["author"].clone(),
                n["sessionCount"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        keys,
        [
            (json!("COMPLETED"), json!("alice"), 2),
            (json!("CANCELLED"), json!(null), 1),
            (json!("FAILED"), json!("bob"), 1),
            (json!("IN_PROGRESS"), json!(null), 1)
        ]
    );

    // The `sessions` filter, search included; the deleted session when asked for.
    let (latency, _) = groups(
        &app,
        json!(["CHAIN"]),
        "UTC",
        json!({ "alertType": "HighLatency" }),
    )
    .await;
    assert_eq!(latency.len(), 1);
    assert_eq!(latency[0]["key"]["chainId"], "latency-investigation");
    assert_eq!(latency[0]["sessionCount"], 2);
    let (searched, _) = groups(&app, json!([]), "UTC", json!({ "search": "memory" })).await;
    assert_eq!(searched[0]["sessionCount"], 1);
    assert_eq!(searched[0]["duration"]["p50Ms"], 30000.0);
    let (nothing, count) =
        groups(&app, json!(["DAY"]), "UTC", json!({ "search": "zanzibar" })).await;
    assert_eq!((nothing.len(), count), (0, 0), "no sessions, no groups");
    let (with_deleted, _) = groups(&app, json!([]), "UTC", json!({ "includeDeleted": true })).await;
    assert_eq!(with_deleted[0]["sessionCount"], 6);

    // `first` bounds the groups returned, not `totalCount`.
    let data = app
        .data(
            GROUPS,
            json!({ "by": ["AUTHOR"], "tz": "UTC", "filter": null, "first": 1 }),
        )
        .await;
    let limited = &data["sessionStats"]["groups"];
    assert_eq!(limited["nodes"].as_array().unwrap().len(), 1);
    assert_eq!(limited["totalCount"], 3);
    assert_eq!(limited["nodes"][0]["key"]["author"], "alice");
    app.stop().await;
}

#[tokio::test]
async fn bad_groupings_are_refused() {
    let app = TestApp::start().await;
    five_sessions(&app).await;
    for (by, tz, first, says) in [
        (json!(["DAY", "WEEK"]), "UTC", 10, "twice"),
        (json!(["STATUS", "STATUS"]), "UTC", 10, "twice"),
        (json!(["DAY"]), "Mars/Olympus_Mons", 10, "unknown time zone"),
        (json!(["DAY"]), " ", 10, "time zone name"),
        (json!([]), "UTC", 0, "between 1 and 1000"),
        (json!([]), "UTC", 1001, "between 1 and 1000"),
    ] {
        let (code, message) = app
            .error(
                GROUPS,
                json!({ "by": by, "tz": tz, "filter": null, "first": first }),
            )
            .await;
        assert_eq!(code, "BAD_USER_INPUT", "{by} {tz} {first}: {message}");
        assert!(message.contains(says), "{message}");
    }
    let (code, _) = app
        .error(USAGE, json!({ "by": [], "filter": { "search": "  " } }))
        .await;
    assert_eq!(
        code, "BAD_USER_INPUT",
        "the filter is checked as `sessions` checks it"
    );
    // Refused even where no session matches; a grouping without days or weeks ignores it.
    let body = app
        .graphql(
            "{ sessionStats(timeZone: \"mem\", filter: { alertType: \"none\" }) {
               a: groups(by: []) { totalCount } b: groups(by: [DAY]) { totalCount }
               c: usage(by: [MODEL, WEEK]) { totalCount }
               d: usage(by: []) { totalCount nodes { llmCalls executionCount estimatedCostUsd } } } }",
            json!({}),
        )
        .await;
    // Sibling fields resolve concurrently, so their errors come in either order.
    let mut errors: Vec<(&Value, &Value)> = body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (&e["path"][1], &e["extensions"]["code"]))
        .collect();
    errors.sort_by_key(|(field, _)| field.as_str());
    assert_eq!(
        errors,
        [
            (&json!("b"), &json!("BAD_USER_INPUT")),
            (&json!("c"), &json!("BAD_USER_INPUT"))
        ],
        "{body}"
    );
    assert_eq!(body["data"]["sessionStats"]["a"]["totalCount"], 1);
    // Usage over no sessions is one group of zeros.
    assert_eq!(
        body["data"]["sessionStats"]["d"],
        json!({ "totalCount": 1, "nodes": [{ "llmCalls": 0, "executionCount": 0, "estimatedCostUsd": 0.0 }] })
    );
    app.stop().await;
}

/// An LLM call of `model`, failed when `error` is given, written as the orchestrator would.
async fn call(
    app: &TestApp,
    at: At,
    model: &str,
    tokens: (i32, i32, i32),
    cost: f64,
    error: Option<&str>,
) {
    sqlx::query(
        "INSERT INTO llm_interactions (id, session_id, stage_id, execution_id, interaction_type, \
         model_name, input_tokens, output_tokens, total_tokens, thinking_tokens, \
         estimated_cost_usd, error_message) \
         VALUES ($1, $2, $3, $4, 'iteration', $5, $6, $7, $6 + $7, $8, $9, $10)",
    )
    .bind(uuid::Uuid::now_v7())
    .bind(at.session)
    .bind(at.stage)
    .bind(at.execution)
    .bind(model)
    .bind(tokens.0)
    .bind(tokens.1)
    .bind(tokens.2)
    .bind(cost)
    .bind(error)
    .execute(app.store.pool())
    .await
    .unwrap();
}

#[tokio::test]
async fn usage_is_grouped_by_model_provider_and_agent_from_roll_ups_kept_on_write() {
    let app = TestApp::start().await;
    let pool = app.store.pool();
    let first = fixtures::session(
        pool,
        NewSession {
            status: "completed",
            ..NewSession::default()
        },
    )
    .await;
    let second = fixtures::session(
        pool,
        NewSession {
            chain_id: "latency-investigation",
            status: "failed",
            ..NewSession::default()
        },
    )
    .await;
    let stage = fixtures::stage(pool, first, 0, "investigate", 2).await;
    let k8s = fixtures::execution(pool, first, stage, 1, "KubernetesAgent", None).await;
    let logs = fixtures::execution(pool, first, stage, 2, "LogsAgent", None).await;
    let other_stage = fixtures::stage(pool, second, 0, "investigate", 1).await;
    let failed = fixtures::execution(pool, second, other_stage, 1, "KubernetesAgent", None).await;
    let idle = fixtures::execution(pool, second, other_stage, 2, "IdleAgent", None).await;
    sqlx::query(
        "UPDATE agent_executions SET status = 'failed', llm_provider = 'openai' WHERE id = $1",
    )
    .bind(failed)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("UPDATE agent_executions SET status = 'active' WHERE id = $1")
        .bind(idle)
        .execute(pool)
        .await
        .unwrap();
    let at = |session, stage, execution| At {
        session,
        stage,
        execution,
    };
    // KubernetesAgent uses two models; gemini-2.5-pro's calls come one per statement and
    // (below) two in one statement, which the roll-up sums in one step.
    call(
        &app,
        at(first, stage, k8s),
        "gemini-2.5-pro",
        (100, 10, 5),
        0.25,
        None,
    )
    .await;
    call(
        &app,
        at(first, stage, k8s),
        "gemini-2.5-flash",
        (50, 5, 0),
        0.01,
        Some("429"),
    )
    .await;
    call(
        &app,
        at(first, stage, logs),
        "gemini-2.5-pro",
        (200, 20, 0),
        0.5,
        None,
    )
    .await;
    call(
        &app,
        at(second, other_stage, failed),
        "gpt-5",
        (300, 30, 7),
        1.0,
        Some("timeout"),
    )
    .await;
    sqlx::query(
        "INSERT INTO llm_interactions (id, session_id, stage_id, execution_id, interaction_type, \
         model_name, input_tokens, output_tokens, total_tokens, estimated_cost_usd) \
         SELECT gen_random_uuid(), $1, $2, $3, 'iteration', 'gemini-2.5-pro', 1000, 100, 1100, \
         0.125 FROM generate_series(1, 2)",
    )
    .bind(first)
    .bind(stage)
    .bind(k8s)
    .execute(pool)
    .await
    .unwrap();

    let usage = |by: Value, filter: Value| {
        let app = &app;
        async move {
            let data = app.data(USAGE, json!({ "by": by, "filter": filter })).await;
            data["sessionStats"]["usage"]["nodes"]
                .as_array()
                .unwrap()
                .clone()
        }
    };

    let all = usage(json!([]), json!(null)).await;
    assert_eq!(all.len(), 1);
    let total = &all[0];
    assert_eq!(total["llmCalls"], 6);
    assert_eq!(total["failedLlmCalls"], 2);
    assert_eq!(total["inputTokens"], 2650);
    assert_eq!(total["outputTokens"], 265);
    assert_eq!(total["totalTokens"], 2915);
    assert_eq!(total["thinkingTokens"], 12);
    assert_eq!(total["estimatedCostUsd"], 2.01);
    // Four executions, each once however many models it called; one of the three that ended
    // failed (the active one has no outcome yet).
    assert_eq!(total["executionCount"], 4);
    assert_eq!(total["failedExecutionCount"], 1);
    let rate = total["executionFailureRate"].as_f64().unwrap();
    assert!((rate - 1.0 / 3.0).abs() < 1e-9, "{rate}");

    let by_model = usage(json!(["MODEL"]), json!(null)).await;
    let models: Vec<(Value, i64, i64, f64)> = by_model
        .iter()
        .map(|n| {
            (
                n["key"]["model"].clone(),
                n["llmCalls"].as_i64().unwrap(),
                n["executionCount"].as_i64().unwrap(),
                n["estimatedCostUsd"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        models,
        [
            (json!("gemini-2.5-pro"), 4, 2, 1.0),
            (json!("gemini-2.5-flash"), 1, 1, 0.01),
            (json!("gpt-5"), 1, 1, 1.0),
            (json!(null), 0, 1, 0.0)
        ],
        "most calls first; the idle execution made none"
    );
    assert_eq!(by_model[1]["llmFailureRate"], 1.0);
    assert_eq!(by_model[0]["llmFailureRate"], 0.0);
    assert_eq!(by_model[3]["llmFailureRate"], Value::Null);

    let by_provider = usage(json!(["PROVIDER"]), json!(null)).await;
    let providers: Vec<(Value, i64, i64)> = by_provider
        .iter()
        .map(|n| {
            (
                n["key"]["provider"].clone(),
                n["llmCalls"].as_i64().unwrap(),
                n["executionCount"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        providers,
        [(json!("google"), 5, 3), (json!("openai"), 1, 1)]
    );

    let by_agent = usage(json!(["AGENT_NAME", "CHAIN"]), json!(null)).await;
    let agents: Vec<(Value, Value, i64, Value)> = by_agent
        .iter()
        .map(|n| {
            (
                n["key"]["agentName"].clone(),
                n["key"]["chainId"].clone(),
                n["executionCount"].as_i64().unwrap(),
                n["executionFailureRate"].clone(),
            )
        })
        .collect();
    assert_eq!(
        agents,
        [
            (
                json!("KubernetesAgent"),
                json!("kubernetes-investigation"),
                1,
                json!(0.0)
            ),
            (
                json!("KubernetesAgent"),
                json!("latency-investigation"),
                1,
                json!(1.0)
            ),
            (
                json!("LogsAgent"),
                json!("kubernetes-investigation"),
                1,
                json!(0.0)
            ),
            (
                json!("IdleAgent"),
                json!("latency-investigation"),
                1,
                Value::Null
            ),
        ]
    );

    // The sessions filter narrows usage too.
    let failed_sessions = usage(json!([]), json!({ "status": ["FAILED"] })).await;
    assert_eq!(failed_sessions[0]["llmCalls"], 1);
    assert_eq!(failed_sessions[0]["executionCount"], 2);

    // The roll-ups agree with the interactions they sum.
    let (summed, rolled): (f64, f64) = sqlx::query_as(
        "SELECT (SELECT sum(estimated_cost_usd)::float8 FROM llm_interactions), \
                (SELECT sum(estimated_cost_usd)::float8 FROM llm_usage_rollups)",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(summed, rolled);
    app.stop().await;
}
