//! Tool calls joined to their results by call id (seed 002's ToolCall, seed 004's
//! `llm.tool_call`/`llm.tool_result`), and the audit of MCP interactions across sessions.

use serde_json::{Value, json};

use crate::common::TestApp;
use crate::write_api::Agent;

const APPEND: &str = "mutation ($e: ID!, $r: MessageRole!, $c: String!, $calls: JSON, $call: String) {
    appendMessage(input: { executionId: $e, role: $r, content: $c, toolCalls: $calls, toolCallId: $call }) { uuid } }";

const RECORD_MCP: &str = "mutation ($e: ID!, $k: MCPInteractionType!, $tool: String, $call: String, $err: String, $server: String!) {
    recordMCPInteraction(input: { executionId: $e, interactionType: $k, serverName: $server, toolName: $tool,
      toolCallId: $call, errorMessage: $err }) { uuid } }";

const EVENT: &str = "mutation ($e: ID!, $t: TimelineEventType!, $m: JSON!) {
    createTimelineEvent(input: { executionId: $e, eventType: $t, status: COMPLETED, content: \"x\", metadata: $m }) { uuid } }";

/// A running agent in a new session.
async fn running_agent(agent: &Agent<'_>) -> String {
    let session = agent.session().await;
    let stage = agent.stage(&session, 1, 1, None).await;
    let execution = agent.execution(&stage, 1, "KubernetesAgent").await;
    agent.start(&execution).await;
    execution
}

async fn append(
    app: &TestApp,
    execution: &str,
    role: &str,
    calls: Value,
    call: Option<&str>,
) -> Value {
    app.graphql(
        APPEND,
        json!({ "e": execution, "r": role, "c": "text", "calls": calls, "call": call }),
    )
    .await
}

async fn record_mcp(
    app: &TestApp,
    execution: &str,
    tool: &str,
    call: Option<&str>,
    error: Option<&str>,
) -> Value {
    app.graphql(
        RECORD_MCP,
        json!({ "e": execution, "k": "TOOL_CALL", "tool": tool, "call": call, "err": error, "server": "kubernetes" }),
    )
    .await
}

fn uuid_of(body: &Value, field: &str) -> String {
    body["data"][field]["uuid"]
        .as_str()
        .unwrap_or_else(|| panic!("{field} failed: {body:#}"))
        .to_owned()
}

fn refusal(body: &Value) -> (&str, &str) {
    let error = &body["errors"][0];
    assert!(error.is_object(), "expected an error: {body:#}");
    (
        error["extensions"]["code"].as_str().unwrap_or_default(),
        error["message"].as_str().unwrap_or_default(),
    )
}

async fn count(app: &TestApp, sql: &str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(app.store.pool())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_call_links_its_request_answer_execution_and_events_both_ways() {
    let app = TestApp::start().await;
    let agent = Agent { app: &app };
    let exec = running_agent(&agent).await;
    // OpenAI's form (arguments as a JSON string) and the flat form, in one message.
    let calls = json!([
        { "id": "call_a", "type": "function",
          "function": { "name": "kubernetes__get_pods", "arguments": "{\"namespace\":\"payments\"}" } },
        { "id": "toolu_b", "name": "get_logs", "input": { "pod": "api-1" } },
    ]);
    let asked = uuid_of(
        &append(&app, &exec, "ASSISTANT", calls, None).await,
        "appendMessage",
    );
    let shown = app
        .data(EVENT, json!({ "e": exec, "t": "LLM_TOOL_CALL", "m": { "tool_call_id": "call_a", "tool_name": "get_pods" } }))
        .await["createTimelineEvent"]["uuid"]
        .clone();
    let mcp = uuid_of(
        &record_mcp(&app, &exec, "get_pods", Some("call_a"), None).await,
        "recordMCPInteraction",
    );
    let ran = app
        .data(
            EVENT,
            json!({ "e": exec, "t": "MCP_TOOL_CALL", "m": { "tool_call_id": "call_a" } }),
        )
        .await["createTimelineEvent"]["uuid"]
        .clone();
    let answer = uuid_of(
        &append(&app, &exec, "TOOL", Value::Null, Some("call_a")).await,
        "appendMessage",
    );

    let call_fields =
        "callId toolName arguments position requestedBy { uuid } resultMessage { uuid }
        mcpInteraction { uuid } requestEvent { uuid } executionEvent { uuid }";
    let d = app
        .data(
            &format!(
                "query ($id: ID!) {{ session(id: $id) {{ stages {{ executions {{
                   messagesConnection {{ edges {{ node {{ uuid role requestedToolCalls {{ {call_fields} }}
                     answers {{ callId requestedBy {{ uuid }} }} }} }} }}
                   mcpInteractionsConnection {{ edges {{ node {{ uuid toolCallId toolCall {{ callId position }} requestedBy {{ uuid }} }} }} }}
                   timeline {{ edges {{ node {{ uuid eventType toolCall {{ callId resultMessage {{ uuid }} }} }} }} }}
                 }} }} }} }}"
            ),
            json!({ "id": session_of(&app, &exec).await }),
        )
        .await;
    let execution = &d["session"]["stages"][0]["executions"][0];
    let messages = &execution["messagesConnection"]["edges"];
    let request = &messages[0]["node"];
    assert_eq!(request["uuid"], asked.as_str());
    assert_eq!(
        request["requestedToolCalls"][0],
        json!({
            "callId": "call_a", "toolName": "kubernetes__get_pods",
            "arguments": { "namespace": "payments" }, "position": 0,
            "requestedBy": { "uuid": asked }, "resultMessage": { "uuid": answer },
            "mcpInteraction": { "uuid": mcp }, "requestEvent": { "uuid": shown },
            "executionEvent": { "uuid": ran },
        })
    );
    // The second call is requested, but nothing answered, executed or showed it yet.
    assert_eq!(
        request["requestedToolCalls"][1],
        json!({
            "callId": "toolu_b", "toolName": "get_logs", "arguments": { "pod": "api-1" },
            "position": 1, "requestedBy": { "uuid": asked }, "resultMessage": null,
            "mcpInteraction": null, "requestEvent": null, "executionEvent": null,
        })
    );
    assert_eq!(request["answers"], Value::Null);
    let tool_message = &messages[1]["node"];
    assert_eq!(tool_message["requestedToolCalls"], json!([]));
    assert_eq!(
        tool_message["answers"],
        json!({ "callId": "call_a", "requestedBy": { "uuid": asked } })
    );
    assert_eq!(
        execution["mcpInteractionsConnection"]["edges"][0]["node"],
        json!({ "uuid": mcp, "toolCallId": "call_a", "toolCall": { "callId": "call_a", "position": 0 },
                "requestedBy": { "uuid": asked } })
    );
    let events: Vec<&Value> = execution["timeline"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["node"]["toolCall"])
        .collect();
    let expected = json!({ "callId": "call_a", "resultMessage": { "uuid": answer } });
    assert_eq!(events, [&expected, &expected]);
    app.stop().await;
}

