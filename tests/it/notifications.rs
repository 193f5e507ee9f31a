//! The notification outbox: notifications are written with the completion or failure that
//! causes them (never without it), claimed by delivery workers with a lease, and reported
//! sent, delivered or failed (with backoff, then for good).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::common::TestApp;
use crate::write_api::Agent;

const FIELDS: &str = "id sessionId type destination status integrationData attempts maxAttempts \
                      nextAttemptAt claimId lastError sentAt deliveredAt failedAt";

/// A started session.
async fn started(app: &TestApp) -> String {
    let agent = Agent { app };
    let session = agent.session().await;
    app.data(
        "mutation ($id: ID!) { startSession(id: $id) { status } }",
        json!({ "id": session }),
    )
    .await;
    session
}

/// Completes `session` with `notify`; the whole response.
async fn complete(app: &TestApp, session: &str, notify: Value) -> Value {
    app.graphql(
        &format!(
            "mutation ($id: ID!, $n: [NotifyInput!]) {{ completeSession(input: {{ id: $id, \
             finalAnalysis: \"done\", notify: $n }}) {{ status notifications {{ {FIELDS} }} }} }}"
        ),
        json!({ "id": session, "n": notify }),
    )
    .await
}

async fn claim(app: &TestApp, claim_id: &str, limit: i32, lease: i32) -> Vec<Value> {
    let d = app
        .data(
            &format!(
                "mutation ($c: UUID!, $l: Int!, $s: Int!) {{ claimNotifications(claimId: $c, \
                 limit: $l, leaseSeconds: $s) {{ {FIELDS} }} }}"
            ),
            json!({ "c": claim_id, "l": limit, "s": lease }),
        )
        .await;
    d["claimNotifications"].as_array().unwrap().clone()
}

fn ids(list: &[Value]) -> BTreeSet<String> {
    list.iter()
        .map(|n| n["id"].as_str().unwrap().to_owned())
        .collect()
}

fn reference(n: &Value) -> Value {
    json!({ "sessionId": n["sessionId"], "id": n["id"] })
}

async fn mark_failed(app: &TestApp, n: &Value, claim_id: &str, error: &str) -> Value {
    let d = app
        .data(
            &format!(
                "mutation ($n: NotificationRef!, $c: UUID!, $e: String!) {{ \
                 markNotificationFailed(notification: $n, claimId: $c, error: $e) {{ {FIELDS} }} }}"
            ),
            json!({ "n": reference(n), "c": claim_id, "e": error }),
        )
        .await;
    d["markNotificationFailed"].clone()
}

fn new_claim() -> String {
    uuid::Uuid::now_v7().to_string()
}

