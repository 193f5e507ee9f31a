//! Messages a page at a time: a stage's (every agent's conversation, each whole) and an
//! execution's, both ways, with their total.

use serde_json::{Value, json};

use crate::common::TestApp;
use crate::write_api::Agent;

async fn message(a: &Agent<'_>, execution: &str, content: &str) {
    a.ok(
        "mutation ($e: ID!, $c: String!) { appendMessage(input: { executionId: $e, role: USER, content: $c }) { uuid } }",
        json!({ "e": execution, "c": content }),
    )
    .await;
}

const STAGE_PAGE: &str = "query ($s: ID!, $first: Int, $after: String, $last: Int, $before: String) {
  session(id: $s) { stages { messagesConnection(first: $first, after: $after, last: $last, before: $before) {
    totalCount edges { cursor node { content } } pageInfo { hasPreviousPage hasNextPage startCursor endCursor } } } } }";

fn page(d: &Value) -> (Vec<String>, Value, i64) {
    let connection = &d["session"]["stages"][0]["messagesConnection"];
    let texts = connection["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["node"]["content"].as_str().unwrap().to_owned())
        .collect();
    (
        texts,
        connection["pageInfo"].clone(),
        connection["totalCount"].as_i64().unwrap(),
    )
}

#[tokio::test]
async fn a_stages_messages_page_both_ways_with_their_total() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let session = a.session().await;
    let stage = a.stage(&session, 0, 2, Some("ALL")).await;
    let first = a.execution(&stage, 1, "K8s").await;
    let second = a.execution(&stage, 2, "Logs").await;
    // Interleaved in time; each agent's conversation stays whole, the first agent's first.
    for i in 1..=3 {
        message(&a, &second, &format!("b{i}")).await;
        message(&a, &first, &format!("a{i}")).await;
    }
    let all = ["a1", "a2", "a3", "b1", "b2", "b3"];

    let vars = |v: Value| {
        let mut base = json!({ "s": session });
        base.as_object_mut()
            .unwrap()
            .extend(v.as_object().unwrap().clone());
        base
    };
    let (texts, info, total) = page(&a.ok(STAGE_PAGE, vars(json!({ "first": 4 }))).await);
    assert_eq!(texts, all[..4]);
    assert_eq!(total, 6);
    assert_eq!(
        (&info["hasPreviousPage"], &info["hasNextPage"]),
        (&json!(false), &json!(true))
    );
    let (texts, info, _) = page(
        &a.ok(
            STAGE_PAGE,
            vars(json!({ "first": 4, "after": info["endCursor"] })),
        )
        .await,
    );
    assert_eq!(texts, all[4..]);
    assert_eq!(
        (&info["hasPreviousPage"], &info["hasNextPage"]),
        (&json!(true), &json!(false))
    );
    // Backward: the last two, then the two before them.
    let (texts, info, _) = page(&a.ok(STAGE_PAGE, vars(json!({ "last": 2 }))).await);
    assert_eq!(texts, all[4..]);
    assert_eq!(info["hasPreviousPage"], true);
    let (texts, _, _) = page(
        &a.ok(
            STAGE_PAGE,
            vars(json!({ "last": 2, "before": info["startCursor"] })),
        )
        .await,
    );
    assert_eq!(texts, all[2..4]);

    // One execution's conversation, the same way.
    let d = a
        .ok(
            "query ($s: ID!) { session(id: $s) { agents { uuid messagesConnection(first: 2) {
               totalCount edges { node { content } } pageInfo { hasNextPage } } } } }",
            json!({ "s": session }),
        )
        .await;
    let agents = d["session"]["agents"].as_array().unwrap();
    let of_second = agents.iter().find(|x| x["uuid"] == second).unwrap();
    let connection = &of_second["messagesConnection"];
    assert_eq!(connection["totalCount"], 3);
    assert_eq!(connection["edges"][0]["node"]["content"], "b1");
    assert_eq!(connection["edges"][1]["node"]["content"], "b2");
    assert_eq!(connection["pageInfo"]["hasNextPage"], true);

    // A cursor of another list, and a page too large, are refused.
    a.start(&first).await;
    a.event(&first, "COMPLETED").await;
    let timeline = a
        .ok(
            "query ($s: ID!) { session(id: $s) { timeline { pageInfo { endCursor } } } }",
            json!({ "s": session }),
        )
        .await;
    let foreign = &timeline["session"]["timeline"]["pageInfo"]["endCursor"];
    let (code, message) = app
        .error(STAGE_PAGE, vars(json!({ "after": foreign })))
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
    assert!(message.contains("not to a list of messages"), "{message}");
    let (code, message) = app
        .error(STAGE_PAGE, vars(json!({ "after": "bm90IGEgY3Vyc29y" })))
        .await;
    assert_eq!(code, "BAD_USER_INPUT", "{message}");
    let (code, message) = app.error(STAGE_PAGE, vars(json!({ "first": 1000 }))).await;
    assert_eq!(code, "BAD_USER_INPUT");
    assert!(message.contains("--max-page-size"), "{message}");
    app.stop().await;
}
