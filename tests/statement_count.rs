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
        executions {                                       # 23 executions of the sessions
          agentName
          parent { agentName }                             # (read ahead with 23)
          subAgents { agentName }                          # (read ahead with 23)
          tokenUsage { totalTokens }                       # 24 token usage by execution
          timeline(first: 10) { edges { node { content } } } # 25 timeline page by execution
          allMessages: messagesConnection(first: 100) {    # 26 message pages by execution,
            edges { node {
              role content
              requestedToolCalls {
                callId
                resultMessage { role }                     # 27 answers by call
                mcpInteraction { toolName }                # 28 MCP interactions by call
                requestEvent { content } executionEvent { content } # 29 timeline events by call
              }
              answers { callId }                           # 30 requests by call
            } }
          }
          messagesConnection(last: 2) {                    # from either end alike
            totalCount edges { node { content } }
          }
          mcpInteractionsConnection(first: 100) {          # 31 MCP pages by execution
            totalCount
            edges { node { toolName toolCall { callId } requestedBy { role } } } # (requests by call, batched with 30)
          }
          llmInteractionsConnection(first: 100) {          # 32 LLM pages by execution
            totalCount
            edges { node {
              inputTokens
              lastMessage { sequenceNumber }               # 33 messages by id
              wholeConversation: conversationConnection(first: 100) { # 34 conversation pages,
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
const EXPECTED_STATEMENTS: usize = 34;

async fn statements_of(app: &TestApp, sessions: i64) -> (usize, serde_json::Value) {
    // Warm up first (connections and prepared statements), then count one clean run.
    app.data(DEEP, json!({ "n": sessions })).await;
    statements::clear();
    let data = app.data(DEEP, json!({ "n": sessions })).await;
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
            .filter(|s| s.starts_with("SELECT") && heavy.iter().any(|c| s.contains(c)))
            .count()
    };
    assert_eq!(
        reading_payloads(&statements::recorded()),
        0,
        "{:#?}",
        statements::recorded()
    );
    // Asked for, each kind is read once for all the interactions of the level: the LLM request
    // (the prompt, the largest) apart from the rest, so a page showing responses never reads it.
    statements::clear();
    let debug = app
        .data(
            "{ sessions(first: 20) { edges { node {
               llmInteractionsConnection(first: 100) { edges { node { llmRequest thinkingContent } } }
               mcpInteractionsConnection(first: 100) { edges { node { toolResult } } } } } } }",
            json!({}),
        )
        .await;
    let requests =
        nodes(&debug["sessions"]["edges"][0]["node"]["llmInteractionsConnection"])[0]["llmRequest"]
            .clone();
    assert!(requests.is_object(), "{debug}");
    assert_eq!(
        reading_payloads(&statements::recorded()),
        3,
        "{:#?}",
        statements::recorded()
    );
    statements::clear();
    app.data(
        "{ sessions(first: 20) { edges { node {
           llmInteractionsConnection(first: 100) { edges { node { llmResponse } } } } } } }",
        json!({}),
    )
    .await;
    let read = statements::recorded();
    assert!(read.iter().all(|s| !s.contains("llm_request")), "{read:#?}");
    assert_eq!(reading_payloads(&read), 1, "{read:#?}");

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

    reads_ahead_below_sessions(&app).await;

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
    // Read ahead, with the cores busy: one round trip for a session page, run after run.
    let listed = app
        .data(
            "{ sessions(first: 6) { edges { node { uuid } } } }",
            json!({}),
        )
        .await;
    for run in 1..=5 {
        statements::clear();
        let id = &listed["sessions"]["edges"][run]["node"]["uuid"];
        app.data(SESSION_PAGE, json!({ "id": id })).await;
        assert_eq!(statements::round_trips(), [1], "run {run}");
    }
    app.stop().await;
}

/// What a session page (the reasoning tab) shows of each agent, with its own page of each
/// relationship, forward and backward.
macro_rules! agent_fragment {
    () => {
        "fragment Agent on AgentExecution {
          id agentName
          timeline(first: 100) { edges { cursor node { content } } pageInfo { hasNextPage } }
          latest: timeline(last: 2) { edges { cursor node { content } } pageInfo { hasPreviousPage } }
          messagesConnection(first: 3) { totalCount edges { cursor node { content } } pageInfo { hasNextPage } }
          llmInteractionsConnection(first: 100) { edges { cursor node { modelName } } }
          mcpInteractionsConnection(last: 1) { edges { cursor node { toolName } } pageInfo { hasPreviousPage } }
          skipped: messagesConnection(first: 1) @include(if: false) { edges { node { content } } }
        }"
    };
}

/// A session page: every agent of every stage.
const SESSION_PAGE: &str = concat!(
    "query Session($id: ID!) { session(id: $id) { uuid status stages { name executions { ...Agent } } } } ",
    agent_fragment!()
);

/// One agent, read on its own (nothing read ahead).
const AGENT: &str = concat!(
    "query Agent($id: ID!) { node(id: $id) { ...Agent } } ",
    agent_fragment!()
);

/// What the fields below a session will load is read across the session in the round trip
/// that loads the session (the session's own id is known from the start), and the answer is
/// the one each agent's pages give read on their own; below a page of sessions, in the round
/// trip after the page.
async fn reads_ahead_below_sessions(app: &TestApp) {
    let listed = app
        .data(
            "{ sessions(first: 3) { edges { node { uuid } } } }",
            json!({}),
        )
        .await;
    let id = listed["sessions"]["edges"][0]["node"]["uuid"].clone();
    app.data(SESSION_PAGE, json!({ "id": id })).await;
    statements::clear();
    let page = app.data(SESSION_PAGE, json!({ "id": id })).await;
    // The session, its stages, its executions, and four kinds of pages across the session
    // (the two timeline pages differ only in their slice: one statement); nothing for the
    // field `@include(if: false)` leaves out.
    let read = statements::recorded_by_operations();
    assert_eq!(read.len(), 7, "{read:#?}");
    assert_eq!(statements::round_trips(), [1]);
    let mut executions = 0;
    for stage in page["session"]["stages"].as_array().unwrap() {
        for execution in stage["executions"].as_array().unwrap() {
            executions += 1;
            let alone = app.data(AGENT, json!({ "id": execution["id"] })).await;
            assert_eq!(&alone["node"], execution);
        }
    }
    assert!(executions > 1, "{page}");

    statements::clear();
    let list = app
        .data(
            "{ sessions(first: 20) { edges { node { uuid stages { name executions { agentName
               subAgents { agentName } } } } } } }",
            json!({}),
        )
        .await;
    assert_eq!(list["sessions"]["edges"].as_array().unwrap().len(), 20);
    // The page of sessions (not a loader's), then their stages and executions at once.
    assert_eq!(statements::recorded_by_operations().len(), 3);
    assert_eq!(statements::round_trips(), [1]);
}
