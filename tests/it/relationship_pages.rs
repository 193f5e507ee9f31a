//! Every bounded relationship walked a page at a time, forward and backward, against the whole
//! relationship read in one page: the same items in the same order, and `totalCount` equal to
//! its length.

use chrono::Utc;
use serde_json::{Value, json};

use crate::common::{TestApp, fixtures, nodes};

/// The path from a session to each relationship's parents, and the connection to walk.
const RELATIONSHIPS: [(&str, &str); 10] = [
    ("", "llmInteractionsConnection"),
    ("", "mcpInteractionsConnection"),
    ("", "chatsConnection"),
    ("chatsConnection", "questionsConnection"),
    ("stages", "llmInteractionsConnection"),
    ("stages", "mcpInteractionsConnection"),
    ("agents", "llmInteractionsConnection"),
    ("agents", "mcpInteractionsConnection"),
    ("agents", "messagesConnection"),
    ("llmInteractionsConnection", "conversationConnection"),
];

/// The whole of a relationship: one page larger than any the fixture holds.
const WHOLE: &str = "(first: 100) { edges { node { uuid } } }";

/// The query of `selection` on the parents under `path`, with the paging variables when it pages.
fn query(path: &str, selection: &str) -> String {
    let vars = if selection.contains("$first") {
        ", $first: Int, $after: String, $last: Int, $before: String"
    } else {
        ""
    };
    let inner = format!("uuid {selection}");
    let body = match path {
        "" => inner,
        _ if path.ends_with("Connection") => {
            format!("{path}(first: 100) {{ edges {{ node {{ {inner} }} }} }}")
        }
        _ => format!("{path} {{ {inner} }}"),
    };
    format!("query ($s: ID!{vars}) {{ session(id: $s) {{ {body} }} }}")
}

/// The parents under `path` of a session answer.
fn parents(data: &Value, path: &str) -> Vec<Value> {
    let session = &data["session"];
    match path {
        "" => vec![session.clone()],
        _ if path.ends_with("Connection") => nodes(&session[path]).as_array().unwrap().clone(),
        _ => session[path].as_array().unwrap().clone(),
    }
}

const PAGE: &str = "(first: $first, after: $after, last: $last, before: $before) { totalCount edges { cursor node { uuid } } pageInfo { hasPreviousPage hasNextPage startCursor endCursor } }";

#[tokio::test]
async fn every_relationship_pages_both_ways_like_its_list() {
    let app = TestApp::start().await;
    let session = fixtures::investigation(app.store.pool(), Utc::now()).await;
    let s = session.to_string();
    let mut walked = 0;
    for (path, connection) in RELATIONSHIPS {
        let wholes = app
            .data(
                &query(path, &format!("{connection}{WHOLE}")),
                json!({ "s": s }),
            )
            .await;
        let page_query = query(path, &format!("{connection}{PAGE}"));
        for (i, parent) in parents(&wholes, path).into_iter().enumerate() {
            let whole = nodes(&parent[connection]);
            let expected: Vec<&Value> = whole
                .as_array()
                .unwrap()
                .iter()
                .map(|item| &item["uuid"])
                .collect();
            // Forward, two at a time.
            let mut forward = Vec::new();
            let mut after = Value::Null;
            loop {
                let d = app
                    .data(&page_query, json!({ "s": s, "first": 2, "after": after }))
                    .await;
                let page = &parents(&d, path)[i][connection];
                assert_eq!(page["totalCount"], expected.len(), "{path}.{connection}");
                forward.extend(
                    page["edges"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|e| e["node"]["uuid"].clone()),
                );
                if page["pageInfo"]["hasNextPage"] != true {
                    break;
                }
                after = page["pageInfo"]["endCursor"].clone();
            }
            assert_eq!(
                forward.iter().collect::<Vec<_>>(),
                expected,
                "{path}.{connection} forward"
            );
            // Backward, three at a time.
            let mut backward = Vec::new();
            let mut before = Value::Null;
            loop {
                let d = app
                    .data(&page_query, json!({ "s": s, "last": 3, "before": before }))
                    .await;
                let page = &parents(&d, path)[i][connection];
                let mut items: Vec<Value> = page["edges"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| e["node"]["uuid"].clone())
                    .collect();
                items.extend(backward);
                backward = items;
                if page["pageInfo"]["hasPreviousPage"] != true {
                    break;
                }
                before = page["pageInfo"]["startCursor"].clone();
            }
            assert_eq!(
                backward.iter().collect::<Vec<_>>(),
                expected,
                "{path}.{connection} backward"
            );
            walked += expected.len();
        }
    }
    assert!(walked > 20, "the fixture has items to walk ({walked})");
    // A cursor of one kind of list is refused by another kind.
    let messages = app
        .data(
            &query("agents", &format!("messagesConnection{PAGE}")),
            json!({ "s": s, "first": 1 }),
        )
        .await;
    let cursor =
        messages["session"]["agents"][0]["messagesConnection"]["pageInfo"]["endCursor"].clone();
    let (code, message) = app
        .error(
            &query("", &format!("chatsConnection{PAGE}")),
            json!({ "s": s, "after": cursor }),
        )
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
    assert!(
        message.contains("not to a list of interactions or chats"),
        "{message}"
    );
    app.stop().await;
}
