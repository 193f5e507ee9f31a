//! Reading ahead below sessions changes how the rows are loaded, never the answer: random
//! selections over the demo's sessions (every relationship read ahead, at every level, with
//! random page sizes from either end, aliases, filters, counts and `@include`) answer the same
//! through `session(id:)` and a page of `sessions`, which read ahead, as through `node(id:)` and
//! `nodes(ids:)`, which do not.

use serde_json::{Value, json};

use crate::common::TestApp;

/// SplitMix64, seeded per run (printed) so that a failing selection can be made again.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// A page's arguments: a few from either end, or a whole relationship.
fn page_args(rng: &mut Rng) -> String {
    let size = [0, 1, 2, 3, 100][rng.below(5) as usize];
    if rng.chance(40) {
        format!("last: {size}")
    } else {
        format!("first: {size}")
    }
}

/// A connection's selection: edges with cursors, page info, maybe its count.
fn connection(rng: &mut Rng, node: &str) -> String {
    let count = if rng.chance(40) { "totalCount" } else { "" };
    format!(
        "{count} edges {{ cursor node {{ {node} }} }} \
         pageInfo {{ hasNextPage hasPreviousPage startCursor endCursor }}"
    )
}

/// `@include`/`@skip`, now and then.
fn directive(rng: &mut Rng) -> &'static str {
    match rng.below(10) {
        0 => "@include(if: false)",
        1 => "@skip(if: true)",
        2 => "@include(if: true)",
        _ => "",
    }
}

/// The relationships every level shares, each maybe, some twice under aliases.
fn scoped(rng: &mut Rng, messages: bool, out: &mut String) {
    for alias in ["", "again: "] {
        if rng.chance(60) {
            let filter = match rng.below(4) {
                0 => ", filter: { eventTypes: [LLM_RESPONSE, FINAL_ANALYSIS] }",
                1 => ", filter: { status: [COMPLETED] }",
                _ => "",
            };
            let args = page_args(rng);
            let directive = directive(rng);
            let edges = "edges { cursor node { uuid content } } \
                 pageInfo { hasNextPage hasPreviousPage startCursor endCursor }";
            out.push_str(&format!(
                " {}timeline({args}{filter}) {directive} {{ {edges} }}",
                alias.replace("again", "timelineAgain")
            ));
        }
        if messages && rng.chance(60) {
            let (args, directive) = (page_args(rng), directive(rng));
            let selection = connection(rng, "uuid role sequenceNumber");
            out.push_str(&format!(
                " {}messagesConnection({args}) {directive} {{ {selection} }}",
                alias.replace("again", "messagesAgain")
            ));
        }
        if rng.chance(50) {
            let (args, directive) = (page_args(rng), directive(rng));
            let selection = connection(rng, "uuid modelName");
            out.push_str(&format!(
                " {}llmInteractionsConnection({args}) {directive} {{ {selection} }}",
                alias.replace("again", "llmAgain")
            ));
        }
        if rng.chance(50) {
            let (args, directive) = (page_args(rng), directive(rng));
            let selection = connection(rng, "uuid toolName");
            out.push_str(&format!(
                " {}mcpInteractionsConnection({args}) {directive} {{ {selection} }}",
                alias.replace("again", "mcpAgain")
            ));
        }
    }
}

fn execution(rng: &mut Rng, depth: usize) -> String {
    let mut out = String::from("uuid agentName agentIndex");
    scoped(rng, true, &mut out);
    if depth < 2 && rng.chance(50) {
        out.push_str(&format!(" subAgents {{ {} }}", execution(rng, depth + 1)));
    }
    if rng.chance(20) {
        out.push_str(" parent { uuid agentName }");
    }
    out
}

fn session(rng: &mut Rng) -> String {
    let mut out = String::from("uuid status");
    if rng.chance(80) {
        let mut stage = String::from("uuid name stageIndex");
        scoped(rng, true, &mut stage);
        if rng.chance(80) {
            stage.push_str(&format!(
                " executions {} {{ {} }}",
                directive(rng),
                execution(rng, 0)
            ));
        }
        out.push_str(&format!(" stages {{ {stage} }}"));
    }
    if rng.chance(40) {
        out.push_str(&format!(" agents {{ {} }}", execution(rng, 1)));
    }
    scoped(rng, false, &mut out);
    if rng.chance(40) {
        let deleted = if rng.chance(50) {
            ", includeDeleted: true"
        } else {
            ""
        };
        let selection = connection(rng, "uuid title");
        out.push_str(&format!(
            " chatsConnection({}{deleted}) {{ {selection} }}",
            page_args(rng)
        ));
    }
    out
}

