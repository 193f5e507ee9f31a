//! The read side: the whole tree both ways, roll-ups, conversations, pagination and filters.

use chrono::{Duration, Utc};
use serde_json::{Value, json};

use crate::common::fixtures::{self, At, NewSession};
use crate::common::{TestApp, nodes};

const TREE: &str = r#"
query ($id: ID!) {
  session(id: $id) {
    id uuid status alertType author finalAnalysis durationMs
    counts { stages executions timelineEvents messages llmInteractions mcpInteractions }
    tokenUsage { inputTokens outputTokens totalTokens thinkingTokens estimatedCostUsd llmInteractionCount }
    chatsConnection(first: 20) { edges { node { createdBy session { uuid } messages { content chat { createdBy } stage { name chat { createdBy } chatUserMessage { content } } } } } }
    stages {
      stageIndex name expectedAgentCount parallelType successPolicy
      session { uuid }
      tokenUsage { inputTokens llmInteractionCount }
      llmInteractionsConnection(first: 20) { edges { node { uuid } } }
      mcpInteractionsConnection(first: 20) { edges { node { uuid } } }
      topLevel: executions(includeSubAgents: false) { agentName }
      executions {
        agentIndex agentName
        stage { name }
        session { uuid }
        parent { agentName }
        subAgents { agentName parent { agentName } }
        tokenUsage { inputTokens outputTokens estimatedCostUsd }
        messagesConnection(first: 20) { edges { node { sequenceNumber role content toolCallId execution { agentName } } } }
        llmInteractionsConnection(first: 20) { edges { node {
          inputTokens lastMessage { sequenceNumber }
          conversationConnection(first: 20) { edges { node { sequenceNumber role } } }
          execution { agentName } stage { name } session { uuid } } } }
        mcpInteractionsConnection(first: 20) { edges { node { toolName success execution { agentName } stage { name } session { uuid } } } }
      }
    }
  }
}"#;

