//! What one request may ask for: cost (also of pages of zero and of batches), aliases, root
//! fields, batch length and response size, each refused with its own code and figures.

use reqwest::StatusCode;
use serde_json::{Value, json};

use casefile::api::Limits;
use casefile::http::HttpOptions;

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
        messagesConnection(first: 50) { edges { node { id sequenceNumber role content } } }
        llmInteractionsConnection(first: 20) { edges { node { id modelName inputTokens outputTokens durationMs errorMessage } } }
        mcpInteractionsConnection(first: 20) { edges { node { id serverName toolName durationMs errorMessage } } }
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

#[tokio::test]
async fn documents_are_bounded_before_they_are_parsed_and_before_they_are_expanded() {
    let app = TestApp::start_with(HttpOptions {
        limits: Limits {
            max_query_bytes: 2_000,
            max_query_tokens: 300,
            max_query_nesting: 10,
            max_selections: 500,
            ..Limits::default()
        },
        ..HttpOptions::default()
    })
    .await;
    let refused = [
        (
            format!("{{ __typename }} #{}", "x".repeat(2_000)),
            "DOCUMENT_TOO_LARGE",
            "the query text of 2,016 bytes exceeds the limit of 2,000 (--max-query-bytes)",
        ),
        (
            format!("{{{} }}", " a".repeat(300)),
            "DOCUMENT_TOO_LARGE",
            "the query has more than 300 tokens (--max-query-tokens)",
        ),
        (
            format!("{}{}", "{ viewer ".repeat(11), "}".repeat(11)),
            "QUERY_TOO_DEEP",
            "the query nests braces, brackets or parentheses more than 10 deep (--max-query-nesting)",
        ),
    ];
    for (query, expected_code, expected_message) in refused {
        let (_, body) = post(&app, json!({ "query": query })).await;
        assert_eq!(code(&body), expected_code, "{body}");
        assert_eq!(message(&body), expected_message);
    }

    // Ten fragments, each spreading the next twice: 2^10 `__typename`s from a short text.
    let mut doubling = "{ ...F0 }".to_owned();
    for i in 0..10 {
        doubling.push_str(&format!(
            " fragment F{i} on Query {{ ...F{0} ...F{0} }}",
            i + 1
        ));
    }
    doubling.push_str(" fragment F10 on Query { __typename }");
    let (_, body) = post(&app, json!({ "query": doubling })).await;
    assert_eq!(code(&body), "TOO_MANY_SELECTIONS", "{body}");
    assert!(message(&body).contains("over the limit of 500 (--max-selections)"));

    // A fragment spreading itself is refused there, before anything follows it.
    let cycle = "{ ...A } fragment A on Query { ...B } fragment B on Query { __typename ...A }";
    let (_, body) = post(&app, json!({ "query": cycle })).await;
    assert_eq!(code(&body), "GRAPHQL_VALIDATION_FAILED", "{body}");
    assert_eq!(
        message(&body),
        "Cannot spread fragment \"A\" within itself (through A → B → A)"
    );

    // Selection sets nested through fragments past the same nesting limit.
    let mut chain = "{ ...C0 }".to_owned();
    for i in 0..12 {
        chain.push_str(&format!(" fragment C{i} on Query {{ ...C{} }}", i + 1));
    }
    chain.push_str(" fragment C12 on Query { __typename }");
    let (_, body) = post(&app, json!({ "query": chain })).await;
    assert_eq!(code(&body), "QUERY_TOO_DEEP", "{body}");
    assert!(message(&body).ends_with("(--max-query-nesting)"), "{body}");
    app.stop().await;
}

#[tokio::test]
async fn a_response_carries_a_hundred_errors_and_counts_the_rest() {
    let app = TestApp::start().await;
    let unknown: String = (0..250).map(|i| format!(" x{i}")).collect();
    let (_, body) = post(
        &app,
        json!({ "query": format!("{{ viewer {{{unknown} }} }}") }),
    )
    .await;
    let errors = body["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 101, "{body:.500}");
    assert!(
        errors[..100]
            .iter()
            .all(|e| e["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED")
    );
    assert_eq!(errors[100]["extensions"]["code"], "TOO_MANY_ERRORS");
    assert_eq!(
        errors[100]["message"],
        "150 more errors were left out (a response carries at most 100)"
    );
    app.stop().await;
}

#[tokio::test]
async fn introspection_is_priced_by_what_it_answers_before_it_runs() {
    const GRAPHIQL: &str = include_str!("../introspection/graphiql.graphql");
    // With the defaults, GraphiQL's full introspection passes.
    let app = TestApp::start().await;
    let (_, body) = post(&app, json!({ "query": GRAPHIQL })).await;
    assert!(body["errors"].is_null(), "{body:.500}");
    let answer_bytes = body["data"].to_string().len();

    // Its price is its answer: 10,729 fields, about 250 KB.
    for (limits, expected) in [
        (
            Limits {
                max_query_complexity: 10_000,
                ..Limits::default()
            },
            "QUERY_TOO_COMPLEX",
        ),
        (
            Limits {
                max_response_bytes: answer_bytes / 2,
                ..Limits::default()
            },
            "RESPONSE_TOO_LARGE",
        ),
    ] {
        let strict = TestApp::start_with(HttpOptions {
            limits,
            ..HttpOptions::default()
        })
        .await;
        let (_, body) = post(&strict, json!({ "query": GRAPHIQL })).await;
        assert_eq!(code(&body), expected, "{body:.500}");
        strict.stop().await;
    }

    // A fan-out of possible types and interfaces, a handful of bytes long, is refused at once.
    let mut fan_out = "name".to_owned();
    for _ in 0..7 {
        fan_out = format!("possibleTypes {{ interfaces {{ {fan_out} }} }}");
    }
    let query = format!("{{ __type(name: \"Node\") {{ {fan_out} }} }}");
    let (_, body) = post(&app, json!({ "query": query })).await;
    assert_eq!(code(&body), "QUERY_TOO_COMPLEX", "{body:.500}");
    app.stop().await;
}
