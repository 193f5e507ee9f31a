//! The SQL statements a request costs are bounded by the relationship levels of the query, not
//! by the number of rows. Statements are counted where sqlx executes them: every statement sqlx
//! runs emits one `sqlx::query` tracing event, which a counting layer installed here observes.
//! (This file is its own test binary so that no other test's statements are counted.)

#[path = "it/common/mod.rs"]
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use chrono::{Duration, Utc};
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt as _;

use common::TestApp;

static STATEMENTS: AtomicUsize = AtomicUsize::new(0);

struct CountStatements;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for CountStatements {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if event.metadata().target() != "sqlx::query" {
            return;
        }
        // The live hub's own housekeeping runs in the background, not for the request.
        let mut statement = StatementText(String::new());
        event.record(&mut statement);
        if !statement.0.contains("live_changes") {
            STATEMENTS.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// The SQL text of a `sqlx::query` event.
struct StatementText(String);

impl tracing::field::Visit for StatementText {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "db.statement" || field.name() == "summary" {
            self.0.push_str(value);
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "db.statement" || field.name() == "summary" {
            self.0.push_str(&format!("{value:?}"));
        }
    }
}

/// Every relationship and roll-up of the schema, each used at one place in the tree.
const DEEP: &str = r#"
query Deep($n: Int) {
  sessions(first: $n) {                                   # 1 page of sessions
    totalCount                                            # 2 count
    edges { node {
      alertType
      counts { stages executions timelineEvents messages } # 3 counts by session
      tokenUsage { totalTokens estimatedCostUsd }          # 4 token usage by session
      llmInteractions { modelName }                        # 5 LLM interactions by session
      mcpInteractions { toolName }                         # 6 MCP interactions by session
      chats {                                              # 7 chats by session
        messages {                                         # 8 questions by chat
          content
          stage { name }                                   # 9 stage by question
        }
      }
      timeline(first: 50) { edges { node {                 # 10 timeline page by session
        content
        session { alertType }                              # 11 sessions by id
        llmInteraction { modelName }                       # 12 LLM interactions by id
        mcpInteraction { toolName }                        # 13 MCP interactions by id
      } } }
      stages {                                             # 14 stages by session
        name
        tokenUsage { totalTokens }                         # 15 token usage by stage
        timeline(first: 10) { edges { node { content } } } # 16 timeline page by stage
        llmInteractions { modelName }                      # 17 LLM interactions by stage
        mcpInteractions { toolName }                       # 18 MCP interactions by stage
        chat { createdBy }                                 # 19 chats by id
        executions {                                       # 20 executions by stage
          agentName
          parent { agentName }                             # 21 executions by id
          subAgents { agentName }                          # 22 sub-agents by parent
          tokenUsage { totalTokens }                       # 23 token usage by execution
          timeline(first: 10) { edges { node { content } } } # 24 timeline page by execution
          messages { role content }                        # 25 messages by execution
          mcpInteractions { toolName }                     # 26 MCP interactions by execution
          llmInteractions {                                # 27 LLM interactions by execution
            inputTokens
            lastMessage { sequenceNumber }                 # 28 messages by id
            conversation { role content }                  # 29 conversation by LLM interaction
          }
        }
      }
    } }
  }
}"#;

/// One statement per numbered line of [`DEEP`].
const EXPECTED_STATEMENTS: usize = 29;

async fn statements_of(app: &TestApp, sessions: i64) -> (usize, serde_json::Value) {
    // Warm up first (connections and prepared statements), then count one clean run.
    app.data(DEEP, json!({ "n": sessions })).await;
    STATEMENTS.store(0, Ordering::SeqCst);
    let data = app.data(DEEP, json!({ "n": sessions })).await;
    (STATEMENTS.load(Ordering::SeqCst), data)
}

#[tokio::test]
async fn a_deep_query_costs_one_statement_per_relationship_level() {
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(CountStatements))
        .unwrap();
    let app = TestApp::start().await;
    let now = Utc::now();
    for i in 0..20 {
        common::fixtures::investigation(app.store.pool(), now - Duration::minutes(i)).await;
    }

    let (twenty, data) = statements_of(&app, 20).await;
    let sessions = data["sessions"]["edges"].as_array().unwrap();
    assert_eq!(sessions.len(), 20);
    // Everything was really loaded: 20 sessions × (4 stages, 7 executions, 14 LLM calls, …).
    let executions: usize = sessions
        .iter()
        .flat_map(|s| s["node"]["stages"].as_array().unwrap())
        .map(|st| st["executions"].as_array().unwrap().len())
        .sum();
    assert_eq!(executions, 20 * 7);
    let conversations: usize = sessions
        .iter()
        .flat_map(|s| s["node"]["stages"].as_array().unwrap())
        .flat_map(|st| st["executions"].as_array().unwrap())
        .flat_map(|e| e["llmInteractions"].as_array().unwrap())
        .map(|l| l["conversation"].as_array().unwrap().len())
        .sum();
    assert_eq!(conversations, 20 * 7 * 4);
    assert_eq!(
        sessions[0]["node"]["timeline"]["edges"]
            .as_array()
            .unwrap()
            .len(),
        14
    );
    assert_eq!(
        sessions[0]["node"]["chats"][0]["messages"][0]["stage"]["name"],
        "Chat"
    );

    println!("deep query over 20 sessions: {twenty} SQL statements");
    assert_eq!(twenty, EXPECTED_STATEMENTS);

    // Fewer rows, same query shape: the same number of statements.
    let (five, _) = statements_of(&app, 5).await;
    println!("deep query over 5 sessions: {five} SQL statements");
    assert_eq!(five, EXPECTED_STATEMENTS);
    app.stop().await;
}
