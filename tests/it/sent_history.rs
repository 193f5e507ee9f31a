//! Seed 003's history compression: an agent that compresses part of its history into a summary,
//! or discards steps, records what it sent (`sentMessageIds`), and
//! `LLMInteraction.conversationConnection` returns exactly that, in the order sent, a page at a
//! time; a plain prefix reads as before.

use serde_json::{Value, json};

use crate::common::{TestApp, nodes};
use crate::write_api::Agent;

const RECORD: &str = "mutation ($e: ID!, $last: ID, $sent: [ID!]) {
    recordLLMInteraction(input: { executionId: $e, interactionType: ITERATION,
        modelName: \"gemini-2.5-pro\", lastMessageId: $last, sentMessageIds: $sent })
    { id historyEdited lastMessage { sequenceNumber } } }";

const CONVERSATION: &str =
    "query ($id: ID!, $first: Int, $after: String, $last: Int, $before: String) {
    node(id: $id) { ... on LLMInteraction {
        conversationConnection(first: $first, after: $after, last: $last, before: $before) {
            totalCount
            pageInfo { hasPreviousPage hasNextPage startCursor endCursor }
            edges { cursor node { sequenceNumber content } } } } } }";

/// An agent's conversation: `contents` appended in order (1, 2, …), their global ids.
async fn conversation(a: &Agent<'_>, exec: &str, contents: &[(&str, &str)]) -> Vec<String> {
    let mut ids = Vec::new();
    for (role, content) in contents {
        let d = a
            .ok(
                &format!(
                    "mutation ($e: ID!, $c: String!) {{ appendMessage(input: {{ executionId: $e,
                       role: {role}, content: $c }}) {{ id }} }}"
                ),
                json!({ "e": exec, "c": content }),
            )
            .await;
        ids.push(d["appendMessage"]["id"].as_str().unwrap().to_owned());
    }
    ids
}

fn sequences(connection: &Value) -> Vec<i64> {
    nodes(connection)
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["sequenceNumber"].as_i64().unwrap())
        .collect()
}

async fn page(app: &TestApp, interaction: &str, args: Value) -> Value {
    let mut variables = args;
    variables["id"] = json!(interaction);
    app.data(CONVERSATION, variables).await["node"]["conversationConnection"].clone()
}

#[tokio::test]
async fn a_compressed_or_trimmed_history_reads_back_exactly_as_sent() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let session = a.session().await;
    let stage = a.stage(&session, 0, 1, None).await;
    let exec = a.execution(&stage, 1, "KubernetesAgent").await;
    let m = conversation(
        &a,
        &exec,
        &[
            ("SYSTEM", "You are KubernetesAgent"),
            ("USER", "Why does api-1 crash?"),
            ("ASSISTANT", "Reading its logs."),
            ("USER", "The logs: OOMKilled at 512Mi."),
            ("ASSISTANT", "It runs out of memory."),
            ("USER", "What should the limit be?"),
        ],
    )
    .await;

    // The plain prefix, as before.
    let plain =
        a.ok(RECORD, json!({ "e": exec, "last": m[3] })).await["recordLLMInteraction"].clone();
    assert_eq!(plain["historyEdited"], false);
    assert_eq!(
        sequences(&page(&app, plain["id"].as_str().unwrap(), json!({ "first": 20 })).await),
        [1, 2, 3, 4]
    );

    // A summary (message 7) stands in for messages 2–5: the model got 1, 7, 6.
    let summary = conversation(
        &a,
        &exec,
        &[(
            "USER",
            "Summary so far: api-1 is OOMKilled at its 512Mi limit.",
        )],
    )
    .await;
    let compressed = a
        .ok(
            RECORD,
            json!({ "e": exec, "sent": [m[0], summary[0], m[5]] }),
        )
        .await["recordLLMInteraction"]
        .clone();
    assert_eq!(compressed["historyEdited"], true);
    assert_eq!(compressed["lastMessage"]["sequenceNumber"], 6);
    let compressed_id = compressed["id"].as_str().unwrap();
    let whole = page(&app, compressed_id, json!({ "first": 20 })).await;
    assert_eq!(whole["totalCount"], 3);
    assert_eq!(sequences(&whole), [1, 7, 6]);
    assert_eq!(
        nodes(&whole)[1]["content"],
        "Summary so far: api-1 is OOMKilled at its 512Mi limit."
    );

    // A page at a time, both ways, in the order sent.
    let first = page(&app, compressed_id, json!({ "first": 2 })).await;
    assert_eq!(sequences(&first), [1, 7]);
    assert_eq!(first["pageInfo"]["hasNextPage"], true);
    let rest = page(
        &app,
        compressed_id,
        json!({ "first": 2, "after": first["pageInfo"]["endCursor"] }),
    )
    .await;
    assert_eq!(sequences(&rest), [6]);
    assert_eq!(rest["pageInfo"]["hasPreviousPage"], true);
    assert_eq!(rest["pageInfo"]["hasNextPage"], false);
    let tail = page(&app, compressed_id, json!({ "last": 2 })).await;
    assert_eq!(sequences(&tail), [7, 6]);
    assert_eq!(tail["pageInfo"]["hasPreviousPage"], true);
    let before = page(
        &app,
        compressed_id,
        json!({ "last": 5, "before": tail["pageInfo"]["startCursor"] }),
    )
    .await;
    assert_eq!(sequences(&before), [1]);

    // Steps 3 and 4 (a tool round) discarded: the model got 1, 2, 5, 6.
    let trimmed = a
        .ok(
            RECORD,
            json!({ "e": exec, "last": m[5], "sent": [m[0], m[1], m[4], m[5]] }),
        )
        .await["recordLLMInteraction"]
        .clone();
    assert_eq!(trimmed["historyEdited"], true);

    // A selection that is the conversation from its start is stored as the prefix it is.
    let prefix = a
        .ok(RECORD, json!({ "e": exec, "sent": [m[0], m[1], m[2]] }))
        .await["recordLLMInteraction"]
        .clone();
    assert_eq!(prefix["historyEdited"], false);
    assert_eq!(prefix["lastMessage"]["sequenceNumber"], 3);

    // Every interaction's conversation in one request (one statement for all of them).
    let d = app
        .data(
            "query ($s: ID!) { session(id: $s) { llmInteractionsConnection(first: 10) { edges { node {
               historyEdited conversationConnection(first: 10) { totalCount edges { node { sequenceNumber } } }
             } } } } }",
            json!({ "s": session }),
        )
        .await;
    let read: Vec<(bool, Vec<i64>)> = nodes(&d["session"]["llmInteractionsConnection"])
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["historyEdited"].as_bool().unwrap(),
                sequences(&i["conversationConnection"]),
            )
        })
        .collect();
    assert_eq!(
        read,
        [
            (false, vec![1, 2, 3, 4]),
            (true, vec![1, 7, 6]),
            (true, vec![1, 2, 5, 6]),
            (false, vec![1, 2, 3]),
        ]
    );
    app.stop().await;
}

