//! What operators see: Prometheus metrics, request ids, probes, persisted queries and
//! compressed responses. (Counters are the process's: tests assert on their own operation
//! names, or on at-least figures.)

use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::common::TestApp;
use crate::common::sse::SseSubscription;
use crate::write_api::Agent;
use casefile::http::{HttpOptions, MetricsOptions};

/// The value of the first sample of `name` whose labels include every one of `labels`.
pub fn sample(metrics: &str, name: &str, labels: &[&str]) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
        (metric == name && labels.iter().all(|l| rest.contains(l))).then(|| value.parse().ok())?
    })
}

pub async fn scrape(app: &TestApp) -> String {
    let response = app.client.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    response.text().await.unwrap()
}

#[tokio::test]
async fn metrics_count_operations_by_name_type_and_outcome() {
    let app = TestApp::start().await;
    for _ in 0..2 {
        app.data(
            "query MetricsProbe { sessions(first: 1) { totalCount } }",
            json!({}),
        )
        .await;
    }
    let (code, _) = app.error("query MetricsBroken { nope }", json!({})).await;
    assert_eq!(code, "GRAPHQL_VALIDATION_FAILED");

    let metrics = scrape(&app).await;
    let probe = [
        r#"operation="MetricsProbe""#,
        r#"type="query""#,
        r#"outcome="ok""#,
    ];
    assert_eq!(
        sample(&metrics, "casefile_graphql_requests_total", &probe),
        Some(2.0),
        "{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            "casefile_graphql_request_duration_seconds_count",
            &probe
        ),
        Some(2.0)
    );
    // A refused operation's name does not become a label value (it would use up the room).
    assert!(!metrics.contains("MetricsBroken"), "{metrics}");
    assert!(
        sample(
            &metrics,
            "casefile_graphql_requests_total",
            &[
                r#"operation="other""#,
                r#"outcome="GRAPHQL_VALIDATION_FAILED""#
            ]
        )
        .is_some_and(|n| n >= 1.0),
        "{metrics}"
    );
    assert!(
        sample(
            &metrics,
            "casefile_http_requests_total",
            &[r#"route="/graphql""#, r#"method="POST""#, r#"status="200""#]
        )
        .is_some_and(|n| n >= 3.0)
    );
    for present in [
        "# TYPE casefile_graphql_request_duration_seconds histogram",
        "# HELP casefile_graphql_requests_total GraphQL operations run",
        "casefile_graphql_sql_statements_bucket{le=\"1\"}",
        "casefile_graphql_loader_batches_count",
        "casefile_db_pool_connections{state=\"idle\"}",
        "casefile_db_pool_max_connections",
        "casefile_db_pool_waiting",
        "casefile_change_log_backlog",
    ] {
        assert!(metrics.contains(present), "{present} in:\n{metrics}");
    }
    app.stop().await;
}