async fn session_of(app: &TestApp, execution: &str) -> String {
    let id: uuid::Uuid =
        sqlx::query_scalar("SELECT session_id FROM agent_executions WHERE id = $1::uuid")
            .bind(execution)
            .fetch_one(app.store.pool())
            .await
            .unwrap();
    id.to_string()
}

#[tokio::test]
async fn dangling_repeated_and_malformed_calls_are_refused_without_writing() {
    let app = TestApp::start().await;
    let agent = Agent { app: &app };
    let exec = running_agent(&agent).await;
    let other = running_agent(&agent).await;
    let calls = json!([{ "id": "call_1", "name": "get_pods", "arguments": {} }]);
    uuid_of(
        &append(&app, &exec, "ASSISTANT", calls.clone(), None).await,
        "appendMessage",
    );
    let (messages, mcp) = (
        "SELECT count(*) FROM messages",
        "SELECT count(*) FROM mcp_interactions",
    );
    let before = (count(&app, messages).await, count(&app, mcp).await);

    for (body, expected) in [
        (
            record_mcp(&app, &exec, "get_pods", Some("call_404"), None).await,
            "requested tool call `call_404`",
        ),
        // A call id belongs to its own agent's conversation.
        (
            record_mcp(&app, &other, "get_pods", Some("call_1"), None).await,
            "requested tool call `call_1`",
        ),
        (
            app.graphql(
                RECORD_MCP,
                json!({ "e": exec, "k": "TOOL_LIST", "call": "call_1", "server": "kubernetes" }),
            )
            .await,
            "only a `TOOL_CALL` interaction executes a `toolCallId`",
        ),
        (
            append(&app, &exec, "TOOL", Value::Null, Some("call_404")).await,
            "requested tool call `call_404`",
        ),
        (
            append(&app, &exec, "ASSISTANT", calls.clone(), None).await,
            "`call_1` was already requested, by message 1",
        ),
        (
            append(&app, &exec, "ASSISTANT", json!({ "id": "x" }), None).await,
            "must be a list of tool calls",
        ),
        (
            append(
                &app,
                &exec,
                "ASSISTANT",
                json!([{ "name": "get_pods" }]),
                None,
            )
            .await,
            "`toolCalls[0]` is not a tool call",
        ),
        (
            append(
                &app,
                &exec,
                "ASSISTANT",
                json!([{ "id": "c", "name": "a" }, { "id": "c", "name": "b" }]),
                None,
            )
            .await,
            "requests `c` twice",
        ),
        (
            append(
                &app,
                &exec,
                "ASSISTANT",
                json!([{ "id": "x".repeat(201), "name": "a" }]),
                None,
            )
            .await,
            "`toolCalls[0].id` is 201 characters long",
        ),
    ] {
        let (code, message) = refusal(&body);
        assert_eq!(code, "BAD_USER_INPUT", "{body:#}");
        assert!(
            message.contains(expected),
            "{message:?} should say {expected:?}"
        );
    }
    assert_eq!(
        (count(&app, messages).await, count(&app, mcp).await),
        before
    );

    // Each call is answered once (and executed as often as it is retried: see below).
    uuid_of(
        &append(&app, &exec, "TOOL", Value::Null, Some("call_1")).await,
        "appendMessage",
    );
    let body = append(&app, &exec, "TOOL", Value::Null, Some("call_1")).await;
    let (code, message) = refusal(&body);
    assert_eq!(code, "BAD_USER_INPUT");
    assert!(
        message.contains("`call_1` is already answered, by message 2"),
        "{message}"
    );
    assert_eq!(count(&app, "SELECT count(*) FROM tool_calls").await, 1);
    app.stop().await;
}