#[tokio::test]
async fn what_a_call_says_it_sent_must_be_its_own_conversation() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let session = a.session().await;
    let stage = a.stage(&session, 0, 2, Some("ALL")).await;
    let exec = a.execution(&stage, 1, "KubernetesAgent").await;
    let other = a.execution(&stage, 2, "LogsAgent").await;
    let m = conversation(&a, &exec, &[("SYSTEM", "one"), ("USER", "two")]).await;
    let foreign = conversation(&a, &other, &[("SYSTEM", "elsewhere")]).await;
    let refused = [
        (
            json!([m[0], foreign[0]]),
            json!(null),
            "not a message of agent execution",
        ),
        (json!([m[1], m[1]]), json!(null), "twice"),
        (json!([]), json!(null), "1 to 10000"),
        (
            json!([m[1], m[0]]),
            json!(m[1]),
            "not the last of `sentMessageIds`",
        ),
    ];
    for (sent, last, says) in refused {
        let (code, message) = app
            .error(RECORD, json!({ "e": exec, "sent": sent, "last": last }))
            .await;
        assert_eq!(code, "BAD_USER_INPUT", "{sent}: {message}");
        assert!(message.contains(says), "{sent}: {message}");
    }
    // Nothing was recorded.
    let d = app
        .data(
            "query ($s: ID!) { session(id: $s) { llmInteractionsConnection { totalCount } } }",
            json!({ "s": session }),
        )
        .await;
    assert_eq!(d["session"]["llmInteractionsConnection"]["totalCount"], 0);
    // A list in another order than the conversation's is a selection, and fine.
    let d = a
        .ok(RECORD, json!({ "e": exec, "sent": [m[1], m[0]] }))
        .await;
    assert_eq!(d["recordLLMInteraction"]["historyEdited"], true);
    let id = d["recordLLMInteraction"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        sequences(&page(&app, &id, json!({ "first": 5 })).await),
        [2, 1]
    );

    // An export carries the selection, and an import restores it (and refuses a selection
    // that the live writer would have stored as a plain prefix).
    let dir = std::env::temp_dir().join(format!("casefile-sent-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("session.json");
    let uuid = app
        .data(
            "query ($s: ID!) { session(id: $s) { uuid } }",
            json!({ "s": session }),
        )
        .await["session"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let args =
        crate::export::export_args(&["--session", &uuid, "--output", file.to_str().unwrap()]);
    casefile::cli::export::run_on_database(&app.store, &args)
        .await
        .unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    let document: Value = serde_json::from_str(&text).unwrap();
    let exported = document["llm_interactions"][0]["sent_message_ids"].clone();
    assert_eq!(exported.as_array().unwrap().len(), 2, "{exported}");

    // A selection the live writer would have stored as a plain prefix is refused (the
    // import writes nothing of that session); the document as exported is restored.
    let target = TestApp::start().await;
    let mut prefix = document.clone();
    let ordered: Vec<Value> = exported.as_array().unwrap().iter().rev().cloned().collect();
    prefix["llm_interactions"][0]["last_message_id"] = ordered[1].clone();
    prefix["llm_interactions"][0]["sent_message_ids"] = json!(ordered);
    let wrong = dir.join("prefix.json");
    std::fs::write(&wrong, format!("{prefix}\n")).unwrap();
    let refused =
        casefile::cli::import::run_on_database(&target.store, &crate::export::import_args(&wrong))
            .await;
    let message = format!("{:#}", refused.unwrap_err());
    assert!(message.contains("sent_message_ids"), "{message}");
    casefile::cli::import::run_on_database(&target.store, &crate::export::import_args(&file))
        .await
        .unwrap();
    let restored = target
        .data(CONVERSATION, json!({ "id": id, "first": 5 }))
        .await["node"]["conversationConnection"]
        .clone();
    assert_eq!(sequences(&restored), [2, 1]);
    std::fs::remove_dir_all(&dir).unwrap();
    target.stop().await;
    app.stop().await;
}
