//! The root `notifications` list: an operator's "what failed to deliver" view across sessions,
//! newest first, paged both ways, each filter read along an index.

use serde_json::{Value, json};

use crate::common::TestApp;
use crate::write_api::Agent;

const LIST: &str = "query ($f: NotificationFilter, $first: Int, $after: String, $last: Int, \
    $before: String) { notifications(filter: $f, first: $first, after: $after, last: $last, \
    before: $before) { totalCount pageInfo { hasPreviousPage hasNextPage startCursor endCursor } \
    edges { cursor node { id destination status type session { uuid alertType } } } } }";

/// Completes a new session with one notification per destination (each of `kind`); its uuid.
async fn completed_with(app: &TestApp, kind: &str, destinations: &[&str]) -> String {
    let agent = Agent { app };
    let session = agent.session().await;
    app.data(
        "mutation ($id: ID!) { startSession(id: $id) { status } }",
        json!({ "id": session }),
    )
    .await;
    let notify: Vec<Value> = destinations
        .iter()
        .map(|d| json!({ "type": kind, "destination": d, "maxAttempts": 1 }))
        .collect();
    let d = app
        .data(
            "mutation ($id: ID!, $n: [NotifyInput!]) { completeSession(input: { id: $id, \
             finalAnalysis: \"done\", notify: $n }) { uuid } }",
            json!({ "id": session, "n": notify }),
        )
        .await;
    d["completeSession"]["uuid"].as_str().unwrap().to_owned()
}