#[tokio::test]
async fn completion_writes_its_notifications_and_a_worker_delivers_them() {
    let app = TestApp::start().await;
    let session = started(&app).await;
    let body = complete(
        &app,
        &session,
        json!([
            { "type": "SLACK", "destination": "#alerts",
              "integrationData": { "channel": "#alerts", "message_fingerprint": "abc123" } },
            { "type": "EMAIL", "destination": "oncall@example.com" },
        ]),
    )
    .await;
    assert!(body.get("errors").is_none(), "{body:#}");
    let list = body["data"]["completeSession"]["notifications"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0]["type"], "SLACK");
    assert_eq!(list[0]["status"], "PENDING");
    assert_eq!(list[0]["maxAttempts"], 5);
    assert_eq!(list[1]["integrationData"], json!({}));

    // A retried completion adds nothing.
    let again = complete(
        &app,
        &session,
        json!([{ "type": "SLACK", "destination": "#alerts" }]),
    )
    .await;
    assert_eq!(
        again["data"]["completeSession"]["notifications"]
            .as_array()
            .unwrap()
            .len(),
        2,
        "{again:#}"
    );

    let c = new_claim();
    let claimed = claim(&app, &c, 10, 60).await;
    assert_eq!(ids(&claimed), ids(&list));
    let slack = claimed.iter().find(|n| n["type"] == "SLACK").unwrap();
    assert_eq!(slack["status"], "SENDING");
    assert_eq!(slack["attempts"], 1);
    let sent_query = format!(
        "mutation ($n: NotificationRef!, $c: UUID!, $d: JSON) {{ markNotificationSent(\
         notification: $n, claimId: $c, integrationData: $d) {{ {FIELDS} }} }}"
    );
    let vars = json!({ "n": reference(slack), "c": c,
                       "d": { "thread_ts": "1234567890.123456", "permalink": "https://x/p1" } });
    let sent = app.data(&sent_query, vars.clone()).await["markNotificationSent"].clone();
    assert_eq!(sent["status"], "SENT");
    assert_eq!(sent["integrationData"]["channel"], "#alerts");
    assert_eq!(sent["integrationData"]["thread_ts"], "1234567890.123456");
    assert!(sent["sentAt"].is_string() && sent["nextAttemptAt"].is_null());
    // A retried report is harmless; another claim's report is refused.
    let retried = app.data(&sent_query, vars).await["markNotificationSent"].clone();
    assert_eq!(retried["sentAt"], sent["sentAt"]);
    let (code, _) = app
        .error(
            &sent_query,
            json!({ "n": reference(slack), "c": new_claim(), "d": null }),
        )
        .await;
    assert_eq!(code, "CONFLICT");

    let delivered_query = format!(
        "mutation ($n: NotificationRef!) {{ markNotificationDelivered(notification: $n) {{ {FIELDS} }} }}"
    );
    let delivered = app
        .data(&delivered_query, json!({ "n": reference(slack) }))
        .await["markNotificationDelivered"]
        .clone();
    assert_eq!(delivered["status"], "DELIVERED");
    assert!(delivered["deliveredAt"].is_string());
    // The email was never sent: it cannot be delivered.
    let email = claimed.iter().find(|n| n["type"] == "EMAIL").unwrap();
    let (code, message) = app
        .error(&delivered_query, json!({ "n": reference(email) }))
        .await;
    assert_eq!(code, "CONFLICT", "{message}");
    app.stop().await;
}

#[tokio::test]
async fn a_failure_writes_its_notifications_and_bad_ones_write_nothing() {
    let app = TestApp::start().await;
    let session = started(&app).await;
    let fail = "mutation ($id: ID!, $n: [NotifyInput!]) { failSession(input: { id: $id, \
                errorMessage: \"boom\", notify: $n }) { status notifications { type destination } } }";
    let (code, _) = app
        .error(
            fail,
            json!({ "id": session, "n": [{ "type": "PAGERDUTY", "destination": "" }] }),
        )
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
    let (code, _) = app
        .error(
            fail,
            json!({ "id": session,
                    "n": [{ "type": "WEBHOOK", "destination": "https://x", "maxAttempts": 0 }] }),
        )
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
    let d = app
        .data(
            fail,
            json!({ "id": session,
                    "n": [{ "type": "PAGERDUTY", "destination": "routing-key" }] }),
        )
        .await;
    assert_eq!(d["failSession"]["status"], "FAILED");
    assert_eq!(
        d["failSession"]["notifications"],
        json!([{ "type": "PAGERDUTY", "destination": "routing-key" }])
    );
    app.stop().await;
}

#[tokio::test]
async fn a_completion_that_rolls_back_leaves_no_notification() {
    let app = TestApp::start().await;
    let session = started(&app).await;
    // The second notification's insert fails after the first one's and the completion's
    // writes: the transaction rolls back whole.
    sqlx::raw_sql(
        "CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
           IF NEW.destination = '#boom' THEN RAISE EXCEPTION 'refused'; END IF; RETURN NEW; END $$; \
         CREATE TRIGGER refuse_boom BEFORE INSERT ON notifications \
           FOR EACH ROW EXECUTE FUNCTION refuse_boom();",
    )
    .execute(app.store.pool())
    .await
    .unwrap();
    let body = complete(
        &app,
        &session,
        json!([
            { "type": "SLACK", "destination": "#ok" },
            { "type": "SLACK", "destination": "#boom" },
        ]),
    )
    .await;
    assert!(body.get("errors").is_some(), "{body:#}");
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM notifications")
        .fetch_one(app.store.pool())
        .await
        .unwrap();
    assert_eq!(count, 0);
    let status: String = sqlx::query_scalar("SELECT status FROM sessions WHERE id = $1::uuid")
        .bind(&session)
        .fetch_one(app.store.pool())
        .await
        .unwrap();
    assert_eq!(status, "in_progress");
    assert!(claim(&app, &new_claim(), 10, 60).await.is_empty());
    app.stop().await;
}

