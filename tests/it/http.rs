//! The HTTP edge: GraphQL over HTTP, GraphiQL, probes and limits.

use chrono::Utc;
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use serde_json::{Value, json};

use casefile::api::Limits;
use casefile::http::HttpOptions;

use crate::common::TestApp;
use crate::common::fixtures;

fn content_type(response: &reqwest::Response) -> String {
    response.headers()[CONTENT_TYPE]
        .to_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn post_negotiates_the_response_media_type() {
    let app = TestApp::start().await;
    let post = |accept: Option<&str>, query: &str| {
        let mut request = app
            .client
            .post(app.url("/graphql"))
            .json(&json!({ "query": query }));
        if let Some(accept) = accept {
            request = request.header(ACCEPT, accept);
        }
        request.send()
    };
    let ok = "{ sessions { totalCount } }";
    let broken = "{ sessions { ";

    let r = post(Some("application/graphql-response+json"), ok)
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(content_type(&r), "application/graphql-response+json");
    assert_eq!(
        r.json::<Value>().await.unwrap(),
        json!({ "data": { "sessions": { "totalCount": 0 } } })
    );

    let r = post(
        Some("application/graphql-response+json, application/json;q=0.9"),
        broken,
    )
    .await
    .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::BAD_REQUEST,
        "a request error is a 400 in the new media type"
    );
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["errors"][0]["extensions"]["code"],
        "GRAPHQL_PARSE_FAILED"
    );
    assert!(
        body.get("data").is_none(),
        "a request error has no data entry: {body}"
    );

    // Naming no operation of the document is the client's mistake, not ours.
    let two = "query A { sessions { totalCount } } query B { viewer { role } }";
    for (name, message) in [
        (Some("C"), "Unknown operation named \"C\""),
        (None, "Operation name required in request."),
    ] {
        let r = app
            .client
            .post(app.url("/graphql"))
            .header(ACCEPT, "application/graphql-response+json")
            .json(&json!({ "query": two, "operationName": name }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        let body: Value = r.json().await.unwrap();
        assert_eq!(
            body["errors"][0]["extensions"]["code"], "BAD_REQUEST",
            "{body}"
        );
        assert_eq!(body["errors"][0]["message"], message);
        assert!(body.get("data").is_none(), "{body}");
    }
    let r = app
        .client
        .post(app.url("/graphql"))
        .json(&json!({ "query": two, "operationName": "B" }))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.json::<Value>().await.unwrap()["data"]["viewer"]["role"],
        "ADMIN"
    );

    for accept in [Some("application/json"), None] {
        let r = post(accept, broken).await.unwrap();
        assert_eq!(
            r.status(),
            StatusCode::OK,
            "legacy application/json keeps 200"
        );
        assert_eq!(content_type(&r), "application/json");
    }

    // Batches.
    let r = app
        .client
        .post(app.url("/graphql"))
        .json(&json!([{ "query": ok }, { "query": "{ __typename }" }]))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.json::<Value>().await.unwrap(),
        json!([{ "data": { "sessions": { "totalCount": 0 } } }, { "data": { "__typename": "Query" } }])
    );
    app.stop().await;
}

