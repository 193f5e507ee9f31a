//! An operation validated in full once is validated by its kept verdict after that, checking
//! only the arguments that hold variables: it must refuse exactly what the full pass refuses.

use serde_json::{Value, json};

use crate::common::TestApp;
use crate::operations::{sample, scrape};

async fn post(app: &TestApp, query: &str, operation: Option<&str>, variables: &Value) -> Value {
    let mut request = app
        .client
        .post(app.url("/graphql"))
        .json(&json!({ "query": query, "operationName": operation, "variables": variables }));
    if let Some(token) = &app.token {
        request = request.bearer_auth(token);
    }
    request.send().await.unwrap().json().await.unwrap()
}

async fn kept_validations(app: &TestApp) -> f64 {
    sample(
        &scrape(app).await,
        "casefile_graphql_validations_total",
        &["pass=\"kept\""],
    )
    .unwrap_or(0.0)
}

/// A document, the operation to run, variables its full pass accepts, and variables it refuses
/// (or, last, accepts with other figures).
struct Case {
    query: &'static str,
    operation: Option<&'static str>,
    good: Value,
    others: Vec<Value>,
}

fn cases() -> Vec<Case> {
    let append = "mutation($i: AppendTimelineContentInput!) {
        appendTimelineContent(input: $i) { offset } }";
    vec![
        Case {
            query: "query($s: [SessionStatus!]) {
                sessions(first: 1, filter: { status: $s }) { totalCount } }",
            operation: None,
            good: json!({ "s": ["PENDING"] }),
            others: vec![json!({ "s": ["NOPE"] }), json!({ "s": [null] }), json!({ "s": 7 })],
        },
        // A cost function reads `first`: the figures are computed with each request's value.
        Case {
            query: "query($n: Int) { sessions(first: $n) { totalCount } }",
            operation: None,
            good: json!({ "n": 1 }),
            others: vec![
                json!({ "n": "ten" }),
                json!({ "n": 3_000_000_000_i64 }),
                json!({ "n": 100 }),
                json!({}),
            ],
        },
        Case {
            query: "query($f: SessionFilterInput) {
                sessions(first: 1, filter: $f) { totalCount } }",
            operation: None,
            good: json!({ "f": { "alertType": "a" } }),
            others: vec![
                json!({ "f": { "nope": 1 } }),
                json!({ "f": { "alertType": 5 } }),
                json!({ "f": { "status": "DONE" } }),
            ],
        },
        Case {
            query: "query($b: Boolean!) {
                mcpInteractions(first: 1, filter: { success: $b }) @include(if: $b) {
                    pageInfo { hasNextPage } } }",
            operation: None,
            good: json!({ "b": true }),
            others: vec![json!({ "b": "yes" }), json!({ "b": null }), json!({ "b": false })],
        },
        Case {
            query: "query($n: Int) { ...F } fragment F on Query { sessions(first: $n) { totalCount } }",
            operation: None,
            good: json!({ "n": 2 }),
            others: vec![json!({ "n": 1.5 }), json!({ "n": 5 })],
        },
        Case {
            query: "query A($n: Int) { sessions(first: $n) { totalCount } }
                    query B($s: String) { sessions(first: 1, filter: { alertType: $s }) { totalCount } }",
            operation: Some("B"),
            good: json!({ "s": "x" }),
            // A is not run, but its cost is counted, with its variables.
            others: vec![
                json!({ "s": 5 }),
                json!({ "s": [1] }),
                json!({ "s": "x", "n": "ten" }),
                json!({ "s": "x", "n": 100 }),
            ],
        },
        // Refused when it runs (no such event), after passing validation: its verdict is kept.
        Case {
            query: append,
            operation: None,
            good: json!({ "i": { "eventId": "nope", "offset": 0, "delta": "a" } }),
            others: vec![
                json!({ "i": { "eventId": "nope", "offset": "zero", "delta": "a" } }),
                json!({ "i": { "offset": 0, "delta": "a" } }),
                json!({ "i": { "eventId": "nope", "offset": 0, "delta": "a", "extra": 1 } }),
            ],
        },
    ]
}

#[tokio::test]
async fn a_kept_verdict_refuses_exactly_what_a_full_pass_refuses() {
    let app = TestApp::start().await;
    let kept_before = kept_validations(&app).await;
    let mut kept_requests = 0.0;
    let mut refused = 0;
    for (i, case) in cases().into_iter().enumerate() {
        let first = post(&app, case.query, case.operation, &case.good).await;
        let again = post(&app, case.query, case.operation, &case.good).await;
        assert_eq!(
            first, again,
            "case {i}: the kept verdict answers as the full pass"
        );
        kept_requests += 1.0;
        for (j, variables) in case.others.iter().enumerate() {
            // The same text with a comment after it is another document: validated in full.
            let fresh = format!("{}\n# {i}.{j}", case.query);
            let full = post(&app, &fresh, case.operation, variables).await;
            let kept = post(&app, case.query, case.operation, variables).await;
            kept_requests += 1.0;
            assert_eq!(
                full, kept,
                "case {i}, variables {variables}: the kept verdict answers as the full pass"
            );
            if full.get("data").is_none_or(Value::is_null) && full["errors"].is_array() {
                refused += 1;
            }
        }
    }
    assert!(
        refused >= 14,
        "the cases refuse bad values ({refused} refused)"
    );
    let kept = kept_validations(&app).await - kept_before;
    assert!(
        kept >= kept_requests,
        "{kept_requests} requests were validated by kept verdicts ({kept} counted)"
    );
    app.stop().await;
}