#[tokio::test]
async fn the_tree_resolves_both_ways_with_roll_ups() {
    let app = TestApp::start().await;
    let session = fixtures::investigation(app.store.pool(), Utc::now()).await;
    let data = app.data(TREE, json!({ "id": session.to_string() })).await;
    let s = &data["session"];
    assert_eq!(s["status"], "COMPLETED");
    assert_eq!(s["durationMs"], 90_000);
    // 3 chain stages + 1 chat stage; 1 + 2 sub-agents, 3, 1 executions = 7.
    assert_eq!(
        s["counts"],
        json!({ "stages": 4, "executions": 7, "timelineEvents": 14, "messages": 28,
                "llmInteractions": 14, "mcpInteractions": 7 })
    );
    assert_eq!(s["tokenUsage"]["inputTokens"], 7 * 500);
    assert_eq!(s["tokenUsage"]["outputTokens"], 7 * 100);
    assert_eq!(s["tokenUsage"]["totalTokens"], 7 * 600);
    assert_eq!(s["tokenUsage"]["thinkingTokens"], 14 * 10);
    assert_eq!(s["tokenUsage"]["llmInteractionCount"], 14);
    assert!((s["tokenUsage"]["estimatedCostUsd"].as_f64().unwrap() - 7.0 * 0.005).abs() < 1e-9);

    let stages = s["stages"].as_array().unwrap();
    let names: Vec<&str> = stages
        .iter()
        .map(|st| st["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["Initial Analysis", "Deep Dive", "Recommendations", "Chat"]
    );
    assert_eq!(stages[1]["expectedAgentCount"], 3);
    assert_eq!(stages[1]["parallelType"], "MULTI_AGENT");
    assert_eq!(stages[1]["successPolicy"], "ALL");
    assert_eq!(stages[0]["parallelType"], Value::Null);
    assert_eq!(
        stages[1]["tokenUsage"],
        json!({ "inputTokens": 1500, "llmInteractionCount": 6 })
    );
    let llm = nodes(&stages[1]["llmInteractionsConnection"]);
    assert_eq!(llm.as_array().unwrap().len(), 6);
    let mcp = nodes(&stages[0]["mcpInteractionsConnection"]);
    assert_eq!(mcp.as_array().unwrap().len(), 3);
    for stage in stages {
        assert_eq!(stage["session"]["uuid"], s["uuid"]);
    }

    // Orchestrator and sub-agents, both ways.
    let first = stages[0]["executions"].as_array().unwrap();
    let agents: Vec<&str> = first
        .iter()
        .map(|e| e["agentName"].as_str().unwrap())
        .collect();
    assert_eq!(agents, ["Agent1", "SubAgent2", "SubAgent3"]);
    assert_eq!(stages[0]["topLevel"], json!([{ "agentName": "Agent1" }]));
    assert_eq!(
        first[0]["subAgents"],
        json!([{ "agentName": "SubAgent2", "parent": { "agentName": "Agent1" } },
               { "agentName": "SubAgent3", "parent": { "agentName": "Agent1" } }])
    );
    assert_eq!(first[1]["parent"]["agentName"], "Agent1");
    assert_eq!(first[0]["parent"], Value::Null);

    let exec = &stages[1]["executions"][2];
    assert_eq!(exec["agentIndex"], 3);
    assert_eq!(exec["stage"]["name"], "Deep Dive");
    assert_eq!(exec["session"]["uuid"], s["uuid"]);
    assert_eq!(exec["tokenUsage"]["inputTokens"], 500);
    let messages = nodes(&exec["messagesConnection"]);
    let roles: Vec<&str> = messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["SYSTEM", "USER", "ASSISTANT", "TOOL"]);
    assert_eq!(messages[3]["toolCallId"], "call_4");
    assert_eq!(messages[0]["execution"]["agentName"], "Agent3");

    // The conversation of an interaction is exactly the prefix up to its last message.
    let llm = nodes(&exec["llmInteractionsConnection"]);
    assert_eq!(llm[0]["lastMessage"], Value::Null);
    assert_eq!(nodes(&llm[0]["conversationConnection"]), json!([]));
    assert_eq!(llm[1]["lastMessage"]["sequenceNumber"], 4);
    let seqs: Vec<i64> = nodes(&llm[1]["conversationConnection"])
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["sequenceNumber"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, [1, 2, 3, 4]);
    assert_eq!(llm[1]["execution"]["agentName"], "Agent3");
    assert_eq!(llm[1]["stage"]["name"], "Deep Dive");
    let mcp = nodes(&exec["mcpInteractionsConnection"]);
    assert_eq!(mcp[0]["toolName"], "kubectl_get_pods");
    assert_eq!(mcp[0]["success"], true);

    // Chats: session -> chat -> question -> answering stage -> chat.
    let chats = nodes(&s["chatsConnection"]);
    let chat = &chats[0];
    assert_eq!(chat["createdBy"], "alice");
    assert_eq!(chat["session"]["uuid"], s["uuid"]);
    let question = &chat["messages"][0];
    assert_eq!(question["content"], "Why was the limit so low?");
    assert_eq!(question["chat"]["createdBy"], "alice");
    assert_eq!(question["stage"]["name"], "Chat");
    assert_eq!(question["stage"]["chat"]["createdBy"], "alice");
    assert_eq!(
        question["stage"]["chatUserMessage"]["content"],
        "Why was the limit so low?"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_conversation_is_the_prefix_sent_not_later_messages() {
    let app = TestApp::start().await;
    let pool = app.store.pool();
    let session = fixtures::session(pool, NewSession::default()).await;
    let stage = fixtures::stage(pool, session, 0, "Only", 1).await;
    let execution = fixtures::execution(pool, session, stage, 1, "Agent", None).await;
    let at = At {
        session,
        stage,
        execution,
    };
    let mut ids = Vec::new();
    for (i, role) in ["system", "user", "assistant", "user", "assistant"]
        .into_iter()
        .enumerate()
    {
        ids.push(fixtures::message(pool, at, i as i32 + 1, role, &format!("m{}", i + 1)).await);
    }
    let early = fixtures::llm(pool, at, Some(ids[1]), 10, 5, 0.0).await;
    let late = fixtures::llm(pool, at, Some(ids[3]), 20, 5, 0.0).await;
    let q = "query ($a: ID!, $b: ID!) {
        a: node(id: $a) { ... on LLMInteraction {
          conversationConnection(first: 20) { edges { node { content } } } lastMessage { content } } }
        b: node(id: $b) { ... on LLMInteraction {
          conversationConnection(first: 20) { edges { node { content } } } } } }";
    let gid = |id: uuid::Uuid| {
        casefile::api::ids::encode(casefile::api::ids::NodeType::LlmInteraction, id).0
    };
    let data = app
        .data(q, json!({ "a": gid(early), "b": gid(late) }))
        .await;
    assert_eq!(
        nodes(&data["a"]["conversationConnection"]),
        json!([{ "content": "m1" }, { "content": "m2" }])
    );
    assert_eq!(data["a"]["lastMessage"]["content"], "m2");
    assert_eq!(
        nodes(&data["b"]["conversationConnection"]),
        json!([{ "content": "m1" }, { "content": "m2" }, { "content": "m3" }, { "content": "m4" }])
    );
    app.stop().await;
}

#[tokio::test]
async fn timeline_pages_follow_sequence_numbers_at_every_level() {
    let app = TestApp::start().await;
    let pool = app.store.pool();
    let session = fixtures::session(pool, NewSession::default()).await;
    let stage_a = fixtures::stage(pool, session, 0, "A", 1).await;
    let stage_b = fixtures::stage(pool, session, 1, "B", 1).await;
    let exec_a = fixtures::execution(pool, session, stage_a, 1, "AgentA", None).await;
    let exec_b = fixtures::execution(pool, session, stage_b, 1, "AgentB", None).await;
    // Interleave the two agents' events: odd sequence numbers in A, even in B.
    for seq in 1..=10 {
        let at = if seq % 2 == 1 {
            At {
                session,
                stage: stage_a,
                execution: exec_a,
            }
        } else {
            At {
                session,
                stage: stage_b,
                execution: exec_b,
            }
        };
        fixtures::event(pool, at, seq, "llm_response", &format!("e{seq}")).await;
    }
    let q = "query ($id: ID!, $first: Int, $after: String) { session(id: $id) {
        timeline(first: $first, after: $after) { pageInfo { hasNextPage endCursor }
          edges { cursor node { sequenceNumber content session { uuid } stage { name } execution { agentName } } } }
        stages { timeline(first: 3) { edges { node { sequenceNumber } } pageInfo { hasNextPage } }
                 executions { timeline(first: 100) { edges { node { sequenceNumber } } } } } } }";
    let mut seen = Vec::new();
    let mut after = Value::Null;
    loop {
        let data = app
            .data(
                q,
                json!({ "id": session.to_string(), "first": 4, "after": after }),
            )
            .await;
        let page = &data["session"]["timeline"];
        for edge in page["edges"].as_array().unwrap() {
            seen.push(edge["node"]["sequenceNumber"].as_i64().unwrap());
            let agent = edge["node"]["execution"]["agentName"].as_str().unwrap();
            let stage = edge["node"]["stage"]["name"].as_str().unwrap();
            assert_eq!(agent, if stage == "A" { "AgentA" } else { "AgentB" });
        }
        if !page["pageInfo"]["hasNextPage"].as_bool().unwrap() {
            break;
        }
        after = page["pageInfo"]["endCursor"].clone();
    }
    assert_eq!(seen, (1..=10).collect::<Vec<_>>());

    let data = app
        .data(q, json!({ "id": session.to_string(), "first": 0 }))
        .await;
    assert_eq!(data["session"]["timeline"]["edges"], json!([]));
    assert_eq!(data["session"]["timeline"]["pageInfo"]["hasNextPage"], true);
    let stages = data["session"]["stages"].as_array().unwrap();
    let seqs = |v: &Value| -> Vec<i64> {
        v["edges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["node"]["sequenceNumber"].as_i64().unwrap())
            .collect()
    };
    assert_eq!(seqs(&stages[0]["timeline"]), [1, 3, 5]);
    assert_eq!(stages[0]["timeline"]["pageInfo"]["hasNextPage"], true);
    assert_eq!(seqs(&stages[1]["timeline"]), [2, 4, 6]);
    assert_eq!(
        seqs(&stages[1]["executions"][0]["timeline"]),
        [2, 4, 6, 8, 10]
    );

    // A cursor from the session timeline continues a stage timeline (same sequence space).
    let cursor = app
        .data(q, json!({ "id": session.to_string(), "first": 4 }))
        .await["session"]["timeline"]["pageInfo"]["endCursor"]
        .clone();
    let q2 = "query ($id: ID!, $after: String) { node(id: $id) { ... on Stage { timeline(after: $after) { edges { node { sequenceNumber } } } } } }";
    let stage_gid = casefile::api::ids::encode(casefile::api::ids::NodeType::Stage, stage_a).0;
    let data = app
        .data(q2, json!({ "id": stage_gid, "after": cursor }))
        .await;
    assert_eq!(seqs(&data["node"]["timeline"]), [5, 7, 9]);
    app.stop().await;
}