#[tokio::test]
async fn concurrent_workers_never_claim_the_same_notification() {
    let app = TestApp::start().await;
    let notify: Vec<Value> = (0..30)
        .map(|i| json!({ "type": "WEBHOOK", "destination": format!("https://hooks/{i}") }))
        .collect();
    let session = started(&app).await;
    let body = complete(&app, &session, json!(notify)).await;
    assert!(body.get("errors").is_none(), "{body:#}");
    let (a, b, c) = (new_claim(), new_claim(), new_claim());
    let (x, y, z) = tokio::join!(
        claim(&app, &a, 20, 60),
        claim(&app, &b, 20, 60),
        claim(&app, &c, 20, 60)
    );
    let (x, y, z) = (ids(&x), ids(&y), ids(&z));
    assert!(x.is_disjoint(&y) && y.is_disjoint(&z) && x.is_disjoint(&z));
    assert_eq!(x.len() + y.len() + z.len(), 30);
    app.stop().await;
}

#[tokio::test]
async fn a_retried_claim_returns_the_same_set_and_an_expired_lease_comes_back() {
    let app = TestApp::start().await;
    let session = started(&app).await;
    let body = complete(
        &app,
        &session,
        json!([
            { "type": "SLACK", "destination": "#a" },
            { "type": "SLACK", "destination": "#b" },
            { "type": "EMAIL", "destination": "c@example.com" },
        ]),
    )
    .await;
    assert!(body.get("errors").is_none(), "{body:#}");
    let first = new_claim();
    let claimed = claim(&app, &first, 2, 1).await;
    assert_eq!(claimed.len(), 2);
    // The answer was lost; the worker claims again with the same id.
    assert_eq!(ids(&claim(&app, &first, 2, 1).await), ids(&claimed));
    // Another worker gets the third only.
    let other = claim(&app, &new_claim(), 10, 60).await;
    assert_eq!(other.len(), 1);
    assert!(ids(&other).is_disjoint(&ids(&claimed)));

    // The first worker crashed: its lease runs out and its notifications come back.
    tokio::time::sleep(std::time::Duration::from_millis(1_500)).await;
    let second = new_claim();
    let back = claim(&app, &second, 10, 60).await;
    assert_eq!(ids(&back), ids(&claimed));
    assert!(back.iter().all(|n| n["attempts"] == 2));
    // The crashed worker's late report is refused.
    let (code, _) = app
        .error(
            "mutation ($n: NotificationRef!, $c: UUID!) { markNotificationSent(notification: $n, \
             claimId: $c) { status } }",
            json!({ "n": reference(&back[0]), "c": first }),
        )
        .await;
    assert_eq!(code, "CONFLICT");
    app.stop().await;
}

#[tokio::test]
async fn failed_attempts_back_off_exponentially_then_fail_for_good() {
    let app = TestApp::start().await;
    let session = started(&app).await;
    let body = complete(
        &app,
        &session,
        json!([{ "type": "MSTEAMS", "destination": "ops", "maxAttempts": 3 }]),
    )
    .await;
    assert!(body.get("errors").is_none(), "{body:#}");
    let pool = app.store.pool();
    let mut waits = Vec::new();
    for attempt in 1..=3 {
        let c = new_claim();
        let claimed = claim(&app, &c, 10, 60).await;
        assert_eq!(claimed.len(), 1, "attempt {attempt}");
        assert_eq!(claimed[0]["attempts"], attempt);
        let error = format!("503 on attempt {attempt}");
        let failed = mark_failed(&app, &claimed[0], &c, &error).await;
        assert_eq!(failed["lastError"], error.as_str());
        // A retried report changes nothing.
        assert_eq!(mark_failed(&app, &claimed[0], &c, &error).await, failed);
        if attempt < 3 {
            assert_eq!(failed["status"], "PENDING");
            // Not due until its backoff ends.
            assert!(claim(&app, &new_claim(), 10, 60).await.is_empty());
            let wait: f64 = sqlx::query_scalar(
                "SELECT extract(epoch FROM next_attempt_at - now())::float8 FROM notifications",
            )
            .fetch_one(pool)
            .await
            .unwrap();
            waits.push(wait);
            // Let the backoff end now.
            sqlx::query("UPDATE notifications SET next_attempt_at = now()")
                .execute(pool)
                .await
                .unwrap();
        } else {
            assert_eq!(failed["status"], "FAILED");
            assert!(failed["failedAt"].is_string() && failed["nextAttemptAt"].is_null());
        }
    }
    assert!((25.0..=30.0).contains(&waits[0]), "{waits:?}");
    assert!((55.0..=60.0).contains(&waits[1]), "{waits:?}");
    assert!(claim(&app, &new_claim(), 10, 60).await.is_empty());
    app.stop().await;
}

