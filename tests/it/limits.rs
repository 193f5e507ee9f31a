//! What one request may ask for: cost (also of pages of zero and of batches), aliases, root
//! fields, batch length and response size, each refused with its own code and figures.

use reqwest::StatusCode;
use serde_json::{Value, json};

use casefile::config::{HttpOptions, Limits};

use crate::common::TestApp;

fn code(body: &Value) -> &str {
    body["errors"][0]["extensions"]["code"]
        .as_str()
        .unwrap_or("")
}

fn message(body: &Value) -> &str {
    body["errors"][0]["message"].as_str().unwrap_or("")
}

async fn post(app: &TestApp, body: Value) -> (StatusCode, Value) {
    let response = app
        .client
        .post(app.url("/graphql"))
        .json(&body)
        .send()
        .await
        .unwrap();
    (response.status(), response.json().await.unwrap())
}

#[tokio::test]
async fn aliases_of_empty_pages_cannot_multiply_work() {
    let app = TestApp::start().await;
    // The old hole: each `sessions(first: 0) { totalCount }` cost 1, so hundreds of thousands
    // fit in a body. Now the aliases are bounded, and each costs its count.
    let many: String = (0..51)
        .map(|i| format!("a{i}: sessions(first: 0) {{ totalCount }} "))
        .collect();
    let (_, body) = post(&app, json!({ "query": format!("{{ {many} }}") })).await;
    assert_eq!(code(&body), "TOO_MANY_ALIASES", "{body}");
    assert_eq!(
        message(&body),
        "51 aliases exceed the limit of 50 (--max-aliases)"
    );

    let priced = "{ a: sessions(first: 0) { totalCount } }";
    let small = HttpOptions {
        limits: Limits {
            max_query_complexity: 100,
            ..Limits::default()
        },
        ..HttpOptions::default()
    };
    let strict = TestApp::start_with(small).await;
    let (_, body) = post(&strict, json!({ "query": priced })).await;
    assert_eq!(
        code(&body),
        "QUERY_TOO_COMPLEX",
        "a count costs what its SQL does: {body}"
    );
    assert_eq!(
        message(&body),
        "query cost 101 exceeds the limit of 100 (--max-query-complexity)"
    );
    // `last` is priced as `first` is.
    let (_, body) = post(
        &strict,
        json!({ "query": "{ a: sessions(last: 0) { totalCount } }" }),
    )
    .await;
    assert_eq!(
        message(&body),
        "query cost 101 exceeds the limit of 100 (--max-query-complexity)"
    );
    // A page of zero still costs its selection once: here a session's stages (10 × 1).
    let (_, body) = post(
        &strict,
        json!({ "query": "{ sessions(first: 0) { edges { node { stages { name } } } } }" }),
    )
    .await;
    assert!(body.get("errors").is_none(), "{body}");
    strict.stop().await;

    // Root fields are bounded too, even through fragments.
    let roots: String = (0..21)
        .map(|i| format!("s{i}: viewer {{ role }} "))
        .collect();
    let (_, body) = post(&app, json!({ "query": format!("{{ {roots} }}") })).await;
    assert_eq!(code(&body), "TOO_MANY_ROOT_FIELDS", "{body}");
    assert_eq!(
        message(&body),
        "21 root fields in one operation exceed the limit of 20 (--max-root-fields)"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_batch_is_bounded_and_shares_one_budget() {
    let options = HttpOptions {
        limits: Limits {
            max_query_complexity: 4_500,
            ..Limits::default()
        },
        ..HttpOptions::default()
    };
    let app = TestApp::start_with(options).await;
    let count = json!({ "query": "{ sessions { totalCount } }" });
    // Each costs 2,001 (a default page of 20, its count included): two fit in 4,500, the
    // third is over the shared budget.
    let (status, body) = post(&app, json!([count, count, count])).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body[0].get("errors").is_none(), "{body}");
    assert!(body[1].get("errors").is_none(), "{body}");
    assert_eq!(code(&body[2]), "QUERY_TOO_COMPLEX", "{body}");
    assert_eq!(
        message(&body[2]),
        "the batch's cost 6,003 so far exceeds the limit of 4,500 for one request (--max-query-complexity)"
    );
    // Separate requests each have the whole budget.
    let (_, body) = post(&app, count.clone()).await;
    assert!(body.get("errors").is_none(), "{body}");

    let eleven: Vec<Value> = (0..11)
        .map(|_| json!({ "query": "{ __typename }" }))
        .collect();
    let (status, body) = post(&app, json!(eleven)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(code(&body), "BATCH_TOO_LARGE", "{body}");
    assert_eq!(
        message(&body),
        "a batch of 11 operations exceeds the limit of 10 (--max-batch-operations)"
    );
    let ten: Vec<Value> = (0..10)
        .map(|_| json!({ "query": "{ __typename }" }))
        .collect();
    let (_, body) = post(&app, json!(ten)).await;
    assert_eq!(body.as_array().map(Vec::len), Some(10));
    app.stop().await;
}

#[tokio::test]
async fn an_oversized_response_is_refused_whole() {
    let options = HttpOptions {
        limits: Limits {
            max_response_bytes: 100_000,
            ..Limits::default()
        },
        ..HttpOptions::default()
    };
    let app = TestApp::start_with(options).await;
    let big = json!({ "blob": "x".repeat(40_000) });
    for _ in 0..3 {
        app.data(
            "mutation ($d: JSON) { createSession(input: { alertType: \"A\", chainId: \"c\", alertData: $d }) { uuid } }",
            json!({ "d": big }),
        )
        .await;
    }
    // Two alerts' data fit; three do not.
    let (_, body) = post(
        &app,
        json!({ "query": "{ sessions(first: 2) { edges { node { alertData } } } }" }),
    )
    .await;
    assert!(body.get("errors").is_none(), "{}", message(&body));
    let (_, body) = post(
        &app,
        json!({ "query": "{ sessions(first: 3) { edges { node { alertData } } } }" }),
    )
    .await;
    assert_eq!(
        code(&body),
        "RESPONSE_TOO_LARGE",
        "{}",
        &body.to_string()[..200]
    );
    assert_eq!(
        message(&body),
        "the response exceeds the limit of 100,000 bytes (--max-response-bytes); select fewer fields or rows"
    );
    assert_eq!(body["data"], Value::Null, "nothing of it is sent");
    assert!(body.to_string().len() < 1_000);
    app.stop().await;
}

/// What a frontend reads to open a session: everything of every agent.
const SESSION_PAGE: &str = "query ($id: ID!) { session(id: $id) {
    id alertType status createdAt durationMs
    stages { id name status successPolicy
      executions { id agentName status
        timeline(first: 100) { edges { node { id sequenceNumber eventType status content metadata createdAt } } }
        messages { id sequenceNumber role content }
        llmInteractions { id modelName inputTokens outputTokens durationMs errorMessage }
        mcpInteractions { id serverName toolName durationMs errorMessage }
      }
    }
} }";

#[tokio::test]
async fn a_frontends_session_page_fits_well_within_the_default_budget() {
    let options = HttpOptions {
        limits: Limits {
            max_query_complexity: 100_000,
            ..Limits::default()
        },
        ..HttpOptions::default()
    };
    let app = TestApp::start_with(options).await;
    let id = app
        .data(
            "mutation { createSession(input: { alertType: \"A\", chainId: \"c\" }) { uuid } }",
            json!({}),
        )
        .await["createSession"]["uuid"]
        .clone();
    let (_, body) = post(
        &app,
        json!({ "query": SESSION_PAGE, "variables": { "id": id } }),
    )
    .await;
    assert!(body.get("errors").is_none(), "{body}");
    app.stop().await;
}