const LIST: &str =
    "query ($first: Int, $after: String, $filter: SessionFilterInput, $order: SessionOrder) {
  sessions(first: $first, after: $after, filter: $filter, orderBy: $order) {
    totalCount pageInfo { hasNextPage hasPreviousPage endCursor }
    edges { cursor node { uuid alertType status author durationMs createdAt updatedAt
      completedAt deletedAt } } } }";

async fn all_pages(app: &TestApp, page: i64, filter: Value, order: Value) -> Vec<Value> {
    let mut nodes = Vec::new();
    let mut after = Value::Null;
    loop {
        let data = app
            .data(
                LIST,
                json!({ "first": page, "after": after, "filter": filter, "order": order }),
            )
            .await;
        let conn = &data["sessions"];
        nodes.extend(
            conn["edges"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["node"].clone()),
        );
        if !conn["pageInfo"]["hasNextPage"].as_bool().unwrap() {
            return nodes;
        }
        after = conn["pageInfo"]["endCursor"].clone();
    }
}

/// 17 sessions with many ties in every sort key.
pub(crate) async fn seed_sessions(app: &TestApp) -> Vec<uuid::Uuid> {
    let pool = app.store.pool();
    let base = Utc::now() - Duration::hours(1);
    let statuses = [
        "pending",
        "in_progress",
        "completed",
        "failed",
        "cancelled",
        "timed_out",
        "cancelling",
    ];
    let alert_types = ["PodCrashLooping", "HighLatency", "DiskPressure"];
    let authors = [None, Some("alertmanager"), Some("bob")];
    let mut ids = Vec::new();
    for i in 0..17usize {
        ids.push(
            fixtures::session(
                pool,
                NewSession {
                    alert_type: alert_types[i % 3],
                    status: statuses[i % 7],
                    author: authors[i % 3],
                    // Pairs share a creation instant, so the id must break ties.
                    created_at: base + Duration::seconds((i / 2) as i64),
                    duration_secs: (i % 4 != 0).then_some((i % 5) as i64 * 10),
                    final_analysis: (i == 5)
                        .then_some("Root cause: the Payments DB ran out of connections"),
                    ..NewSession::default()
                },
            )
            .await,
        );
    }
    ids
}