const RECORD_ATTEMPT: &str =
    "mutation ($id: ID, $e: ID!, $call: String, $result: JSON, $err: String) {
    recordMCPInteraction(input: { id: $id, executionId: $e, interactionType: TOOL_CALL,
      serverName: \"kubernetes\", toolName: \"get_pods\", toolCallId: $call, toolResult: $result,
      errorMessage: $err }) { uuid attempt } }";

const INGEST_ATTEMPT: &str = "mutation ($e: ID!, $call: String!) {
    ingest(operations: [{ recordMCPInteraction: { executionId: $e, interactionType: TOOL_CALL,
      serverName: \"kubernetes\", toolName: \"get_pods\", toolCallId: $call,
      errorMessage: \"connection reset\" } }]) { ... on MCPInteraction { uuid attempt } } }";

/// A call retried after failures (seed 003's `retry_count`): each attempt is an MCP interaction
/// of its own, numbered in the order recorded, with its own result; the call's
/// `mcpInteraction` is the last, `attempts` all of them; a resent recording adds none.
#[tokio::test]
async fn a_retried_call_records_each_attempt_with_its_own_result() {
    let app = TestApp::start().await;
    let agent = Agent { app: &app };
    let exec = running_agent(&agent).await;
    let calls = json!([
        { "id": "call_r", "name": "get_pods", "arguments": {} },
        { "id": "call_s", "name": "get_logs", "arguments": {} },
    ]);
    uuid_of(
        &append(&app, &exec, "ASSISTANT", calls, None).await,
        "appendMessage",
    );
    let record = |id: Option<&str>, call: Option<&str>, result: Value, error: Option<&str>| {
        app.data(
            RECORD_ATTEMPT,
            json!({ "id": id, "e": exec, "call": call, "result": result, "err": error }),
        )
    };
    let first_id = uuid::Uuid::now_v7().to_string();
    let first = record(Some(&first_id), Some("call_r"), json!({}), Some("timeout")).await;
    let first = &first["recordMCPInteraction"];
    assert_eq!(first["attempt"], 1);
    let second = app
        .data(INGEST_ATTEMPT, json!({ "e": exec, "call": "call_r" }))
        .await;
    let second = &second["ingest"][0];
    assert_eq!(second["attempt"], 2);
    let third = record(None, Some("call_r"), json!({ "pods": 3 }), None).await;
    let third = &third["recordMCPInteraction"];
    assert_eq!(third["attempt"], 3);
    // The first recording resent (the same id and request): its attempt, and nothing added.
    let resent = record(Some(&first_id), Some("call_r"), json!({}), Some("timeout")).await;
    assert_eq!(&resent["recordMCPInteraction"], first);
    // Another call's first execution is its attempt 1, as is an interaction that executes no
    // requested call.
    let other = record(None, Some("call_s"), json!({}), None).await;
    assert_eq!(other["recordMCPInteraction"]["attempt"], 1);
    let unlinked = record(None, None, json!({}), None).await;
    assert_eq!(unlinked["recordMCPInteraction"]["attempt"], 1);
    assert_eq!(
        count(&app, "SELECT count(*) FROM mcp_interactions").await,
        5
    );

    let _recording = crate::common::statements::record_on_this_thread();
    crate::common::statements::clear();
    let d = app
        .data(
            "query ($id: ID!) { session(id: $id) { stages { executions {
               messagesConnection { edges { node { requestedToolCalls { callId
                 mcpInteraction { uuid attempt }
                 attempts { uuid attempt errorMessage toolResult toolCall { callId } } } } } }
             } } } }",
            json!({ "id": session_of(&app, &exec).await }),
        )
        .await;
    let by_call: Vec<String> = crate::common::statements::recorded()
        .into_iter()
        .filter(|s| s.contains("JOIN mcp_interactions i"))
        .collect();
    assert_eq!(
        by_call.len(),
        1,
        "one statement for both calls: {by_call:?}"
    );
    let calls = &d["session"]["stages"][0]["executions"][0]["messagesConnection"]["edges"][0]["node"]
        ["requestedToolCalls"];
    let attempt = |row: &Value, n: i32, error: Option<&str>, result: Value| {
        json!({ "uuid": row["uuid"], "attempt": n, "errorMessage": error, "toolResult": result,
                "toolCall": { "callId": "call_r" } })
    };
    assert_eq!(
        calls[0]["attempts"],
        json!([
            attempt(first, 1, Some("timeout"), json!({})),
            attempt(second, 2, Some("connection reset"), json!({})),
            attempt(third, 3, None, json!({ "pods": 3 })),
        ])
    );
    assert_eq!(
        calls[0]["mcpInteraction"],
        json!({ "uuid": third["uuid"], "attempt": 3 })
    );
    assert_eq!(calls[1]["attempts"].as_array().map(Vec::len), Some(1));
    assert_eq!(calls[1]["mcpInteraction"]["attempt"], 1);
    app.stop().await;
}

