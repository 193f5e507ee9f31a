//! The SQL statements a request costs are bounded by the relationship levels of the query, not
//! by the number of rows, nor by timing: the count is exact on a multi-threaded runtime whose
//! threads are kept busy, run after run. Statements are counted where sqlx executes them (see
//! `common::statements`); this file is its own test binary so no other test's are counted.

#[path = "it/common/mod.rs"]
mod common;

use chrono::{Duration, Utc};
use serde_json::{Value, json};

use common::{TestApp, nodes, statements};

/// Every relationship and roll-up of the schema, each used at one place in the tree (a page
/// of 100 is a whole relationship of the fixture).
const DEEP: &str = r#"
query Deep($n: Int) {
  sessions(first: $n) {                                   # 1 page of sessions
    totalCount                                            # 2 count
    edges { node {
      alertType
      counts { stages executions timelineEvents messages } # 3 counts by session
      tokenUsage { totalTokens estimatedCostUsd }          # 4 token usage by session
      llmInteractionsConnection(first: 3) { totalCount edges { node { modelName } } } # 5 LLM pages by session
      mcpInteractionsConnection(first: 3) { totalCount edges { node { toolName } } } # 6 MCP pages by session
      chatsConnection(first: 100) { totalCount edges { node { # 7 chat pages by session
        createdBy
        questionCount                                      # 8 question counts by chat
        questionsConnection(first: 100) { totalCount edges { node { # 9 question pages by chat
          content
          stage { name }                                   # 10 stage by question
        } } }
      } } }
      timeline(first: 50) { edges { node {                 # 11 timeline page by session
        content
        session { alertType }                              # 12 sessions by id
        llmInteraction { modelName }                       # 13 LLM interactions by id
        mcpInteraction { toolName }                        # 14 MCP interactions by id
      } } }
      stages {                                             # 15 stages by session
        name
        tokenUsage { totalTokens }                         # 16 token usage by stage
        timeline(first: 10) { edges { node { content } } } # 17 timeline pages by stage,
        latest: timeline(last: 5) { edges { node { content } } } # forward and backward alike
        analyses: timeline(first: 5, filter: { eventTypes: [FINAL_ANALYSIS] }) { # 18 timeline pages by stage, one type
          edges { node { content } }
        }
        messagesConnection(first: 5) { totalCount edges { node { role } } } # 19 message pages by stage
        llmInteractionsConnection(last: 2) { totalCount edges { node { modelName } } } # 20 LLM pages by stage
        mcpInteractionsConnection(last: 2) { totalCount edges { node { toolName } } } # 21 MCP pages by stage
        chat { createdBy }                                 # 22 chats by id
        executions {                                       # 23 executions by stage
          agentName
          parent { agentName }                             # 24 executions by id
          subAgents { agentName }                          # 25 sub-agents by parent
          tokenUsage { totalTokens }                       # 26 token usage by execution
          timeline(first: 10) { edges { node { content } } } # 27 timeline page by execution
          allMessages: messagesConnection(first: 100) {    # 28 message pages by execution,
            edges { node {
              role content
              requestedToolCalls {
                callId
                resultMessage { role }                     # 29 answers by call
                mcpInteraction { toolName }                # 30 MCP interactions by call
                requestEvent { content } executionEvent { content } # 31 timeline events by call
              }
              answers { callId }                           # 32 requests by call
            } }
          }
          messagesConnection(last: 2) {                    # from either end alike
            totalCount edges { node { content } }
          }
          mcpInteractionsConnection(first: 100) {          # 33 MCP pages by execution
            totalCount
            edges { node { toolName toolCall { callId } requestedBy { role } } } # (requests by call, batched with 32)
          }
          llmInteractionsConnection(first: 100) {          # 34 LLM pages by execution
            totalCount
            edges { node {
              inputTokens
              lastMessage { sequenceNumber }               # 35 messages by id
              wholeConversation: conversationConnection(first: 100) { # 36 conversation pages,
                edges { node { role content } }
              }
              conversationConnection(last: 1) { totalCount edges { node { role } } } # from either end alike
            } }
          }
        }
      }
    } }
  }
}"#;

/// One statement per numbered line of [`DEEP`].
const EXPECTED_STATEMENTS: usize = 36;

/// The levels of [`DEEP`] below the page of sessions whose fields load: the sessions'
/// relationships, the stages', the executions', and what the rows of their pages point to.
const EXPECTED_ROUND_TRIPS: u64 = 4;