#[tokio::test]
async fn every_ordering_pages_without_overlap_or_gap() {
    let app = TestApp::start().await;
    let ids = seed_sessions(&app).await;
    for field in [
        "CREATED_AT",
        "STATUS",
        "ALERT_TYPE",
        "AUTHOR",
        "DURATION",
        "UPDATED_AT",
        "COMPLETED_AT",
    ] {
        for direction in ["ASC", "DESC"] {
            let order = json!({ "field": field, "direction": direction });
            let whole = all_pages(&app, 100, json!(null), order.clone()).await;
            assert_eq!(whole.len(), ids.len());
            for page in [1, 3, 5] {
                let paged = all_pages(&app, page, json!(null), order.clone()).await;
                assert_eq!(paged, whole, "{field} {direction} in pages of {page}");
            }
            // The single page is sorted by the key, ties by id.
            // A time as a sortable string; none (not completed) sorts first.
            let micros = |t: &Value| {
                t.as_str().map_or(String::new(), |t| {
                    let t = chrono::DateTime::parse_from_rfc3339(t).unwrap();
                    format!("{:020}", t.timestamp_micros())
                })
            };
            let key = |n: &Value| -> (String, String) {
                let k = match field {
                    "CREATED_AT" => micros(&n["createdAt"]),
                    "UPDATED_AT" => micros(&n["updatedAt"]),
                    "COMPLETED_AT" => micros(&n["completedAt"]),
                    "STATUS" => n["status"].as_str().unwrap().to_lowercase(),
                    "ALERT_TYPE" => n["alertType"].as_str().unwrap().to_owned(),
                    "AUTHOR" => n["author"].as_str().unwrap_or("").to_owned(),
                    _ => format!(
                        "{:020}",
                        n["durationMs"].as_i64().map(|d| d + 1).unwrap_or(0)
                    ),
                };
                (k, n["uuid"].as_str().unwrap().to_owned())
            };
            let keys: Vec<_> = whole.iter().map(key).collect();
            let mut sorted = keys.clone();
            sorted.sort();
            if direction == "DESC" {
                sorted.reverse();
            }
            assert_eq!(keys, sorted, "{field} {direction}");
        }
    }
    // Default: newest first.
    let default = all_pages(&app, 100, json!(null), json!(null)).await;
    let desc = all_pages(
        &app,
        100,
        json!(null),
        json!({ "field": "CREATED_AT", "direction": "DESC" }),
    )
    .await;
    assert_eq!(default, desc);
    app.stop().await;
}

