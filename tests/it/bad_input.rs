//! Bad input gets a clear error with a code, never a panic or a leak.

use chrono::Utc;
use serde_json::{Value, json};

use casefile::api::ids::{NodeType, encode};

use crate::common::TestApp;
use crate::common::fixtures;

#[tokio::test]
async fn unknown_ids_give_null() {
    let app = TestApp::start().await;
    let missing = uuid::Uuid::now_v7();
    let data = app
        .data(
            "query ($gid: ID!, $raw: ID!, $stage: ID!) { a: session(id: $gid) { id } b: session(id: $raw) { id }
               c: node(id: $stage) { id } d: nodes(ids: [$gid, $stage]) { id } }",
            json!({ "gid": encode(NodeType::Session, missing).0, "raw": missing.to_string(),
                    "stage": encode(NodeType::Stage, missing).0 }),
        )
        .await;
    assert_eq!(
        data,
        json!({ "a": null, "b": null, "c": null, "d": [null, null] })
    );
    app.stop().await;
}

#[tokio::test]
async fn malformed_ids_are_bad_user_input() {
    let app = TestApp::start().await;
    for id in [
        "nope",
        "!!!",
        &base64_of("Session:not-a-uuid"),
        &base64_of("Planet:0190a0b4-0000-7000-8000-000000000000"),
    ] {
        let (code, message) = app
            .error(
                "query ($id: ID!) { session(id: $id) { id } }",
                json!({ "id": id }),
            )
            .await;
        assert_eq!(code, "BAD_USER_INPUT", "{id}: {message}");
        assert!(message.contains("is not a valid id"), "{message}");
        let (code, _) = app
            .error(
                "query ($id: ID!) { node(id: $id) { id } }",
                json!({ "id": id }),
            )
            .await;
        assert_eq!(code, "BAD_USER_INPUT");
    }
    let stage_id = encode(NodeType::Stage, uuid::Uuid::now_v7()).0;
    let (code, message) = app
        .error(
            "query ($id: ID!) { session(id: $id) { id } }",
            json!({ "id": stage_id }),
        )
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
    assert!(
        message.contains("is a Stage id, expected a Session id"),
        "{message}"
    );
    app.stop().await;
}

fn base64_of(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[tokio::test]
async fn page_sizes_out_of_range_are_bad_user_input() {
    let app = TestApp::start().await;
    let session = fixtures::investigation(app.store.pool(), Utc::now()).await;
    let list = "query ($f: Int, $l: Int) { sessions(first: $f, last: $l) { totalCount } }";
    let timeline = "query ($id: ID!, $f: Int, $l: Int) { session(id: $id) {
        timeline(first: $f, last: $l) { edges { cursor } } } }";
    for arg in ["first", "last"] {
        let short = &arg[..1];
        for size in [-1, 101, 1_000_000] {
            for (query, variables) in [
                (list, json!({ short: size })),
                (timeline, json!({ "id": session.to_string(), short: size })),
            ] {
                let (code, message) = app.error(query, variables).await;
                assert_eq!(code, "BAD_USER_INPUT");
                assert_eq!(
                    message,
                    format!("`{arg}` must be between 0 and 100 (--max-page-size), got {size}")
                );
            }
        }
    }
    // Both at once: refused, not guessed at.
    for (query, variables) in [
        (list, json!({ "f": 1, "l": 1 })),
        (
            timeline,
            json!({ "id": session.to_string(), "f": 5, "l": 0 }),
        ),
    ] {
        let (code, message) = app.error(query, variables).await;
        assert_eq!(code, "BAD_USER_INPUT");
        assert_eq!(message, "give `first` or `last`, not both");
    }
    app.stop().await;
}

