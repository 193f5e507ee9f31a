//! A page of interactions reads the payloads its nodes select in its own statement, and primes
//! the loaders their fields ask; that changes how they are read, never the answer. Random
//! selections over the demo (payload fields at every level, some in inline fragments, some under
//! `@include`/`@skip`, next to an alias of the same page that selects none, so one statement
//! serves keys that want payloads and keys that do not) answer the same as `nodes(ids:)`, whose
//! interactions read their payloads through the payload loaders.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::common::TestApp;
use crate::common::rng::Rng;

/// A node selection: `id`, then each field maybe, plain, in an inline fragment on `on`, or
/// under a directive.
fn node_selection(rng: &mut Rng, on: &str, fields: &[&str]) -> String {
    let mut out = String::from("id");
    for field in fields {
        if !rng.chance(60) {
            continue;
        }
        out.push(' ');
        out.push_str(&match rng.below(5) {
            0 => format!("... on {on} {{ {field} }}"),
            1 => format!("{field} @include(if: false)"),
            2 => format!("{field} @skip(if: false)"),
            _ => field.to_string(),
        });
    }
    out
}

/// The interaction pages of one level: each with `llm`'s or `mcp`'s nodes, and the same pages
/// again under aliases that select no payload.
fn pages(llm: &str, mcp: &str) -> String {
    format!(
        "llmInteractionsConnection(first: 100) {{ edges {{ node {{ {llm} }} }} }} \
         bareLlm: llmInteractionsConnection(first: 100) {{ edges {{ node {{ id }} }} }} \
         mcpInteractionsConnection(last: 100) {{ edges {{ node {{ {mcp} }} }} }} \
         bareMcp: mcpInteractionsConnection(first: 2) {{ edges {{ node {{ id }} }} }}"
    )
}

/// Every node of the interaction pages in `answer`, wherever they are.
fn interaction_nodes<'a>(answer: &'a Value, out: &mut Vec<&'a Value>) {
    match answer {
        Value::Object(fields) => {
            for (name, value) in fields {
                if name.starts_with("llmInteractions") || name.starts_with("mcpInteractions") {
                    out.extend(
                        value["edges"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|e| &e["node"]),
                    );
                } else {
                    interaction_nodes(value, out);
                }
            }
        }
        Value::Array(values) => values.iter().for_each(|v| interaction_nodes(v, out)),
        _ => {}
    }
}

#[tokio::test]
async fn payloads_read_with_their_page_answer_as_payloads_read_alone() {
    let mut options = casefile::http::HttpOptions::default();
    options.limits.max_query_complexity = usize::MAX / 2;
    options.limits.max_response_bytes = 1 << 30;
    let app = TestApp::start_with(options).await;
    casefile::demo::load(&app.store).await.unwrap();
    let sessions = app.session_ids(100).await;
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    println!("payload selections, seed {seed}");
    let mut rng = Rng(seed);
    let mut compared = 0;
    for round in 0..24 {
        let llm = node_selection(
            &mut rng,
            "LLMInteraction",
            &[
                "llmRequest",
                "llmResponse",
                "thinkingContent",
                "responseMetadata",
                "modelName",
            ],
        );
        let mcp = node_selection(
            &mut rng,
            "MCPInteraction",
            &["toolArguments", "toolResult", "availableTools", "toolName"],
        );
        let pages = pages(&llm, &mcp);
        let session = &sessions[round % sessions.len()];
        let answer = app
            .data(
                &format!(
                    "query($id: ID!) {{ session(id: $id) {{ {pages} \
                     stages {{ {pages} executions {{ {pages} }} }} }} }}"
                ),
                json!({ "id": session }),
            )
            .await;
        let mut read = Vec::new();
        interaction_nodes(&answer, &mut read);
        let ids: Vec<&Value> = read.iter().map(|n| &n["id"]).collect();
        let alone = app
            .data(
                &format!(
                    "query($ids: [ID!]!) {{ nodes(ids: $ids) {{ \
                     ... on LLMInteraction {{ {llm} }} ... on MCPInteraction {{ {mcp} }} }} }}"
                ),
                json!({ "ids": ids }),
            )
            .await;
        let alone: HashMap<&Value, &Value> = alone["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| (&n["id"], n))
            .collect();
        for node in read {
            let expected = alone[&node["id"]];
            // A bare alias's node selects none of the payloads: only what it selected.
            for (field, value) in node.as_object().unwrap() {
                assert_eq!(
                    value, &expected[field],
                    "round {round} (seed {seed}), {field} of {}\nLLM: {llm}\nMCP: {mcp}",
                    node["id"]
                );
                compared += 1;
            }
        }
    }
    assert!(compared > 1000, "{compared} fields compared");
    app.stop().await;
}