#[tokio::test]
async fn filters_narrow_the_list_and_total_count_follows() {
    let app = TestApp::start().await;
    let ids = seed_sessions(&app).await;
    let pool = app.store.pool();
    fixtures::session(
        pool,
        NewSession {
            chain_id: "argocd-chain",
            deleted: true,
            ..NewSession::default()
        },
    )
    .await;

    let count = |data: &Value| data["sessions"]["totalCount"].as_i64().unwrap();
    let run = |filter: Value| {
        let app = &app;
        async move {
            app.data(LIST, json!({ "first": 100, "filter": filter }))
                .await
        }
    };
    assert_eq!(
        count(&run(json!(null)).await),
        17,
        "deleted sessions are hidden by default"
    );
    let with_deleted = run(json!({ "includeDeleted": true })).await;
    assert_eq!(count(&with_deleted), 18);
    assert_eq!(
        with_deleted["sessions"]["edges"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| !e["node"]["deletedAt"].is_null())
            .count(),
        1
    );
    assert_eq!(count(&run(json!({ "chainId": "argocd-chain" })).await), 0);
    assert_eq!(
        count(&run(json!({ "chainId": "argocd-chain", "includeDeleted": true })).await),
        1
    );

    let data = run(json!({ "status": ["COMPLETED", "FAILED"] })).await;
    assert_eq!(count(&data), 5); // i % 7 in {2, 3}: 2, 3, 9, 10, 16
    for e in data["sessions"]["edges"].as_array().unwrap() {
        assert!(["COMPLETED", "FAILED"].contains(&e["node"]["status"].as_str().unwrap()));
    }
    assert_eq!(count(&run(json!({ "alertType": "HighLatency" })).await), 6);
    assert_eq!(count(&run(json!({ "author": "bob" })).await), 5);
    assert_eq!(
        count(&run(json!({ "alertType": "HighLatency", "author": "alertmanager" })).await),
        6
    );

    // Full-text search (tests/it/search.rs has the rest): words of the final analysis, stemmed,
    // and the words of a camel-case alert type.
    assert_eq!(count(&run(json!({ "search": "payments db" })).await), 1);
    assert_eq!(count(&run(json!({ "search": "connection" })).await), 1);
    assert_eq!(count(&run(json!({ "search": "LATENCY" })).await), 6);
    // Every session's alert data names the payments namespace; `-` excludes the one whose
    // analysis mentions connections.
    assert_eq!(
        count(&run(json!({ "search": "payments -connections" })).await),
        16
    );
    assert_eq!(count(&run(json!({ "search": "100%" })).await), 0);

    // Creation window (exclusive bounds).
    let all = all_pages(
        &app,
        100,
        json!(null),
        json!({ "field": "CREATED_AT", "direction": "ASC" }),
    )
    .await;
    let t = |i: usize| all[i]["createdAt"].clone();
    let data = run(json!({ "createdAfter": t(1), "createdBefore": t(6) })).await;
    // Pairs share instants: after pair 0 (0,1) and before pair 3 (6,7) leaves 2..=5.
    assert_eq!(count(&data), 4);
    assert_eq!(ids.len(), 17);
    app.stop().await;
}

