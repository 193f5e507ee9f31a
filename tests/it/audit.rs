//! The audit trail (issue 31, part 2): a control-plane change leaves one record in its own
//! transaction, with who made it, from which request and client, and a field diff.

use casefile::auth::{AuthMode, AuthOptions};
use casefile::http::HttpOptions;
use casefile::model::Role;
use serde_json::{Value, json};

use crate::common::TestApp;

const REGISTER: &str = "mutation ($n: String!, $v: String!, $d: JSON!) {
    registerChain(input: { name: $n, version: $v, definition: $d }) { id uuid } }";

const DEPRECATE: &str = "mutation ($n: String!, $v: String!) {
    deprecateChain(chain: { name: $n, version: $v }) { deprecatedAt } }";

/// Sends `query` with a request id and user agent of the test's own.
async fn send(app: &TestApp, request_id: &str, query: &str, variables: Value) -> Value {
    app.client
        .post(app.url("/graphql"))
        .bearer_auth(app.token.as_deref().unwrap())
        .header("x-request-id", request_id)
        .header("user-agent", "audit-test/1.0")
        .json(&json!({ "query": query, "variables": variables }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The audit records of targets of `target_type`, oldest first.
async fn records(app: &TestApp, target_type: &str) -> Vec<Value> {
    sqlx::query_scalar(
        "SELECT jsonb_build_object('actor', actor, 'action', action, 'targetType', target_type, \
             'targetId', target_id, 'requestId', request_id, 'client', client_address, \
             'userAgent', user_agent, 'changes', changes) \
         FROM audit_records WHERE target_type = $1 ORDER BY at, id",
    )
    .bind(target_type)
    .fetch_all(app.store.pool())
    .await
    .unwrap()
}

fn changed(record: &Value, field: &str) -> Value {
    record["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|change| change["field"] == field)
        .cloned()
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn chain_registration_and_deprecation_are_audited_once_with_a_field_diff() {
    let mut app = TestApp::start_with(HttpOptions {
        auth: AuthOptions {
            mode: AuthMode::Tokens,
            ..AuthOptions::default()
        },
        ..HttpOptions::default()
    })
    .await;
    app.token = Some(app.token("ops", Role::Admin, None).await);
    let definition = json!({ "stages": [{ "name": "Only" }] });
    let variables = json!({ "n": "triage", "v": "1", "d": definition });

    let body = send(&app, "req-register", REGISTER, variables.clone()).await;
    let uuid = body["data"]["registerChain"]["uuid"].clone();
    assert!(uuid.is_string(), "{body}");
    // Registering it again with the same definition changes nothing: no second record.
    send(&app, "req-again", REGISTER, variables).await;
    // A refused registration (another definition) is rolled back: no record.
    let other = json!({ "n": "triage", "v": "1", "d": { "stages": [{ "name": "Other" }] } });
    let body = send(&app, "req-conflict", REGISTER, other).await;
    assert_eq!(
        body["errors"][0]["extensions"]["code"], "CONFLICT",
        "{body}"
    );

    let log = records(&app, "Chain").await;
    assert_eq!(log.len(), 1, "{log:#?}");
    let created = &log[0];
    assert_eq!(created["actor"], "token:ops");
    assert_eq!(created["action"], "registerChain");
    assert_eq!(created["targetType"], "Chain");
    assert_eq!(created["targetId"], uuid);
    assert_eq!(created["requestId"], "req-register");
    assert_eq!(created["client"], "127.0.0.1");
    assert_eq!(created["userAgent"], "audit-test/1.0");
    assert_eq!(
        changed(created, "version"),
        json!({ "field": "version", "before": null, "after": "1" })
    );
    // The definition (up to 64 KiB) is left out.
    assert_eq!(changed(created, "definition"), Value::Null);

    let nv = json!({ "n": "triage", "v": "1" });
    let body = send(&app, "req-deprecate", DEPRECATE, nv.clone()).await;
    let at = body["data"]["deprecateChain"]["deprecatedAt"].clone();
    assert!(at.is_string(), "{body}");
    send(&app, "req-deprecate-again", DEPRECATE, nv).await;
    let log = records(&app, "Chain").await;
    assert_eq!(log.len(), 2, "{log:#?}");
    let deprecated = &log[1];
    assert_eq!(deprecated["action"], "deprecateChain");
    assert_eq!(deprecated["requestId"], "req-deprecate");
    // Only what changed: the deprecation, from nothing.
    assert_eq!(
        deprecated["changes"].as_array().unwrap().len(),
        2,
        "{deprecated}"
    );
    assert_eq!(
        changed(deprecated, "deprecatedBy"),
        json!({ "field": "deprecatedBy", "before": null, "after": "token:ops" })
    );
    let after = changed(deprecated, "deprecatedAt")["after"].clone();
    assert_eq!(
        chrono::DateTime::parse_from_rfc3339(after.as_str().unwrap()).unwrap(),
        chrono::DateTime::parse_from_rfc3339(at.as_str().unwrap()).unwrap()
    );
    app.stop().await;
}

#[tokio::test]
async fn every_mutation_is_audited_or_exempt_by_name() {
    use casefile::store::audit::{AUDITED, EXEMPT, NOT_YET_AUDITED};
    let app = TestApp::start().await;
    let d = app
        .data(
            "{ __type(name: \"Mutation\") { fields { name } } }",
            json!({}),
        )
        .await;
    let mut fields: Vec<&str> = d["__type"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|field| field["name"].as_str().unwrap())
        .collect();
    fields.sort_unstable();
    let mut listed: Vec<&str> = [EXEMPT, AUDITED, NOT_YET_AUDITED].concat();
    listed.sort_unstable();
    // Each mutation in exactly one list, and each listed name a mutation.
    assert_eq!(fields, listed);
    app.stop().await;
}

#[tokio::test]
async fn token_creation_and_revocation_are_audited_without_the_secret() {
    let mut app = TestApp::start_with(HttpOptions {
        auth: AuthOptions {
            mode: AuthMode::Tokens,
            ..AuthOptions::default()
        },
        ..HttpOptions::default()
    })
    .await;
    app.token = Some(app.token("root", Role::Admin, None).await);
    let create = "mutation { createApiToken(input: { name: \"bot\", role: WRITER }) {
        token { name } secret } }";
    let revoke = "mutation { revokeApiToken(name: \"bot\") { revokedAt } }";
    let body = send(&app, "req-create", create, json!({})).await;
    let secret = body["data"]["createApiToken"]["secret"].clone();
    assert!(secret.is_string(), "{body}");
    send(&app, "req-revoke", revoke, json!({})).await;
    send(&app, "req-revoke-again", revoke, json!({})).await;

    let log = records(&app, "ApiToken").await;
    // The helper's token (no caller, no request), then this test's two changes.
    let actions: Vec<_> = log.iter().map(|r| r["action"].clone()).collect();
    assert_eq!(
        actions,
        ["createApiToken", "createApiToken", "revokeApiToken"],
        "{log:#?}"
    );
    assert_eq!(log[0]["actor"], Value::Null);
    let created = &log[1];
    assert_eq!(created["actor"], "token:root");
    assert_eq!(created["requestId"], "req-create");
    assert_eq!(
        changed(created, "role"),
        json!({ "field": "role", "before": null, "after": "writer" })
    );
    assert!(!log[1].to_string().contains(secret.as_str().unwrap()));
    let revoked = &log[2];
    assert_eq!(revoked["requestId"], "req-revoke");
    assert_eq!(revoked["changes"].as_array().unwrap().len(), 2, "{revoked}");
    assert_eq!(
        changed(revoked, "revokedBy"),
        json!({ "field": "revokedBy", "before": null, "after": "token:root" })
    );
    app.stop().await;
}

#[tokio::test]
async fn a_price_set_is_audited_once_and_the_same_again_not_at_all() {
    let app = TestApp::start().await;
    let set = "mutation ($i: SetModelPriceInput!) { setModelPrice(input: $i) { model } }";
    let price = json!({ "model": "audit-model", "effectiveFrom": "2026-01-01T00:00:00Z",
                        "inputPerMillionUsd": "1.25", "outputPerMillionUsd": "10" });
    app.data(set, json!({ "i": price })).await;
    app.data(set, json!({ "i": price })).await;
    let log: Vec<Value> = records(&app, "ModelPrice")
        .await
        .into_iter()
        .filter(|r| changed(r, "model")["after"] == "audit-model")
        .collect();
    assert_eq!(log.len(), 1, "{log:#?}");
    assert_eq!(log[0]["action"], "setModelPrice");
    assert_eq!(
        changed(&log[0], "inputPerMillionUsd"),
        json!({ "field": "inputPerMillionUsd", "before": null, "after": "1.25" })
    );
    assert_eq!(
        changed(&log[0], "cachedInputPerMillionUsd"),
        json!({ "field": "cachedInputPerMillionUsd", "before": null, "after": null })
    );
    app.stop().await;
}
