//! The audit trail (issue 31, part 2): a control-plane change leaves one record in its own
//! transaction, with who made it, from which request and client, and a field diff.

use casefile::model::Role;
use serde_json::{Value, json};

use crate::common::{TestApp, tokens_mode};

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
         FROM audit_log WHERE target_type = $1 ORDER BY at, id",
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
    let mut app = TestApp::start_with(tokens_mode()).await;
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
    // The definition (up to 64 KiB) is shown by its length and digest.
    let definition = &changed(created, "definition")["after"];
    assert_eq!(definition["characters"], 30, "{definition}");
    assert_eq!(definition["sha256"].as_str().unwrap().len(), 64);

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

/// How many audit records there are, in both tables.
async fn count(app: &TestApp) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM audit_log")
        .fetch_one(app.store.pool())
        .await
        .unwrap()
}

/// The newest audit record.
async fn newest(app: &TestApp) -> Value {
    sqlx::query_scalar(
        "SELECT jsonb_build_object('action', action, 'targetType', target_type, \
             'sessionId', session_id, 'actor', actor, 'changes', changes) \
         FROM audit_log ORDER BY at DESC, id DESC LIMIT 1",
    )
    .fetch_one(app.store.pool())
    .await
    .unwrap()
}

/// Runs one mutation that must succeed and leave exactly one audit record, of `action`, with
/// at least one changed field; notes that `mutation` was walked. Its data.
async fn audited(
    app: &TestApp,
    walked: &mut Vec<&'static str>,
    (mutation, action): (&'static str, &str),
    query: &str,
    variables: Value,
) -> Value {
    let before = count(app).await;
    let body = send(app, mutation, query, variables).await;
    assert!(body.get("errors").is_none(), "{mutation}: {body:#}");
    assert_eq!(count(app).await, before + 1, "{mutation}: one audit record");
    let record = newest(app).await;
    assert_eq!(record["action"], action, "{record}");
    assert_eq!(record["actor"], "token:walker", "{record}");
    assert!(
        !record["changes"].as_array().unwrap().is_empty(),
        "{mutation}: {record}"
    );
    walked.push(mutation);
    body["data"].clone()
}

fn uuid_of(data: &Value, field: &str) -> String {
    data[field]["uuid"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn every_mutation_is_audited_or_exempt_by_name() {
    use casefile::store::audit::{AUDITED, EXEMPT};
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
    let mut listed: Vec<&str> = [EXEMPT, AUDITED].concat();
    listed.sort_unstable();
    // Each mutation in exactly one list, and each listed name a mutation.
    assert_eq!(fields, listed);
    app.stop().await;
}

/// Every audited mutation, called once over the API, leaves exactly one record with a field
/// diff; a retry that changes nothing leaves none.
#[tokio::test]
async fn every_audited_mutation_leaves_exactly_one_record_with_a_field_diff() {
    use casefile::store::audit::AUDITED;
    let mut server = TestApp::start_with(tokens_mode()).await;
    server.token = Some(server.token("walker", Role::Admin, None).await);
    let app = &server;
    let walked = &mut Vec::new();
    let same = |name: &'static str| (name, name);

    audited(
        app,
        walked,
        same("registerChain"),
        REGISTER,
        json!({ "n": "walk", "v": "1", "d": { "stages": [{ "name": "Only" }] } }),
    )
    .await;
    audited(
        app,
        walked,
        same("deprecateChain"),
        DEPRECATE,
        json!({ "n": "walk", "v": "1" }),
    )
    .await;
    audited(app, walked, same("setModelPrice"),
        "mutation { setModelPrice(input: { model: \"walk-model\", effectiveFrom: \"2026-01-01T00:00:00Z\",
            inputPerMillionUsd: \"1\", outputPerMillionUsd: \"2\" }) { model } }", json!({})).await;
    audited(
        app,
        walked,
        same("createApiToken"),
        "mutation { createApiToken(input: { name: \"walked\", role: READER }) { secret } }",
        json!({}),
    )
    .await;
    audited(
        app,
        walked,
        same("revokeApiToken"),
        "mutation { revokeApiToken(name: \"walked\") { revokedAt } }",
        json!({}),
    )
    .await;

    let create =
        "mutation { createSession(input: { alertType: \"Walk\", chainId: \"walk\" }) { uuid } }";
    let s = uuid_of(
        &audited(app, walked, same("createSession"), create, json!({})).await,
        "createSession",
    );
    let id = json!({ "id": s });
    let start = "mutation ($id: ID!) { startSession(id: $id) { status } }";
    audited(app, walked, same("startSession"), start, id.clone()).await;
    // Again: nothing changes, nothing is recorded.
    let before = count(app).await;
    app.data(start, id.clone()).await;
    assert_eq!(count(app).await, before);

    let stage = audited(app, walked, same("createStage"),
        "mutation ($s: ID!) { createStage(input: { sessionId: $s, stageIndex: 1, name: \"One\" }) { uuid } }",
        json!({ "s": s })).await;
    let stage = uuid_of(&stage, "createStage");
    let execution = audited(app, walked, same("createAgentExecution"),
        "mutation ($s: ID!) { createAgentExecution(input: { stageId: $s, agentIndex: 1, agentName: \"A\",
            iterationStrategy: \"react\" }) { uuid } }", json!({ "s": stage })).await;
    let e = json!({ "id": uuid_of(&execution, "createAgentExecution") });
    audited(
        app,
        walked,
        same("startAgentExecution"),
        "mutation ($id: ID!) { startAgentExecution(input: { id: $id }) { status } }",
        e.clone(),
    )
    .await;
    audited(app, walked, same("finishAgentExecution"),
        "mutation ($id: ID!) { finishAgentExecution(input: { id: $id, status: COMPLETED }) { status } }", e).await;
    // A batch's control-plane operation is recorded as its own mutation.
    audited(app, walked, ("ingest", "createStage"),
        "mutation ($s: ID!) { ingest(operations: [{ createStage: { sessionId: $s, stageIndex: 2, name: \"Two\" } }]) { __typename } }",
        json!({ "s": s })).await;
    let two = "mutation ($s: ID!) { createAgentExecution(input: { stageId: $s, agentIndex: 1, agentName: \"B\",
        iterationStrategy: \"react\" }) { uuid } }";
    let stage_two: String = sqlx::query_scalar("SELECT id::text FROM stages WHERE stage_index = 2")
        .fetch_one(app.store.pool())
        .await
        .unwrap();
    let b = uuid_of(
        &app.data(two, json!({ "s": stage_two })).await,
        "createAgentExecution",
    );
    app.data("mutation ($id: ID!) { finishAgentExecution(input: { id: $id, status: COMPLETED }) { status } }",
        json!({ "id": b })).await;

    audited(app, walked, same("completeSession"),
        "mutation ($id: ID!) { completeSession(input: { id: $id, finalAnalysis: \"done\",
            notify: [{ type: SLACK, destination: \"#a\" }, { type: EMAIL, destination: \"b@example.com\" }] }) { status } }",
        id.clone()).await;
    let claim =
        "mutation ($c: UUID!) { claimNotifications(claimId: $c, limit: 1) { id sessionId } }";
    let claim_one = uuid::Uuid::now_v7();
    let first = audited(
        app,
        walked,
        same("claimNotifications"),
        claim,
        json!({ "c": claim_one }),
    )
    .await;
    let first = &first["claimNotifications"][0];
    let n = json!({ "n": { "sessionId": first["sessionId"], "id": first["id"] }, "c": claim_one });
    audited(app, walked, same("markNotificationSent"),
        "mutation ($n: NotificationRef!, $c: UUID!) { markNotificationSent(notification: $n, claimId: $c) { status } }",
        n.clone()).await;
    audited(app, walked, same("markNotificationDelivered"),
        "mutation ($n: NotificationRef!) { markNotificationDelivered(notification: $n) { status } }",
        json!({ "n": n["n"] })).await;
    let claim_two = uuid::Uuid::now_v7();
    let second = app.data(claim, json!({ "c": claim_two })).await;
    let second = &second["claimNotifications"][0];
    audited(app, walked, same("markNotificationFailed"),
        "mutation ($n: NotificationRef!, $c: UUID!) { markNotificationFailed(notification: $n, claimId: $c, error: \"down\") { status } }",
        json!({ "n": { "sessionId": second["sessionId"], "id": second["id"] }, "c": claim_two })).await;

    audited(
        app,
        walked,
        same("createEventStreamTicket"),
        "mutation ($s: ID!) { createEventStreamTicket(sessionId: $s) { ticket } }",
        json!({ "s": s }),
    )
    .await;
    let link = audited(
        app,
        walked,
        same("createShareLink"),
        "mutation ($s: ID!) { createShareLink(sessionId: $s) { link { id } } }",
        json!({ "s": s }),
    )
    .await;
    audited(
        app,
        walked,
        same("revokeShareLink"),
        "mutation ($id: UUID!) { revokeShareLink(id: $id) { revokedAt } }",
        json!({ "id": link["createShareLink"]["link"]["id"] }),
    )
    .await;
    let chat = audited(
        app,
        walked,
        same("openChat"),
        "mutation ($s: ID!) { openChat(input: { sessionId: $s }) { uuid } }",
        json!({ "s": s }),
    )
    .await;
    let chat = uuid_of(&chat, "openChat");
    audited(
        app,
        walked,
        same("renameChat"),
        "mutation ($c: ID!) { renameChat(input: { id: $c, title: \"Why\" }) { title } }",
        json!({ "c": chat }),
    )
    .await;
    audited(
        app,
        walked,
        same("postChatMessage"),
        "mutation ($c: ID!) { postChatMessage(input: { chatId: $c, content: \"Why?\" }) { uuid } }",
        json!({ "c": chat }),
    )
    .await;
    audited(
        app,
        walked,
        same("deleteChat"),
        "mutation ($c: ID!) { deleteChat(input: { id: $c, reason: \"done\" }) { deletedAt } }",
        json!({ "c": chat }),
    )
    .await;
    audited(
        app,
        walked,
        same("restoreChat"),
        "mutation ($c: ID!) { restoreChat(input: { id: $c }) { deletedAt } }",
        json!({ "c": chat }),
    )
    .await;

    let other = |_: ()| async { uuid_of(&app.data(create, json!({})).await, "createSession") };
    let cancelled = json!({ "id": other(()).await });
    audited(
        app,
        walked,
        same("requestSessionCancellation"),
        "mutation ($id: ID!) { requestSessionCancellation(id: $id) { status } }",
        cancelled.clone(),
    )
    .await;
    audited(
        app,
        walked,
        same("deleteSession"),
        "mutation ($id: ID!) { deleteSession(id: $id) { deletedAt } }",
        cancelled.clone(),
    )
    .await;
    audited(
        app,
        walked,
        same("restoreSession"),
        "mutation ($id: ID!) { restoreSession(id: $id) { deletedAt } }",
        cancelled,
    )
    .await;
    let fail =
        "mutation ($id: ID!) { failSession(input: { id: $id, errorMessage: \"x\" }) { status } }";
    audited(
        app,
        walked,
        same("failSession"),
        fail,
        json!({ "id": other(()).await }),
    )
    .await;
    audited(
        app,
        walked,
        same("timeOutSession"),
        &fail.replace("failSession", "timeOutSession"),
        json!({ "id": other(()).await }),
    )
    .await;

    // Every audited mutation was walked.
    walked.sort_unstable();
    walked.dedup();
    let mut expected = AUDITED.to_vec();
    expected.sort_unstable();
    assert_eq!(*walked, expected);

    // A session's records are kept with it: the completion's names the session and shows what
    // changed, large texts by digest.
    let completion: Value = sqlx::query_scalar(
        "SELECT changes FROM session_audit_records WHERE session_id = $1::text::uuid \
         AND action = 'completeSession'",
    )
    .bind(&s)
    .fetch_one(app.store.pool())
    .await
    .unwrap();
    let status = completion
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["field"] == "status")
        .unwrap();
    assert_eq!(
        *status,
        json!({ "field": "status", "before": "in_progress", "after": "completed" })
    );
    let analysis = completion
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["field"] == "finalAnalysis")
        .unwrap();
    assert_eq!(analysis["after"]["characters"], 4, "{analysis}");
    server.stop().await;
}

/// A record written in a transaction that then fails is rolled back with it.
#[tokio::test]
async fn a_record_written_before_a_failure_is_rolled_back_with_the_change() {
    let app = TestApp::start().await;
    let session = crate::write_api::Agent { app: &app }.session().await;
    let before = count(&app).await;
    // The first operation writes its stage and its record; the second (the same index) fails.
    let (code, _) = app
        .error(
            "mutation ($s: ID!) { ingest(operations: [
                { createStage: { sessionId: $s, stageIndex: 1, name: \"One\" } },
                { createStage: { sessionId: $s, stageIndex: 1, name: \"Again\" } }]) { __typename } }",
            json!({ "s": session }),
        )
        .await;
    assert_eq!(code, "CONFLICT");
    assert_eq!(count(&app).await, before);
    let stages: i64 = sqlx::query_scalar("SELECT count(*) FROM stages")
        .fetch_one(app.store.pool())
        .await
        .unwrap();
    assert_eq!(stages, 0);
    app.stop().await;
}

#[tokio::test]
async fn token_creation_and_revocation_are_audited_without_the_secret() {
    let mut app = TestApp::start_with(tokens_mode()).await;
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

/// The audit log read over the API: newest first across both tables, each filter, paged both
/// ways; admins only; a session's trail for its readers without the client's address.
#[tokio::test]
async fn the_audit_log_lists_newest_first_by_each_filter_and_a_sessions_trail_hides_addresses() {
    let mut server = TestApp::start_with(tokens_mode()).await;
    let admin = server.token("boss", Role::Admin, None).await;
    let reader = server.token("viewer", Role::Reader, None).await;
    server.token = Some(admin.clone());
    let app = &server;
    let create =
        "mutation { createSession(input: { alertType: \"Log\", chainId: \"log\" }) { uuid } }";
    let s = send(app, "req-1", create, json!({})).await["data"]["createSession"]["uuid"].clone();
    send(
        app,
        "req-2",
        "mutation ($id: ID!) { startSession(id: $id) { status } }",
        json!({ "id": s }),
    )
    .await;
    send(
        app,
        "req-3",
        REGISTER,
        json!({ "n": "log", "v": "1", "d": { "stages": [{ "name": "Only" }] } }),
    )
    .await;

    let log =
        "query ($f: AuditLogFilter, $first: Int, $after: String, $last: Int, $before: String) {
        auditLog(filter: $f, first: $first, after: $after, last: $last, before: $before) {
          edges { cursor node { action targetType sessionId requestId clientAddress userAgent
                                actor changes { field before after } } }
          pageInfo { hasNextPage hasPreviousPage } } }";
    let actions = |d: &Value| -> Vec<String> {
        d["auditLog"]["edges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["node"]["action"].as_str().unwrap().to_owned())
            .collect()
    };
    // The helper's tokens were made without a request: the log holds them too.
    let all = app
        .data(log, json!({ "f": { "actor": "token:boss" } }))
        .await;
    assert_eq!(
        actions(&all),
        ["registerChain", "startSession", "createSession"]
    );
    let newest = &all["auditLog"]["edges"][0]["node"];
    assert_eq!(newest["sessionId"], Value::Null);
    assert_eq!(newest["clientAddress"], "127.0.0.1");
    assert_eq!(newest["userAgent"], "audit-test/1.0");
    for (filter, expected) in [
        (json!({ "action": "startSession" }), vec!["startSession"]),
        (json!({ "targetType": "Chain" }), vec!["registerChain"]),
        (
            json!({ "sessionId": s }),
            vec!["startSession", "createSession"],
        ),
        (
            json!({ "actor": "token:boss", "after": "2999-01-01T00:00:00Z" }),
            vec![],
        ),
        (
            json!({ "actor": "token:boss", "before": "2000-01-01T00:00:00Z" }),
            vec![],
        ),
        (json!({ "actor": "nobody" }), vec![]),
    ] {
        let d = app.data(log, json!({ "f": filter })).await;
        assert_eq!(actions(&d), expected, "{filter}");
    }
    // Paged forward, then back from the second page.
    let page = app
        .data(log, json!({ "f": { "actor": "token:boss" }, "first": 2 }))
        .await;
    assert_eq!(actions(&page), ["registerChain", "startSession"]);
    assert_eq!(page["auditLog"]["pageInfo"]["hasNextPage"], true);
    let cursor = page["auditLog"]["edges"][1]["cursor"].clone();
    let next = app
        .data(
            log,
            json!({ "f": { "actor": "token:boss" }, "first": 2, "after": cursor }),
        )
        .await;
    assert_eq!(actions(&next), ["createSession"]);
    assert_eq!(next["auditLog"]["pageInfo"]["hasPreviousPage"], true);
    let back = next["auditLog"]["edges"][0]["cursor"].clone();
    let previous = app
        .data(
            log,
            json!({ "f": { "actor": "token:boss" }, "last": 1, "before": back }),
        )
        .await;
    assert_eq!(actions(&previous), ["startSession"]);

    // A reader: no log, but the session's trail, oldest first, without addresses.
    let mut as_reader = app.client.post(app.url("/graphql")).bearer_auth(&reader);
    as_reader = as_reader.json(&json!({ "query": log, "variables": {} }));
    let body: Value = as_reader.send().await.unwrap().json().await.unwrap();
    assert_eq!(
        body["errors"][0]["extensions"]["code"], "FORBIDDEN",
        "{body}"
    );
    let trail = "query ($id: ID!) { session(id: $id) { auditLog(first: 10) { totalCount
        edges { node { action requestId clientAddress userAgent } } } } }";
    let body: Value = app
        .client
        .post(app.url("/graphql"))
        .bearer_auth(&reader)
        .json(&json!({ "query": trail, "variables": { "id": s } }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let trail = &body["data"]["session"]["auditLog"];
    assert_eq!(trail["totalCount"], 2, "{body}");
    assert_eq!(trail["edges"][0]["node"]["action"], "createSession");
    assert_eq!(trail["edges"][0]["node"]["requestId"], "req-1");
    assert_eq!(trail["edges"][0]["node"]["clientAddress"], Value::Null);
    assert_eq!(trail["edges"][0]["node"]["userAgent"], Value::Null);
    server.stop().await;
}

/// At volume, each filter of the log is read along its index, in order, without a sort.
#[tokio::test]
async fn each_filter_of_the_audit_log_is_read_along_an_index() {
    use casefile::store::audit::log::AuditFilter;
    use casefile::store::page::Slice;
    let app = TestApp::start().await;
    for statement in [
        "INSERT INTO audit_records (id, at, actor, action, target_type, target_id, changes) \
         SELECT gen_random_uuid(), now() - make_interval(secs => n), 'token:a' || (n % 50), \
             'act' || (n % 20), 'Type' || (n % 10), n::text, '[]' \
         FROM generate_series(1, 20000) n",
        "INSERT INTO session_audit_records (session_id, id, at, actor, action, target_type, \
             target_id, changes) \
         SELECT md5((n % 20)::text)::uuid, gen_random_uuid(), now() - make_interval(secs => n), \
             'token:a' || (n % 50), 'act' || (n % 20), 'Type' || (n % 10), n::text, '[]' \
         FROM generate_series(1, 40000) n",
        "ANALYZE audit_records, session_audit_records",
    ] {
        sqlx::query(statement)
            .execute(app.store.pool())
            .await
            .unwrap();
    }
    let session: uuid::Uuid = sqlx::query_scalar("SELECT md5('7')::uuid")
        .fetch_one(app.store.pool())
        .await
        .unwrap();
    let slice = Slice {
        after: None,
        before: None,
        size: 20,
        from_end: false,
    };
    let cases = [
        (
            AuditFilter::default(),
            vec!["audit_records_at", "session_audit_records_at"],
        ),
        (
            AuditFilter {
                actor: Some("token:a7".into()),
                ..Default::default()
            },
            vec!["audit_records_actor", "session_audit_records_actor"],
        ),
        (
            AuditFilter {
                action: Some("act3".into()),
                ..Default::default()
            },
            vec!["audit_records_action", "session_audit_records_action"],
        ),
        (
            AuditFilter {
                target_type: Some("Type4".into()),
                ..Default::default()
            },
            vec![
                "audit_records_target_type",
                "session_audit_records_target_type",
            ],
        ),
        (
            AuditFilter {
                session_id: Some(session),
                ..Default::default()
            },
            vec!["session_audit_records_session_at"],
        ),
        (
            AuditFilter {
                after: Some(chrono::Utc::now() - chrono::Duration::hours(1)),
                before: Some(chrono::Utc::now() - chrono::Duration::minutes(30)),
                ..Default::default()
            },
            vec!["audit_records_at", "session_audit_records_at"],
        ),
    ];
    for (filter, indexes) in cases {
        let plan = app.store.explain_audit_log(&filter, &slice).await.unwrap();
        for index in indexes {
            assert!(plan.contains(index), "{filter:?} reads {index}:\n{plan}");
        }
        assert!(!plan.contains("Seq Scan"), "{filter:?}:\n{plan}");
        // Only the page's own rows are put back in list order at the top.
        assert!(
            !plan.contains("->  Sort"),
            "{filter:?} needs no sort:\n{plan}"
        );
    }
    app.stop().await;
}