#[tokio::test]
async fn node_and_nodes_fetch_every_type() {
    let app = TestApp::start().await;
    let pool = app.store.pool();
    let session = fixtures::investigation(pool, Utc::now()).await;
    let data = app
        .data(
            "query ($id: ID!) { session(id: $id) { id stages { id chat { id } chatUserMessage { id } executions { id
               messagesConnection(first: 1) { edges { node { id } } }
               llmInteractionsConnection(first: 1) { edges { node { id } } }
               mcpInteractionsConnection(first: 1) { edges { node { id } } } } }
               timeline(first: 1) { edges { node { id } } } } }",
            json!({ "id": session.to_string() }),
        )
        .await;
    let s = &data["session"];
    let exec = &s["stages"][0]["executions"][0];
    let ids = [
        (s["id"].clone(), "Session"),
        (s["stages"][0]["id"].clone(), "Stage"),
        (exec["id"].clone(), "AgentExecution"),
        (
            nodes(&exec["messagesConnection"])[0]["id"].clone(),
            "Message",
        ),
        (
            nodes(&exec["llmInteractionsConnection"])[0]["id"].clone(),
            "LLMInteraction",
        ),
        (
            nodes(&exec["mcpInteractionsConnection"])[0]["id"].clone(),
            "MCPInteraction",
        ),
        (
            s["timeline"]["edges"][0]["node"]["id"].clone(),
            "TimelineEvent",
        ),
        (s["stages"][3]["chat"]["id"].clone(), "Chat"),
        (
            s["stages"][3]["chatUserMessage"]["id"].clone(),
            "ChatUserMessage",
        ),
    ];
    for (id, type_name) in &ids {
        let data = app
            .data(
                "query ($id: ID!) { node(id: $id) { __typename id } }",
                json!({ "id": id }),
            )
            .await;
        assert_eq!(data["node"]["__typename"], *type_name);
        assert_eq!(data["node"]["id"], *id);
    }
    let all: Vec<Value> = ids.iter().map(|(id, _)| id.clone()).collect();
    let data = app
        .data(
            "query ($ids: [ID!]!) { nodes(ids: $ids) { id } }",
            json!({ "ids": all }),
        )
        .await;
    assert_eq!(data["nodes"].as_array().unwrap().len(), ids.len());
    for (i, (id, _)) in ids.iter().enumerate() {
        assert_eq!(data["nodes"][i]["id"], *id);
    }
    // The global ID and the bare UUID address the same session.
    let by_gid = app
        .data(
            "query ($id: ID!) { session(id: $id) { uuid } }",
            json!({ "id": s["id"] }),
        )
        .await;
    assert_eq!(by_gid["session"]["uuid"], session.to_string());
    app.stop().await;
}