#[tokio::test]
async fn foreign_and_forged_cursors_are_bad_user_input() {
    let app = TestApp::start().await;
    let pool = app.store.pool();
    let a = fixtures::investigation(pool, Utc::now()).await;
    let b = fixtures::investigation(pool, Utc::now()).await;
    let timeline = "query ($id: ID!, $after: String) { session(id: $id) { timeline(first: 1, after: $after) { pageInfo { endCursor } } } }";
    let list = "query ($after: String, $order: SessionOrder) { sessions(first: 1, after: $after, orderBy: $order) { pageInfo { endCursor } } }";
    let a_cursor = app.data(timeline, json!({ "id": a.to_string() })).await["session"]["timeline"]
        ["pageInfo"]["endCursor"]
        .clone();
    let list_cursor = app.data(list, json!({})).await["sessions"]["pageInfo"]["endCursor"].clone();

    let cases: Vec<(&str, Value, &str)> = vec![
        (
            timeline,
            json!({ "id": b.to_string(), "after": a_cursor }),
            "another session",
        ),
        (
            timeline,
            json!({ "id": a.to_string(), "after": list_cursor }),
            "sessions list",
        ),
        (list, json!({ "after": a_cursor }), "belongs to a timeline"),
        (
            list,
            json!({ "after": list_cursor, "order": { "field": "AUTHOR" } }),
            "ordered by CREATED_AT",
        ),
        (list, json!({ "after": "forged" }), "not a valid cursor"),
        (
            list,
            json!({ "after": base64url(r#"{"sessions":{"order":"CREATED_AT","value":{"s":"x"},"id":"0190a0b4-0000-7000-8000-000000000000"}}"#) }),
            "not a valid cursor",
        ),
        (
            timeline,
            json!({ "id": a.to_string(), "after": base64url(r#"{"timeline":{"session":"x","seq":1}}"#) }),
            "not a valid cursor",
        ),
        (
            timeline,
            json!({ "id": a.to_string(), "after": base64url(&format!(r#"{{"timeline":{{"session":"{a}","seq":-5}}}}"#)) }),
            "not a valid cursor",
        ),
    ];
    for (query, variables, expected) in cases {
        let (code, message) = app.error(query, variables.clone()).await;
        assert_eq!(code, "BAD_USER_INPUT", "{variables}");
        assert!(message.contains(expected), "{variables}: {message}");
        // The same cursor is refused the same way as `before`.
        let (query, variables) = (
            query
                .replace("after", "before")
                .replace("first: 1", "last: 1"),
            json!({ "id": variables["id"], "order": variables["order"], "before": variables["after"] }),
        );
        let (code, message) = app.error(&query, variables.clone()).await;
        assert_eq!(code, "BAD_USER_INPUT", "{variables}");
        assert!(message.contains(expected), "{variables}: {message}");
    }
    app.stop().await;
}

fn base64url(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s)
}

#[tokio::test]
async fn bad_filter_values_are_bad_user_input() {
    let app = TestApp::start().await;
    let q = "query ($filter: SessionFilterInput, $order: SessionOrder) { sessions(filter: $filter, orderBy: $order) { totalCount } }";
    let cases = [
        (
            json!({ "filter": { "search": "   " } }),
            "at least one word",
        ),
        (
            json!({ "filter": { "search": "x".repeat(1001) } }),
            "`search` is 1001 characters long; at most 1000 are allowed",
        ),
        (
            json!({ "order": { "field": "RELEVANCE" } }),
            "needs a `search`",
        ),
        (
            json!({ "filter": { "alertDataContains": ["prod"] } }),
            "must be a JSON object",
        ),
        (json!({ "filter": { "status": ["EXPLODED"] } }), "EXPLODED"),
        (
            json!({ "filter": { "createdAfter": "yesterday" } }),
            "DateTime",
        ),
        (
            json!({ "filter": { "createdAfter": "2026-01-02T00:00:00Z", "createdBefore": "2026-01-01T00:00:00Z" } }),
            "earlier than",
        ),
        (json!({ "filter": { "color": "red" } }), "color"),
        (json!({ "order": { "field": "WEIGHT" } }), "WEIGHT"),
    ];
    for (variables, expected) in cases {
        let (code, message) = app.error(q, variables.clone()).await;
        assert_eq!(code, "BAD_USER_INPUT", "{variables}: {message}");
        assert!(message.contains(expected), "{variables}: {message}");
    }
    // Invalid literals in the document itself are validation failures.
    let (code, _) = app
        .error(
            "{ sessions(filter: { status: [EXPLODED] }) { totalCount } }",
            json!({}),
        )
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
    let (code, _) = app.error("{ sessions { noSuchField } }", json!({})).await;
    assert_eq!(code, "GRAPHQL_VALIDATION_FAILED");
    let (code, _) = app.error("{ sessions { ", json!({})).await;
    assert_eq!(code, "GRAPHQL_PARSE_FAILED");
    app.stop().await;
}

#[tokio::test]
async fn internal_errors_do_not_leak_sql() {
    let app = TestApp::start().await;
    let session = fixtures::investigation(app.store.pool(), Utc::now()).await;
    // Break the database under the server: the error must be generic and coded.
    sqlx::query("ALTER TABLE stages RENAME TO stages_gone")
        .execute(app.store.pool())
        .await
        .unwrap();
    // Through the resolvers (a fragment sends it there) the stages fail; answered in one
    // statement (`api::compiled`), the session does.
    for (query, path) in [
        (
            "query ($id: ID!) { session(id: $id) { ... on Session { alertType stages { name } } } }",
            json!(["session", "stages"]),
        ),
        (
            "query ($id: ID!) { session(id: $id) { alertType stages { name } } }",
            json!(["session"]),
        ),
        // `sessions` cannot be null: no data at all.
        (
            "{ sessions(first: 2) { edges { node { stages { name } } } } }",
            json!(["sessions"]),
        ),
    ] {
        let body = app
            .graphql(query, json!({ "id": session.to_string() }))
            .await;
        assert!(body["data"]["session"]["stages"].is_null());
        if path == json!(["sessions"]) {
            assert!(body["data"].is_null(), "{body}");
        }
        let error = &body["errors"][0];
        assert_eq!(error["extensions"]["code"], "INTERNAL_SERVER_ERROR");
        assert_eq!(error["message"], "internal server error");
        let text = body.to_string();
        assert!(
            !text.contains("stages_gone") && !text.contains("relation") && !text.contains("SELECT"),
            "leaked: {text}"
        );
        assert_eq!(error["path"], path, "{text}");
    }
    sqlx::query("ALTER TABLE stages_gone RENAME TO stages")
        .execute(app.store.pool())
        .await
        .unwrap();
    app.stop().await;
}

/// Found by the fuzzer: both were INTERNAL_SERVER_ERROR.
#[tokio::test]
async fn fuzzer_findings_are_client_errors() {
    let app = TestApp::start().await;
    // An input object given a scalar.
    let (code, _) = app
        .error(
            "mutation ($v: CreateStageInput!) { createStage(input: $v) { uuid } }",
            json!({ "v": "x" }),
        )
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
    // A subscription over plain HTTP, where no stream can carry it.
    let (code, message) = app
        .error("subscription { sessions { status } }", json!({}))
        .await;
    assert_eq!(code, "BAD_REQUEST", "{message}");
    app.stop().await;
}