#[tokio::test]
async fn what_is_read_ahead_answers_as_what_is_not() {
    // Whole relationships under every level of many sessions: beyond the default budgets.
    let mut options = casefile::http::HttpOptions::default();
    options.limits.max_query_complexity = usize::MAX / 2;
    options.limits.max_query_depth = 64;
    options.limits.max_selections = 100_000;
    options.limits.max_response_bytes = 1 << 30;
    let app = TestApp::start_with(options).await;
    casefile::demo::load(&app.store).await.unwrap();
    let listed = app
        .data(
            "{ sessions(first: 100) { edges { node { id } } } }",
            json!({}),
        )
        .await;
    let ids: Vec<Value> = listed["sessions"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["node"]["id"].clone())
        .collect();
    assert!(ids.len() > 3, "{listed}");
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    println!("read-ahead selections, seed {seed}");
    let mut rng = Rng(seed);
    for round in 0..40 {
        let selection = session(&mut rng);
        let id = &ids[rng.below(ids.len() as u64) as usize];
        let ahead = app
            .data(
                &format!("query($id: ID!) {{ session(id: $id) {{ {selection} }} }}"),
                json!({ "id": id }),
            )
            .await;
        let alone = app
            .data(
                &format!(
                    "query($id: ID!) {{ node(id: $id) {{ ... on Session {{ {selection} }} }} }}"
                ),
                json!({ "id": id }),
            )
            .await;
        if let Some(diff) = difference("session", &ahead["session"], &alone["node"]) {
            panic!("round {round} (seed {seed}): {diff}\n{selection}");
        }
        if round % 4 == 0 {
            let page = app
                .data(
                    &format!("{{ sessions(first: 100) {{ edges {{ node {{ {selection} }} }} }} }}"),
                    json!({}),
                )
                .await;
            let nodes = app
                .data(
                    &format!(
                        "query($ids: [ID!]!) {{ nodes(ids: $ids) {{ ... on Session {{ {selection} }} }} }}"
                    ),
                    json!({ "ids": ids }),
                )
                .await;
            let page: Vec<Value> = page["sessions"]["edges"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["node"].clone())
                .collect();
            if let Some(diff) = difference("sessions", &Value::from(page), &nodes["nodes"]) {
                panic!("round {round} (seed {seed}): {diff}\n{selection}");
            }
        }
    }
    app.stop().await;
}

/// Where two answers first differ, if they do.
fn difference(path: &str, a: &Value, b: &Value) -> Option<String> {
    match (a, b) {
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (x, y))| difference(&format!("{path}[{i}]"), x, y)),
        (Value::Object(x), Value::Object(y)) if x.len() == y.len() => x
            .iter()
            .find_map(|(key, v)| difference(&format!("{path}.{key}"), v, &y[key])),
        _ if a == b => None,
        _ => Some(format!("{path}: {a} vs {b}")),
    }
}

/// A session page's statements run side by side on the pool's connections, and clients
/// reading at once share them, without the pool ever opening a connection it then loses: a
/// statement that stops waiting for the pool (its operation parked a connection meanwhile)
/// leaves the pool's acquire to finish, and what it brings to the pool. Before, each such
/// acquire was abandoned halfway, and the database forked a new server process nearly every
/// request.
#[tokio::test]
async fn reading_ahead_keeps_the_pools_connections() {
    let app = TestApp::start().await;
    let Some(url) = app.db.url() else {
        println!(
            "skipped: the embedded database has one connection (nothing runs side by side); \
             set DATABASE_URL to run this test"
        );
        return;
    };
    casefile::demo::load(&app.store).await.unwrap();
    let listed = app
        .data(
            "{ sessions(first: 8) { edges { node { id } } } }",
            json!({}),
        )
        .await;
    let ids: Vec<Value> = listed["sessions"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["node"]["id"].clone())
        .collect();
    let page = "query($id: ID!) { session(id: $id) { stages { executions {
        timeline(first: 100) { edges { node { content } } }
        messagesConnection(first: 100) { edges { node { content } } }
        llmInteractionsConnection(first: 100) { edges { node { modelName llmResponse } } }
        mcpInteractionsConnection(first: 100) { edges { node { toolName toolResult } } } } } } }";
    let monitor = sqlx::PgPool::connect(&url).await.unwrap();
    let opened = || async {
        let sessions: i64 = sqlx::query_scalar(
            "SELECT sessions FROM pg_stat_database WHERE datname = current_database()",
        )
        .fetch_one(&monitor)
        .await
        .unwrap();
        sessions
    };
    // One client, then eight at once (more statements than the pool has connections).
    let read = |clients: usize| {
        let (app, ids) = (&app, &ids);
        futures::future::join_all((0..clients).map(move |client| async move {
            for round in 0..20 {
                let id = &ids[(client + round) % ids.len()];
                app.data(page, json!({ "id": id })).await;
            }
        }))
    };
    let before = opened().await;
    read(1).await;
    read(8).await;
    let during = opened().await - before;
    println!("connections opened for 180 requests: {during}");
    // The pool opens its 5 connections once.
    assert!(during <= 5, "{during} connections opened for 180 requests");
    app.stop().await;
}