async fn statements_of(app: &TestApp, sessions: i64) -> (usize, serde_json::Value) {
    // Warm up first (connections and prepared statements), then count one clean run.
    app.data(DEEP, json!({ "n": sessions })).await;
    statements::clear();
    let data = app.data(DEEP, json!({ "n": sessions })).await;
    // The waves of batches it waited for: one per level that loads (the page of sessions is
    // read by its field, not a loader).
    assert_eq!(statements::round_trips(), [EXPECTED_ROUND_TRIPS]);
    // The server's own background work (the live hub's housekeeping, a token's last use) is
    // not the request's.
    let statements = statements::recorded_by_operations();
    if statements.len() != EXPECTED_STATEMENTS {
        println!("{statements:#?}");
    }
    (statements.len(), data)
}

/// Threads that keep the machine's cores busy while they live: the runtime's threads are
/// preempted at random, as on a loaded server.
struct Busy(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Busy {
    fn start() -> Busy {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        for _ in 0..std::thread::available_parallelism().map_or(2, |n| n.get()) {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            });
        }
        Busy(stop)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deep_query_costs_one_statement_per_relationship_level() {
    statements::record();
    // Every relationship of the schema over 20 full sessions costs far more than a frontend's
    // session page, and more than the default budget allows.
    let mut options = casefile::http::HttpOptions::default();
    options.limits.max_query_complexity = 100_000_000;
    let app = TestApp::start_with(options).await;
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
        .flat_map(|e| {
            nodes(&e["llmInteractionsConnection"])
                .as_array()
                .unwrap()
                .clone()
        })
        .map(|l| nodes(&l["wholeConversation"]).as_array().unwrap().len())
        .sum();
    assert_eq!(conversations, 20 * 7 * 4);
    // The message pages count what the lists hold, and hold their first or last messages.
    for stage in sessions[0]["node"]["stages"].as_array().unwrap() {
        let executions = stage["executions"].as_array().unwrap();
        let listed: usize = executions
            .iter()
            .map(|e| nodes(&e["allMessages"]).as_array().unwrap().len())
            .sum();
        let page = &stage["messagesConnection"];
        assert_eq!(page["totalCount"], listed as i64, "{stage}");
        assert_eq!(page["edges"].as_array().unwrap().len(), listed.min(5));
        for execution in executions {
            let messages = nodes(&execution["allMessages"]);
            let messages = messages.as_array().unwrap();
            let page = &execution["messagesConnection"];
            assert_eq!(page["totalCount"], messages.len() as i64);
            let last: Vec<&Value> = page["edges"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| &e["node"]["content"])
                .collect();
            let expected: Vec<&Value> = messages
                .iter()
                .skip(messages.len().saturating_sub(2))
                .map(|m| &m["content"])
                .collect();
            assert_eq!(last, expected);
        }
    }
    assert_eq!(
        sessions[0]["node"]["timeline"]["edges"]
            .as_array()
            .unwrap()
            .len(),
        14
    );
    let chat = &nodes(&sessions[0]["node"]["chatsConnection"])[0];
    assert_eq!(
        nodes(&chat["questionsConnection"])[0]["stage"]["name"],
        "Chat"
    );
    assert_eq!(chat["questionCount"], 1);
    assert_eq!(chat["questionsConnection"]["totalCount"], 1);

    // Each agent's assistant message requested a call that was answered, executed and shown.
    let execution = &sessions[0]["node"]["stages"][0]["executions"][0];
    let messages = nodes(&execution["allMessages"]);
    assert_eq!(
        messages[2]["requestedToolCalls"][0],
        json!({ "callId": "call_4", "resultMessage": { "role": "TOOL" },
                "mcpInteraction": { "toolName": "kubectl_get_pods" },
                "requestEvent": null, "executionEvent": { "content": "kubectl get pods" } })
    );
    assert_eq!(messages[3]["answers"], json!({ "callId": "call_4" }));
    assert_eq!(
        nodes(&execution["mcpInteractionsConnection"])[0],
        json!({ "toolName": "kubectl_get_pods", "toolCall": { "callId": "call_4" },
                "requestedBy": { "role": "ASSISTANT" } })
    );

    println!("deep query over 20 sessions: {twenty} SQL statements");
    assert_eq!(twenty, EXPECTED_STATEMENTS);
    // It asks for no payload, so none is read: they are tens of KB per interaction.
    let heavy = [
        "llm_request",
        "llm_response",
        "thinking_content",
        "response_metadata",
        "tool_arguments",
        "tool_result",
        "available_tools",
    ];
    let reading_payloads = |statements: &[String]| {
        statements
            .iter()
            .filter(|s| heavy.iter().any(|c| s.contains(c)))
            .count()
    };
    assert_eq!(
        reading_payloads(&statements::recorded()),
        0,
        "{:#?}",
        statements::recorded()
    );
    // Asked for, payloads are read by the statement of the page they are on (no statement
    // after it): the LLM request (the prompt, the largest) only where it is selected, so a page
    // showing responses never reads it. (Through the resolvers: a fragment sends them there.)
    statements::clear();
    let debug = app
        .data(
            "{ sessions(first: 20) { edges { node { ... on Session {
               llmInteractionsConnection(first: 100) { edges { node { llmRequest thinkingContent } } }
               mcpInteractionsConnection(first: 100) { edges { node { toolResult } } } } } } } }",
            json!({}),
        )
        .await;
    let requests =
        nodes(&debug["sessions"]["edges"][0]["node"]["llmInteractionsConnection"])[0]["llmRequest"]
            .clone();
    assert!(requests.is_object(), "{debug}");
    let read = statements::recorded_by_operations();
    assert_eq!(reading_payloads(&read), 2, "{read:#?}");
    // The page of sessions, then one wave: the LLM and MCP pages.
    assert_eq!(read.len(), 3, "{read:#?}");
    assert_eq!(statements::round_trips(), [1]);
    let responses = "llmInteractionsConnection(first: 100) { edges { node { llmResponse responseMetadata } } }
           mcpInteractionsConnection(first: 100) { edges { node { toolArguments availableTools } } }";
    statements::clear();
    app.data(
        &format!("{{ sessions(first: 20) {{ edges {{ node {{ ... on Session {{ {responses} }} }} }} }} }}"),
        json!({}),
    )
    .await;
    let read = statements::recorded_by_operations();
    assert!(read.iter().all(|s| !s.contains("llm_request")), "{read:#?}");
    assert_eq!(reading_payloads(&read), 2, "{read:#?}");
    assert_eq!(statements::round_trips(), [1]);
    // Answered in one statement of the sessions' trees (`api::compiled`), likewise: the page of
    // sessions, then the trees with the payloads selected and no other.
    statements::clear();
    app.data(
        &format!("{{ sessions(first: 20) {{ edges {{ node {{ {responses} }} }} }} }}"),
        json!({}),
    )
    .await;
    let read = statements::recorded_by_operations();
    assert!(read.iter().all(|s| !s.contains("llm_request")), "{read:#?}");
    assert_eq!(reading_payloads(&read), 1, "{read:#?}");
    assert_eq!(read.len(), 2, "{read:#?}");
    assert_eq!(statements::round_trips(), [2]);

    // A page counts its whole list only when the client selected `totalCount` (a count reads
    // every child of the parent, where the page reads a few); the answer is the same.
    let page_of_messages = |total: &str| {
        format!(
            "{{ sessions(first: 20) {{ edges {{ node {{ stages {{ executions {{
               messagesConnection(first: 2) {{ {total} edges {{ node {{ sequenceNumber }} }}
                 pageInfo {{ hasNextPage }} }} }} }} }} }} }} }}"
        )
    };
    let counting = |statements: &[String]| {
        statements
            .iter()
            .filter(|s| s.contains("FROM messages t") && s.contains("count(*)"))
            .count()
    };
    statements::clear();
    let uncounted = app.data(&page_of_messages(""), json!({})).await;
    let read = statements::recorded();
    assert_eq!(counting(&read), 0, "{read:#?}");
    statements::clear();
    let mut counted = app.data(&page_of_messages("totalCount"), json!({})).await;
    let read = statements::recorded();
    assert_eq!(counting(&read), 1, "{read:#?}");
    let first = &counted["sessions"]["edges"][0]["node"]["stages"][0]["executions"][0];
    assert_eq!(first["messagesConnection"]["totalCount"], 4, "{first}");
    assert_eq!(first["messagesConnection"]["pageInfo"]["hasNextPage"], true);
    for session in counted["sessions"]["edges"].as_array_mut().unwrap() {
        for stage in session["node"]["stages"].as_array_mut().unwrap() {
            for execution in stage["executions"].as_array_mut().unwrap() {
                let page = execution["messagesConnection"].as_object_mut().unwrap();
                page.remove("totalCount");
            }
        }
    }
    assert_eq!(counted, uncounted);

    // Fewer rows, same query shape: the same number of statements; and the same again, run
    // after run, with every core busy.
    let _busy = Busy::start();
    for run in 1..=5 {
        for sessions in [5, 20] {
            let (count, _) = statements_of(&app, sessions).await;
            println!(
                "run {run}, deep query over {sessions} sessions, cores busy: {count} SQL statements"
            );
            assert_eq!(count, EXPECTED_STATEMENTS, "run {run}, {sessions} sessions");
        }
    }
    app.stop().await;
}