/// The destinations a list answer names, in its order.
fn destinations(data: &Value) -> Vec<String> {
    data["notifications"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["node"]["destination"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn operators_list_notifications_newest_first_by_status_type_session_and_time() {
    let app = TestApp::start().await;
    let first = completed_with(&app, "SLACK", &["#a"]).await;
    let between = chrono::Utc::now();
    let second = completed_with(&app, "EMAIL", &["ops@example.com"]).await;
    let third = completed_with(&app, "SLACK", &["#b"]).await;
    // The worker claims the oldest due Slack one (`#a`) and fails it for good (one attempt):
    // one is FAILED, the rest PENDING.
    let claimed = app
        .data(
            "mutation { claimNotifications(claimId: \"0190f5a0-0000-7000-8000-000000000001\", \
             types: [SLACK], limit: 1, leaseSeconds: 60) { id sessionId } }",
            json!({}),
        )
        .await;
    let slack = claimed["claimNotifications"][0].clone();
    app.data(
        "mutation ($n: NotificationRef!) { markNotificationFailed(notification: $n, \
         claimId: \"0190f5a0-0000-7000-8000-000000000001\", error: \"channel_not_found\") \
         { status } }",
        json!({ "n": { "sessionId": slack["sessionId"], "id": slack["id"] } }),
    )
    .await;

    let all = app.data(LIST, json!({})).await;
    assert_eq!(destinations(&all), ["#b", "ops@example.com", "#a"]);
    assert_eq!(all["notifications"]["totalCount"], 3);
    let edge = &all["notifications"]["edges"][0]["node"];
    assert_eq!(edge["session"]["uuid"], third);
    assert_eq!(edge["session"]["alertType"], "PodCrashLooping");

    for (filter, expected) in [
        (json!({ "status": "FAILED" }), vec!["#a"]),
        (
            json!({ "status": "PENDING" }),
            vec!["#b", "ops@example.com"],
        ),
        (json!({ "type": "SLACK" }), vec!["#b", "#a"]),
        (json!({ "type": "SLACK", "status": "PENDING" }), vec!["#b"]),
        (json!({ "sessionId": second }), vec!["ops@example.com"]),
        (json!({ "sessionId": first, "status": "PENDING" }), vec![]),
        (
            json!({ "createdAfter": between }),
            vec!["#b", "ops@example.com"],
        ),
        (json!({ "createdBefore": between }), vec!["#a"]),
    ] {
        let data = app.data(LIST, json!({ "f": filter })).await;
        assert_eq!(destinations(&data), expected, "{filter}");
        assert_eq!(
            data["notifications"]["totalCount"],
            expected.len(),
            "{filter}"
        );
    }

    // Paged forward, then back from the end.
    let page = app.data(LIST, json!({ "first": 2 })).await;
    assert_eq!(destinations(&page), ["#b", "ops@example.com"]);
    let info = &page["notifications"]["pageInfo"];
    assert_eq!(info["hasPreviousPage"], false);
    assert_eq!(info["hasNextPage"], true);
    let next = app
        .data(LIST, json!({ "first": 2, "after": info["endCursor"] }))
        .await;
    assert_eq!(destinations(&next), ["#a"]);
    assert_eq!(next["notifications"]["pageInfo"]["hasNextPage"], false);
    assert_eq!(next["notifications"]["pageInfo"]["hasPreviousPage"], true);
    let back = app
        .data(
            LIST,
            json!({ "last": 1, "before": next["notifications"]["pageInfo"]["startCursor"] }),
        )
        .await;
    assert_eq!(destinations(&back), ["ops@example.com"]);
    assert_eq!(back["notifications"]["pageInfo"]["hasPreviousPage"], true);
    let tail = app.data(LIST, json!({ "last": 2 })).await;
    assert_eq!(destinations(&tail), ["ops@example.com", "#a"]);

    // Bad input is refused: another list's cursor, an empty window.
    let sessions = app
        .data(
            "{ sessions(first: 1) { pageInfo { endCursor } } }",
            json!({}),
        )
        .await;
    let (code, message) = app
        .error(
            LIST,
            json!({ "after": sessions["sessions"]["pageInfo"]["endCursor"] }),
        )
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
    assert!(
        message.contains("not to the list of notifications"),
        "{message}"
    );
    let (code, message) = app
        .error(
            LIST,
            json!({ "f": { "createdAfter": between, "createdBefore": between } }),
        )
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
    assert!(
        message.contains("`createdAfter` must be earlier"),
        "{message}"
    );
    app.stop().await;
}

/// At volume (40,000 notifications over 4,000 sessions, one in 10 deleted; one in 50 failed),
/// each filter reads the index made for it, never the whole table, and a deleted session's
/// notifications are left out by probing each one's session by key.
#[tokio::test]
async fn the_list_reads_an_index_for_every_filter_at_volume() {
    use casefile::model::{NotificationStatus, NotificationType};
    use casefile::store::notifications::NotificationFilter;
    use casefile::store::page::Slice;

    let app = TestApp::start().await;
    let mut conn = app.store.pool().acquire().await.unwrap();
    // Rows as an import would write them (the live-change triggers are not measured here).
    for statement in [
        "SET session_replication_role = replica",
        "INSERT INTO sessions (id, alert_type, chain_id, status, created_at, deleted_at) \
         SELECT gen_random_uuid(), 'PodCrashLooping', 'k8s', 'completed', \
             now() - make_interval(secs => n), CASE WHEN n % 10 = 3 THEN now() END \
         FROM generate_series(1, 4000) n",
        "INSERT INTO notifications (session_id, id, type, destination, status, max_attempts, \
             next_attempt_at, failed_at, created_at) \
         SELECT s.id, gen_random_uuid(), \
             (ARRAY['slack', 'email', 'pagerduty', 'webhook', 'msteams'])[n % 5 + 1], '#alerts', \
             CASE WHEN n % 50 = 7 THEN 'failed' ELSE 'delivered' END, 5, NULL, \
             CASE WHEN n % 50 = 7 THEN now() END, now() - make_interval(secs => n) \
         FROM (SELECT *, row_number() OVER () - 1 AS k FROM sessions) s \
         JOIN generate_series(1, 40000) n ON s.k = n % 4000",
        "RESET session_replication_role",
        "ANALYZE sessions, notifications",
    ] {
        sqlx::query(statement).execute(&mut *conn).await.unwrap();
    }
    let session: uuid::Uuid = sqlx::query_scalar("SELECT id FROM sessions LIMIT 1")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    drop(conn);
    let filters = [
        (NotificationFilter::default(), "notifications_time_idx"),
        (
            NotificationFilter {
                status: Some(NotificationStatus::Failed),
                ..Default::default()
            },
            "notifications_status_time_idx",
        ),
        (
            NotificationFilter {
                notification_type: Some(NotificationType::Slack),
                ..Default::default()
            },
            "notifications_type_time_idx",
        ),
        (
            NotificationFilter {
                session_id: Some(session),
                ..Default::default()
            },
            "notifications_session_time_idx",
        ),
        (
            NotificationFilter {
                status: Some(NotificationStatus::Failed),
                notification_type: Some(NotificationType::Email),
                created_before: Some(chrono::Utc::now() - chrono::TimeDelta::hours(1)),
                ..Default::default()
            },
            "notifications_status_time_idx",
        ),
    ];
    let first_page = Slice {
        after: None,
        before: None,
        size: 20,
        from_end: false,
    };
    for (filter, index) in filters {
        let plan = app
            .store
            .explain_notifications(&filter, &first_page)
            .await
            .unwrap();
        println!("{filter:?}, first 20:\n{plan}\n");
        assert!(
            plan.contains(index),
            "{filter:?} does not read {index}:\n{plan}"
        );
        assert!(!plan.contains("Seq Scan"), "{plan}");
        assert!(
            plan.contains("sessions_pkey") || plan.contains("sessions_deleted_at_idx"),
            "{plan}"
        );
    }
    let everything = NotificationFilter {
        include_deleted: true,
        ..Default::default()
    };
    let all = app.store.count_notifications(&everything).await.unwrap();
    let live = app
        .store
        .count_notifications(&NotificationFilter::default())
        .await
        .unwrap();
    assert_eq!((all, live), (40_000, 36_000));
    let plan = app
        .store
        .explain_notifications(&everything, &first_page)
        .await
        .unwrap();
    assert!(!plan.contains("sessions"), "{plan}");
    app.stop().await;
}