/// Retries recorded at once each take a number of their own: the session's lock orders them.
#[tokio::test]
async fn attempts_recorded_at_once_are_numbered_apart() {
    let app = TestApp::start().await;
    let agent = Agent { app: &app };
    let exec = running_agent(&agent).await;
    let calls = json!([{ "id": "call_c", "name": "get_pods", "arguments": {} }]);
    uuid_of(
        &append(&app, &exec, "ASSISTANT", calls, None).await,
        "appendMessage",
    );
    let recorded = futures::future::join_all((0..8).map(|n| {
        let error = format!("attempt failed ({n})");
        let vars = json!({ "e": exec, "call": "call_c", "result": {}, "err": error });
        app.data(RECORD_ATTEMPT, vars)
    }))
    .await;
    let mut attempts: Vec<i64> = recorded
        .iter()
        .map(|d| d["recordMCPInteraction"]["attempt"].as_i64().unwrap())
        .collect();
    attempts.sort_unstable();
    assert_eq!(attempts, (1..=8).collect::<Vec<i64>>());
    app.stop().await;
}

const SEARCH: &str =
    "query ($f: MCPInteractionFilter, $first: Int, $after: String, $last: Int, $before: String) {
    mcpInteractions(filter: $f, first: $first, after: $after, last: $last, before: $before) {
      totalCount pageInfo { hasPreviousPage hasNextPage startCursor endCursor }
      edges { cursor node { toolName errorMessage createdAt session { uuid } } } } }";