#[tokio::test]
async fn claims_refuse_bad_limits() {
    let app = TestApp::start().await;
    let query = "mutation ($c: UUID!, $l: Int!, $s: Int!) { claimNotifications(claimId: $c, \
                 limit: $l, leaseSeconds: $s) { id } }";
    for (limit, lease) in [(0, 60), (101, 60), (10, 0), (10, 3_601)] {
        let (code, _) = app
            .error(query, json!({ "c": new_claim(), "l": limit, "s": lease }))
            .await;
        assert_eq!(code, "BAD_USER_INPUT", "{limit} {lease}");
    }
    app.stop().await;
}

/// A finished session with a chat question being answered: (session, question, the answering
/// execution).
async fn question_being_answered(app: &TestApp) -> (String, String, String) {
    let session = started(app).await;
    complete(app, &session, json!([])).await;
    let chat = app
        .data(
            "mutation ($s: ID!) { openChat(input: { sessionId: $s }) { uuid } }",
            json!({ "s": session }),
        )
        .await;
    let asked = app
        .data(
            "mutation ($c: ID!) { postChatMessage(input: { chatId: $c, content: \"Why?\" }) \
             { uuid stage { executions { uuid } } } }",
            json!({ "c": chat["openChat"]["uuid"] }),
        )
        .await;
    let asked = &asked["postChatMessage"];
    (
        session,
        asked["uuid"].as_str().unwrap().to_owned(),
        asked["stage"]["executions"][0]["uuid"]
            .as_str()
            .unwrap()
            .to_owned(),
    )
}

const FINISH_ANSWER: &str = "mutation ($e: ID!, $n: [NotifyInput!]) { finishAgentExecution(\
    input: { id: $e, status: COMPLETED, notify: $n }) { status } }";

const NOTIFICATIONS_OF: &str = "query ($s: ID!) { session(id: $s) { notifications { \
    destination integrationData chatQuestion { uuid content } } } }";

#[tokio::test]
async fn a_chat_answer_writes_its_notifications_naming_the_question_or_none_if_it_fails() {
    let app = TestApp::start().await;
    let (session, question, answering) = question_being_answered(&app).await;
    // The answer's notifications are written with it; a rolled-back answer leaves none.
    sqlx::raw_sql(
        "CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
           IF NEW.destination = '#boom' THEN RAISE EXCEPTION 'refused'; END IF; RETURN NEW; END $$; \
         CREATE TRIGGER refuse_boom BEFORE INSERT ON notifications \
           FOR EACH ROW EXECUTE FUNCTION refuse_boom();",
    )
    .execute(app.store.pool())
    .await
    .unwrap();
    let body = app
        .graphql(
            FINISH_ANSWER,
            json!({ "e": answering, "n": [{ "type": "SLACK", "destination": "#ok" },
                                          { "type": "SLACK", "destination": "#boom" }] }),
        )
        .await;
    assert!(body.get("errors").is_some(), "{body:#}");
    let d = app.data(NOTIFICATIONS_OF, json!({ "s": session })).await;
    assert_eq!(d["session"]["notifications"], json!([]));
    let status: String =
        sqlx::query_scalar("SELECT status FROM agent_executions WHERE id = $1::uuid")
            .bind(&answering)
            .fetch_one(app.store.pool())
            .await
            .unwrap();
    assert_ne!(status, "completed", "the answer rolled back with them");

    let notify = json!([{ "type": "SLACK", "destination": "#ok",
                          "integrationData": { "thread_ts": "1234.5678" } }]);
    let d = app
        .data(FINISH_ANSWER, json!({ "e": answering, "n": notify }))
        .await;
    assert_eq!(d["finishAgentExecution"]["status"], "COMPLETED");
    // A retry writes nothing again.
    app.data(FINISH_ANSWER, json!({ "e": answering, "n": notify }))
        .await;
    let d = app.data(NOTIFICATIONS_OF, json!({ "s": session })).await;
    assert_eq!(
        d["session"]["notifications"],
        json!([{ "destination": "#ok", "integrationData": { "thread_ts": "1234.5678" },
                 "chatQuestion": { "uuid": question, "content": "Why?" } }])
    );

    // An execution that answers no question takes no `notify`.
    let agent = Agent { app: &app };
    let other = agent.session().await;
    let stage = agent.stage(&other, 0, 1, None).await;
    let execution = agent.execution(&stage, 1, "Lead").await;
    let (code, message) = app
        .error(
            FINISH_ANSWER,
            json!({ "e": execution, "n": [{ "type": "EMAIL", "destination": "a@example.com" }] }),
        )
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
    assert!(message.contains("answers no chat question"), "{message}");
    app.stop().await;
}