#[tokio::test]
async fn get_runs_queries_but_not_mutations() {
    let app = TestApp::start().await;
    let r = app
        .client
        .get(app.url("/graphql"))
        .query(&[
            (
                "query",
                "query ($n: Int) { sessions(first: $n) { totalCount } }",
            ),
            ("variables", r#"{"n": 1}"#),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        r.json::<Value>().await.unwrap()["data"]["sessions"]["totalCount"],
        0
    );

    let r = app
        .client
        .get(app.url("/graphql"))
        .query(&[("query", "mutation { x }")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.headers()["allow"], "POST");

    let r = app
        .client
        .get(app.url("/graphql"))
        .header(ACCEPT, "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    app.stop().await;
}

#[tokio::test]
async fn browsers_get_graphiql_with_a_working_example_query() {
    let app = TestApp::start().await;
    fixtures::investigation(app.store.pool(), Utc::now()).await;
    for path in ["/", "/graphql"] {
        let r = app
            .client
            .get(app.url(path))
            .header(ACCEPT, "text/html,application/xhtml+xml")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert!(content_type(&r).starts_with("text/html"));
        let html = r.text().await.unwrap();
        assert!(html.contains("graphiql.min.js"), "{path}");
        assert!(html.contains("query RecentSessions"), "{path}");
        assert!(html.contains("\"/graphql\""), "{path}");
    }
    // The pre-filled query runs cleanly against real data.
    let data = app.data(casefile::http::EXAMPLE_QUERY, json!({})).await;
    let session = &data["sessions"]["edges"][0]["node"];
    assert_eq!(session["counts"]["stages"], 4);
    // Recorded with a chain name only: no version.
    assert_eq!(session["chain"], serde_json::Value::Null);
    assert_eq!(
        session["stages"][1]["executions"].as_array().unwrap().len(),
        3
    );
    app.stop().await;
}

#[tokio::test]
async fn probes_report_process_and_database() {
    let app = TestApp::start().await;
    let r = app.client.get(app.url("/healthz")).send().await.unwrap();
    assert_eq!(
        (r.status(), r.text().await.unwrap()),
        (StatusCode::OK, "ok".to_owned())
    );
    let r = app.client.get(app.url("/livez")).send().await.unwrap();
    assert_eq!(
        (r.status(), r.text().await.unwrap()),
        (StatusCode::OK, "ok".to_owned())
    );
    let r = app.client.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["status"], "ready", "{body}");
    for check in ["database", "migrations", "change_log"] {
        assert_eq!(body["checks"][check]["ok"], true, "{check}: {body}");
    }

    // A migration of this binary's that the database lacks: not ready, and it says which.
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version = 6")
        .execute(app.store.pool())
        .await
        .unwrap();
    let r = app.client.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["status"], "not ready", "{body}");
    assert_eq!(body["checks"]["database"]["ok"], true, "{body}");
    assert_eq!(body["checks"]["migrations"]["ok"], false, "{body}");
    assert!(
        body["checks"]["migrations"]["reason"]
            .as_str()
            .unwrap()
            .contains("[6]"),
        "{body}"
    );
    app.stop().await;
}

#[tokio::test]
async fn limits_refuse_oversized_deep_and_complex_requests_but_not_introspection() {
    let limits = Limits {
        max_body_bytes: 64 * 1024,
        ..Limits::default()
    };
    let app = TestApp::start_with(HttpOptions {
        limits,
        ..HttpOptions::default()
    })
    .await;

    let padding = "x".repeat(100 * 1024);
    let r = app
        .client
        .post(app.url("/graphql"))
        .json(&json!({ "query": format!("{{ __typename }} # {padding}") }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["errors"][0]["extensions"]["code"], "PAYLOAD_TOO_LARGE");
    assert_eq!(
        body["errors"][0]["message"],
        "the request body exceeds the limit of 65,536 bytes (--max-body-bytes)",
        "{body}"
    );

    let mut deep = String::from("id");
    for _ in 0..10 {
        deep = format!("stages {{ session {{ {deep} }} }}");
    }
    let (code, message) = app
        .error(
            &format!("{{ sessions {{ edges {{ node {{ {deep} }} }} }} }}"),
            json!({}),
        )
        .await;
    assert_eq!(code, "QUERY_TOO_DEEP");
    assert!(
        message.starts_with("query depth 24 exceeds the limit of 16"),
        "{message}"
    );

    let complex = "{ sessions(first: 100) { edges { node { timeline(first: 100) { edges { node {
        stage { timeline(first: 100) { edges { node { content } } } } } } } } } } }";
    let (code, message) = app.error(complex, json!({})).await;
    assert_eq!(code, "QUERY_TOO_COMPLEX");
    assert!(
        message.starts_with("query cost ")
            && message.ends_with(" exceeds the limit of 250,000 (--max-query-complexity)"),
        "{message}"
    );

    let body = app.graphql(INTROSPECTION, json!({})).await;
    assert!(body.get("errors").is_none(), "{body:#}");
    assert_eq!(body["data"]["__schema"]["queryType"]["name"], "Query");
    app.stop().await;
}

/// The introspection query GraphiQL sends (graphql-js `getIntrospectionQuery`).
const INTROSPECTION: &str = r#"
query IntrospectionQuery {
  __schema {
    queryType { name } mutationType { name } subscriptionType { name }
    types { ...FullType }
    directives { name description locations args { ...InputValue } }
  }
}
fragment FullType on __Type {
  kind name description
  fields(includeDeprecated: true) { name description args { ...InputValue } type { ...TypeRef } isDeprecated deprecationReason }
  inputFields { ...InputValue }
  interfaces { ...TypeRef }
  enumValues(includeDeprecated: true) { name description isDeprecated deprecationReason }
  possibleTypes { ...TypeRef }
}
fragment InputValue on __InputValue { name description type { ...TypeRef } defaultValue }
fragment TypeRef on __Type {
  kind name
  ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name
    ofType { kind name ofType { kind name ofType { kind name } } } } } } } }
}"#;

#[tokio::test]
async fn cross_origin_access_only_for_configured_origins() {
    let preflight = |app: &TestApp, origin: &str| {
        app.client
            .request(reqwest::Method::OPTIONS, app.url("/graphql"))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type")
            .send()
    };
    let app = TestApp::start_with(HttpOptions {
        cors_allow_origins: vec!["http://localhost:3000".into()],
        ..HttpOptions::default()
    })
    .await;
    let r = preflight(&app, "http://localhost:3000").await.unwrap();
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "http://localhost:3000"
    );
    let r = preflight(&app, "https://evil.example").await.unwrap();
    assert!(r.headers().get("access-control-allow-origin").is_none());
    app.stop().await;

    let app = TestApp::start().await;
    let r = preflight(&app, "http://localhost:3000").await.unwrap();
    assert!(
        r.headers().get("access-control-allow-origin").is_none(),
        "same origin only by default"
    );
    app.stop().await;
}

/// graphql-http's own audits of the GraphQL-over-HTTP spec: every MUST and every SHOULD holds
/// (only MAY notices are allowed). Needs Node.js and `npm ci --prefix tests/http-audit`
/// (`.ci/run` does it).
#[tokio::test]
async fn the_graphql_over_http_audits_pass() {
    let audit_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/http-audit");
    if !std::path::Path::new(audit_dir)
        .join("node_modules/graphql-http")
        .exists()
    {
        eprintln!("skipped: the GraphQL-over-HTTP audit needs `npm ci --prefix tests/http-audit`");
        return;
    }
    let app = TestApp::start().await;
    let output = tokio::process::Command::new("node")
        .arg(format!("{audit_dir}/audit.mjs"))
        .arg(app.url("/graphql"))
        .output()
        .await;
    let output = match output {
        Ok(output) => output,
        Err(err) => {
            eprintln!("skipped: the GraphQL-over-HTTP audit needs Node.js ({err})");
            app.stop().await;
            return;
        }
    };
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let results: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert!(results.len() > 30, "the audits ran: {results:?}");
    let failed: Vec<&Value> = results
        .iter()
        .filter(|r| r["status"] != "ok" && r["status"] != "notice")
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
    app.stop().await;
}