/// The tool names of a page, and its page info.
fn tools(d: &Value) -> (Vec<&str>, &Value) {
    let page = &d["mcpInteractions"];
    let names = page["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["node"]["toolName"].as_str().unwrap())
        .collect();
    (names, &page["pageInfo"])
}

#[tokio::test]
async fn failed_tool_calls_are_listed_across_sessions_newest_first() {
    let app = TestApp::start().await;
    let agent = Agent { app: &app };
    let (first, second) = (running_agent(&agent).await, running_agent(&agent).await);
    for (exec, server, tool, error) in [
        (&first, "kubernetes", "get_pods", None),
        (&first, "kubernetes", "get_pods", Some("timeout")),
        (&second, "prometheus", "query", Some("bad query")),
        (&second, "kubernetes", "get_logs", Some("forbidden")),
        (&first, "prometheus", "query", None),
    ] {
        let body = app
            .graphql(
                RECORD_MCP,
                json!({ "e": exec, "k": "TOOL_CALL", "tool": tool, "err": error, "server": server }),
            )
            .await;
        uuid_of(&body, "recordMCPInteraction");
    }
    let search = |filter: Value, page: Value| {
        let mut variables = json!({ "f": filter });
        variables
            .as_object_mut()
            .unwrap()
            .extend(page.as_object().unwrap().clone());
        app.data(SEARCH, variables)
    };

    let failed = search(json!({ "success": false }), json!({})).await;
    assert_eq!(tools(&failed).0, ["get_logs", "query", "get_pods"]);
    assert_eq!(failed["mcpInteractions"]["totalCount"], 3);
    let sessions: Vec<&Value> = failed["mcpInteractions"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["node"]["session"]["uuid"])
        .collect();
    assert_ne!(sessions[0], sessions[2], "across sessions");
    let all = search(json!(null), json!({})).await;
    assert_eq!(
        tools(&all).0,
        ["query", "get_logs", "query", "get_pods", "get_pods"]
    );
    let k8s = search(
        json!({ "serverName": "kubernetes", "success": false }),
        json!({}),
    )
    .await;
    assert_eq!(tools(&k8s).0, ["get_logs", "get_pods"]);
    let query_ok = search(json!({ "toolName": "query", "success": true }), json!({})).await;
    assert_eq!(tools(&query_ok).0, ["query"]);
    assert_eq!(
        query_ok["mcpInteractions"]["edges"][0]["node"]["errorMessage"],
        Value::Null
    );
    // A time window: strictly before the newest failure.
    let newest = failed["mcpInteractions"]["edges"][0]["node"]["createdAt"].clone();
    let older = search(
        json!({ "success": false, "createdBefore": newest }),
        json!({}),
    )
    .await;
    assert_eq!(tools(&older).0, ["query", "get_pods"]);
    assert_eq!(older["mcpInteractions"]["totalCount"], 2);

    // Forward, then back from the end.
    let one = search(json!({ "success": false }), json!({ "first": 2 })).await;
    let (names, info) = tools(&one);
    assert_eq!(names, ["get_logs", "query"]);
    assert_eq!(
        (
            info["hasPreviousPage"].as_bool(),
            info["hasNextPage"].as_bool()
        ),
        (Some(false), Some(true))
    );
    let two = search(
        json!({ "success": false }),
        json!({ "first": 2, "after": info["endCursor"] }),
    )
    .await;
    let (names, info) = tools(&two);
    assert_eq!(names, ["get_pods"]);
    assert_eq!(
        (
            info["hasPreviousPage"].as_bool(),
            info["hasNextPage"].as_bool()
        ),
        (Some(true), Some(false))
    );
    let back = search(
        json!({ "success": false }),
        json!({ "last": 2, "before": info["startCursor"] }),
    )
    .await;
    let (names, info) = tools(&back);
    assert_eq!(names, ["get_logs", "query"]);
    assert_eq!(
        (
            info["hasPreviousPage"].as_bool(),
            info["hasNextPage"].as_bool()
        ),
        (Some(false), Some(true))
    );

    for (filter, expected) in [
        (
            json!({ "createdAfter": newest, "createdBefore": newest }),
            "`createdAfter` must be earlier",
        ),
        (
            json!({ "serverName": "x".repeat(201) }),
            "`serverName` is 201 characters long",
        ),
    ] {
        let (code, message) = app.error(SEARCH, json!({ "f": filter })).await;
        assert_eq!(code, "BAD_USER_INPUT");
        assert!(message.contains(expected), "{message}");
    }
    let (code, _) = app.error(SEARCH, json!({ "after": "nonsense" })).await;
    assert_eq!(code, "BAD_USER_INPUT");
    app.stop().await;
}

/// At volume (40,000 interactions, one in 50 failed, over 4 servers and 20 tools, in 4,000
/// sessions of which one in 10 is deleted), every combination of filters reads an index made
/// for it, never the whole table, and leaves deleted sessions' interactions out by probing
/// each listed interaction's session by key. (Where the planner expects few matches, as for
/// one tool's failures on one server, it may read them all and sort them; otherwise it reads
/// the index in list order and stops after the page.)
#[tokio::test]
async fn the_audit_reads_an_index_for_every_filter_at_volume() {
    use casefile::store::mcp_search::McpSearchFilter;
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
        "INSERT INTO stages (id, session_id, stage_name, stage_index, expected_agent_count) \
         SELECT gen_random_uuid(), id, 'investigate', 0, 1 FROM sessions",
        "INSERT INTO agent_executions (id, stage_id, session_id, agent_name, agent_index, \
             iteration_strategy, agent_type, depth) \
         SELECT gen_random_uuid(), id, session_id, 'KubernetesAgent', 1, 'react', \
             'global_supervisor', 0 FROM stages",
        "INSERT INTO mcp_interactions (id, session_id, stage_id, execution_id, interaction_type, \
             server_name, tool_name, error_message, created_at) \
         SELECT gen_random_uuid(), e.session_id, e.stage_id, e.id, 'tool_call', \
                'server' || (n % 4), 'tool' || (n % 20), \
                CASE WHEN n % 50 = 7 THEN 'failed' END, \
                now() - make_interval(secs => n) \
         FROM (SELECT *, row_number() OVER () - 1 AS k FROM agent_executions) e \
         JOIN generate_series(1, 40000) n ON e.k = n % 4000",
        "RESET session_replication_role",
        "ANALYZE sessions, mcp_interactions",
    ] {
        sqlx::query(statement).execute(&mut *conn).await.unwrap();
    }
    drop(conn);

    let server = Some("server1".to_owned());
    let tool = Some("tool7".to_owned());
    let hour_ago = Some(chrono::Utc::now() - chrono::TimeDelta::hours(1));
    let filters = [
        (McpSearchFilter::default(), "mcp_interactions_time_idx"),
        (
            McpSearchFilter {
                success: Some(false),
                ..Default::default()
            },
            "mcp_interactions_failed_time_idx",
        ),
        (
            McpSearchFilter {
                server_name: server.clone(),
                ..Default::default()
            },
            "mcp_interactions_server_time_idx",
        ),
        (
            McpSearchFilter {
                server_name: server.clone(),
                success: Some(false),
                ..Default::default()
            },
            "mcp_interactions_failed_server_time_idx",
        ),
        (
            McpSearchFilter {
                tool_name: tool.clone(),
                ..Default::default()
            },
            "mcp_interactions_tool_time_idx",
        ),
        (
            McpSearchFilter {
                tool_name: tool.clone(),
                success: Some(false),
                ..Default::default()
            },
            "mcp_interactions_failed_tool_time_idx",
        ),
        (
            McpSearchFilter {
                server_name: server,
                tool_name: tool,
                success: Some(false),
                ..Default::default()
            },
            "mcp_interactions_failed_",
        ),
        (
            McpSearchFilter {
                success: Some(false),
                created_before: hour_ago,
                ..Default::default()
            },
            "mcp_interactions_failed_time_idx",
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
            .explain_mcp_search(&filter, &first_page)
            .await
            .unwrap();
        println!("{filter:?}, first 20:\n{plan}\n");
        assert!(
            plan.contains(index),
            "{filter:?} does not read {index}:\n{plan}"
        );
        assert!(!plan.contains("Seq Scan"), "{plan}");
        // Each listed interaction's session by key, or (for a few) the deleted sessions by
        // their partial index.
        assert!(
            plan.contains("sessions_pkey") || plan.contains("sessions_deleted_at_idx"),
            "{plan}"
        );
    }
    // The deleted sessions' interactions are left out, and listed when asked for.
    let everything = McpSearchFilter {
        include_deleted: true,
        ..Default::default()
    };
    let all = app.store.count_mcp_interactions(&everything).await.unwrap();
    let live = app
        .store
        .count_mcp_interactions(&McpSearchFilter::default())
        .await
        .unwrap();
    assert_eq!((all, live), (40_000, 36_000));
    let plan = app
        .store
        .explain_mcp_search(&everything, &first_page)
        .await
        .unwrap();
    assert!(!plan.contains("sessions"), "{plan}");
    app.stop().await;
}