#[tokio::test]
async fn an_ingested_chat_answer_writes_its_notifications_in_the_batch() {
    const INGEST: &str = "mutation ($ops: [IngestOperation!]!) { ingest(operations: $ops) \
                          { __typename } }";
    let app = TestApp::start().await;
    let (session, question, answering) = question_being_answered(&app).await;
    let finish = json!({ "finishAgentExecution": { "id": answering, "status": "COMPLETED",
        "notify": [{ "type": "MSTEAMS", "destination": "ops" }] } });
    // A batch that fails after the answer stores neither.
    let missing = uuid::Uuid::now_v7().to_string();
    let body = app
        .graphql(
            INGEST,
            json!({ "ops": [finish, { "startAgentExecution": { "id": missing } }] }),
        )
        .await;
    assert!(body.get("errors").is_some(), "{body:#}");
    let d = app.data(NOTIFICATIONS_OF, json!({ "s": session })).await;
    assert_eq!(d["session"]["notifications"], json!([]));
    app.data(INGEST, json!({ "ops": [finish] })).await;
    let d = app.data(NOTIFICATIONS_OF, json!({ "s": session })).await;
    assert_eq!(
        d["session"]["notifications"],
        json!([{ "destination": "ops", "integrationData": {},
                 "chatQuestion": { "uuid": question, "content": "Why?" } }])
    );
    app.stop().await;
}

/// The backoff and the default attempts are the server's options: a server started with a
/// 2-second base, a 5-second cap and 4 attempts waits 2, 4, then 5 seconds (as `nextAttemptAt`
/// says), and fails a notification for good after its fourth attempt.
#[tokio::test]
async fn the_backoff_and_default_attempts_are_server_options() {
    let app = TestApp::start_with(casefile::http::HttpOptions {
        notifications: casefile::api::NotificationOptions {
            notification_backoff_base_secs: 2,
            notification_backoff_max_secs: 5,
            notification_max_attempts: 4,
        },
        ..casefile::http::HttpOptions::default()
    })
    .await;
    let session = started(&app).await;
    let body = complete(
        &app,
        &session,
        json!([{ "type": "WEBHOOK", "destination": "https://hooks/1" }]),
    )
    .await;
    let created = &body["data"]["completeSession"]["notifications"][0];
    assert_eq!(created["maxAttempts"], 4, "{body:#}");
    let mut waits = Vec::new();
    for attempt in 1..=4 {
        let c = new_claim();
        let claimed = claim(&app, &c, 10, 60).await;
        assert_eq!(claimed.len(), 1, "attempt {attempt}");
        let failed = mark_failed(&app, &claimed[0], &c, "503").await;
        if attempt == 4 {
            assert_eq!(failed["status"], "FAILED");
            break;
        }
        let due: chrono::DateTime<chrono::Utc> =
            failed["nextAttemptAt"].as_str().unwrap().parse().unwrap();
        waits.push((due - chrono::Utc::now()).as_seconds_f64());
        sqlx::query("UPDATE notifications SET next_attempt_at = now()")
            .execute(app.store.pool())
            .await
            .unwrap();
    }
    for (wait, expected) in waits.iter().zip([2.0, 4.0, 5.0]) {
        assert!(
            (expected - 1.5..=expected).contains(wait),
            "waits {waits:?}, expected about 2, 4, 5"
        );
    }
    app.stop().await;
}