#[tokio::test]
async fn live_and_ingest_metrics_follow_a_session() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let (session, exec) = crate::live::running_execution(&a).await;
    let mut sub = SseSubscription::start(
        app.addr,
        "subscription ($s: ID!) { timeline(sessionId: $s) { kind delta cursor } }",
        json!({ "s": session }),
    )
    .await;
    let (event, _) = a.event(&exec, "STREAMING").await;
    let created = sub.next().await.expect("the created event");
    assert_eq!(created["timeline"]["kind"], "CREATED");

    let open = scrape(&app).await;
    assert!(
        sample(
            &open,
            "casefile_active_subscriptions",
            &[r#"field="timeline""#]
        )
        .is_some_and(|n| n >= 1.0),
        "{open}"
    );
    assert!(
        sample(&open, "casefile_open_streams", &[r#"transport="sse""#]).is_some_and(|n| n >= 1.0)
    );

    // Token-rate appends, faster than the coalescing window.
    let before = sample(&open, "casefile_ingest_appended_bytes_total", &[]).unwrap_or(0.0);
    let mut offset = 0;
    let mut text = String::new();
    for i in 0..20 {
        let piece = format!("tök{i} ");
        a.append(&event, offset, &piece).await;
        offset += piece.chars().count() as i64;
        text.push_str(&piece);
    }
    let mut received = String::new();
    while received.len() < text.len() {
        let update = sub.next().await.expect("an update");
        received.push_str(update["timeline"]["delta"].as_str().unwrap_or_default());
    }
    assert_eq!(received, text);

    let after = scrape(&app).await;
    assert!(
        sample(&after, "casefile_ingest_appended_bytes_total", &[])
            .is_some_and(|n| n >= before + text.len() as f64),
        "{after}"
    );
    assert!(
        sample(
            &after,
            "casefile_ingest_operations_total",
            &[r#"mutation="appendTimelineContent""#]
        )
        .is_some_and(|n| n >= 20.0)
    );
    assert!(
        sample(&after, "casefile_live_delivery_lag_seconds_count", &[]).is_some_and(|n| n >= 1.0)
    );
    drop(sub);
    app.stop().await;
}

#[tokio::test]
async fn metrics_can_require_a_token_or_listen_apart() {
    let app = TestApp::start_with(HttpOptions {
        metrics: MetricsOptions {
            listen: None,
            token: Some("scrape-secret".to_owned()),
        },
        ..HttpOptions::default()
    })
    .await;
    let refused = app.client.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    let wrong = app.client.get(app.url("/metrics")).bearer_auth("nope");
    assert_eq!(
        wrong.send().await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    let scraped = app
        .client
        .get(app.url("/metrics"))
        .bearer_auth("scrape-secret")
        .send()
        .await
        .unwrap();
    assert_eq!(scraped.status(), StatusCode::OK);
    assert!(scraped.text().await.unwrap().contains("casefile_"));
    app.stop().await;

    let db = crate::common::TestDb::start().await;
    let store = db.store();
    let options = HttpOptions {
        metrics: MetricsOptions {
            listen: Some("127.0.0.1:0".parse().unwrap()),
            token: None,
        },
        ..HttpOptions::default()
    };
    let server =
        casefile::server::Server::start(store.clone(), &options, "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
    let client = reqwest::Client::new();
    let main = client
        .get(format!("http://{}/metrics", server.addr()))
        .send()
        .await
        .unwrap();
    assert_eq!(
        main.status(),
        StatusCode::NOT_FOUND,
        "not on the main address"
    );
    let apart = server.metrics_addr().expect("a metrics address");
    let scraped = client
        .get(format!("http://{apart}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(scraped.status(), StatusCode::OK);
    server.stop().await;
    drop(store);
    db.stop().await;
}

#[tokio::test]
async fn request_ids_are_taken_or_made_and_echoed() {
    let app = TestApp::start().await;
    let query = json!({ "query": "{ __typename }" });
    let given = app
        .client
        .post(app.url("/graphql"))
        .header("x-request-id", "lb-7f3a2c")
        .json(&query)
        .send()
        .await
        .unwrap();
    assert_eq!(given.headers()["x-request-id"], "lb-7f3a2c");

    let made = app
        .client
        .post(app.url("/graphql"))
        .json(&query)
        .send()
        .await
        .unwrap();
    let id = made.headers()["x-request-id"].to_str().unwrap();
    assert!(uuid::Uuid::parse_str(id).is_ok(), "{id}");

    for unfit in ["x".repeat(200), "two words".to_owned()] {
        let replaced = app
            .client
            .post(app.url("/graphql"))
            .header("x-request-id", &unfit)
            .json(&query)
            .send()
            .await
            .unwrap();
        let id = replaced.headers()["x-request-id"].to_str().unwrap();
        assert!(
            uuid::Uuid::parse_str(id).is_ok(),
            "{unfit:?} replaced: {id}"
        );
    }

    // Every response has one, refusals and probes too.
    let probe = app.client.get(app.url("/livez")).send().await.unwrap();
    assert!(probe.headers().contains_key("x-request-id"));
    app.stop().await;
}

fn sha256(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// Apollo's automatic persisted queries, as its link speaks them: the hash alone, then (when
/// the server does not know it) the query with its hash, then the hash alone again.
#[tokio::test]
async fn automatic_persisted_queries_over_post_and_get() {
    let app = TestApp::start().await;
    let query = "query PersistedProbe { sessions(first: 1) { totalCount } }";
    let hash = sha256(query);
    let extensions = json!({ "persistedQuery": { "version": 1, "sha256Hash": hash } });

    let post = |body: Value| {
        app.client
            .post(app.url("/graphql"))
            .header("accept", "application/graphql-response+json")
            .json(&body)
            .send()
    };
    let answer = |body: Value| {
        let sent = post(body);
        async move { sent.await.unwrap().json::<Value>().await.unwrap() }
    };
    let unknown = post(json!({ "extensions": extensions })).await.unwrap();
    assert_eq!(
        unknown.status(),
        StatusCode::OK,
        "the client's cue, not a failure"
    );
    let body: Value = unknown.json().await.unwrap();
    assert_eq!(
        body["errors"][0]["extensions"]["code"],
        "PERSISTED_QUERY_NOT_FOUND"
    );
    assert_eq!(body["errors"][0]["message"], "PersistedQueryNotFound");

    let registered = answer(json!({ "query": query, "extensions": extensions })).await;
    assert_eq!(
        registered["data"]["sessions"]["totalCount"], 0,
        "{registered}"
    );

    let by_hash =
        answer(json!({ "extensions": extensions, "operationName": "PersistedProbe" })).await;
    assert_eq!(by_hash["data"]["sessions"]["totalCount"], 0, "{by_hash}");

    // `useGETForHashedQueries`: only `extensions` (and the operation name) in the URL.
    let get = app
        .client
        .get(app.url("/graphql"))
        .query(&[
            ("operationName", "PersistedProbe"),
            ("extensions", &extensions.to_string()),
        ])
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), StatusCode::OK);
    assert_eq!(
        get.headers()["cache-control"],
        "private, no-store",
        "no shared cache keeps a caller's answer"
    );
    let body: Value = get.json().await.unwrap();
    assert_eq!(body["data"]["sessions"]["totalCount"], 0, "{body}");

    // A hash that is not the query's.
    let wrong = answer(json!({ "query": "{ __typename }", "extensions": extensions })).await;
    assert_eq!(
        wrong["errors"][0]["extensions"]["code"], "BAD_REQUEST",
        "{wrong}"
    );

    // A persisted mutation is still a mutation: never over GET.
    let mutation = "mutation PersistedWrite { revokeApiToken(name: \"none\") { name } }";
    let mutation_ext =
        json!({ "persistedQuery": { "version": 1, "sha256Hash": sha256(mutation) } });
    post(json!({ "query": mutation, "extensions": mutation_ext }))
        .await
        .unwrap();
    let get = app
        .client
        .get(app.url("/graphql"))
        .query(&[("extensions", &mutation_ext.to_string())])
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), StatusCode::METHOD_NOT_ALLOWED);
    app.stop().await;
}

#[tokio::test]
async fn large_responses_are_compressed_and_streams_never() {
    let app = TestApp::start().await;
    casefile::demo::load(&app.store).await.unwrap();
    let big = json!({ "query": "{ sessions(first: 20) { edges { node { id alertType status \
        stages { name executions { agentName status } } timeline(first: 20) { edges { node { content } } } } } } }" });
    for encoding in ["gzip", "br"] {
        let response = app
            .client
            .post(app.url("/graphql"))
            .header("accept-encoding", encoding)
            .json(&big)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["content-encoding"], encoding);
    }
    let small = app
        .client
        .post(app.url("/graphql"))
        .header("accept-encoding", "gzip")
        .json(&json!({ "query": "{ __typename }" }))
        .send()
        .await
        .unwrap();
    assert!(
        !small.headers().contains_key("content-encoding"),
        "too small to be worth it"
    );

    let session: Value = app
        .data(
            "{ sessions(first: 1) { edges { node { id } } } }",
            json!({}),
        )
        .await;
    let id = session["sessions"]["edges"][0]["node"]["id"].clone();
    for accept in ["text/event-stream", "multipart/mixed"] {
        let stream = app
            .client
            .post(app.url("/graphql"))
            .header("accept", accept)
            .header("accept-encoding", "gzip, br")
            .json(&json!({
                "query": "subscription ($s: ID!) { session(id: $s) { kind } }",
                "variables": { "s": id },
            }))
            .send()
            .await
            .unwrap();
        assert_eq!(stream.status(), StatusCode::OK, "{accept}");
        assert!(
            !stream.headers().contains_key("content-encoding"),
            "{accept} must reach the client as it is sent"
        );
    }
    app.stop().await;
}
