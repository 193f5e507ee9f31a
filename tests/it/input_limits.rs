//! Client mistakes are client errors: a value the database would refuse is refused first with
//! BAD_USER_INPUT naming the field, and nothing is written; what gets past the checks anyway is
//! put into words at the edge; forged cursors with extreme numbers neither overflow nor panic.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use casefile::api::ids::{NodeType, encode};
use casefile::error::refusals;

use crate::common::TestApp;
use crate::common::sse::SseSubscription;
use crate::write_api::Agent;

/// Every table a request can write to.
const TABLES: [&str; 14] = [
    "sessions",
    "session_status_changes",
    "session_feed",
    "stages",
    "agent_executions",
    "messages",
    "llm_interactions",
    "mcp_interactions",
    "timeline_events",
    "timeline_event_chunks",
    "chats",
    "chat_user_messages",
    "create_receipts",
    "api_tokens",
];

/// How many rows each table holds.
async fn rows(app: &TestApp) -> Vec<(&'static str, i64)> {
    let mut counts = Vec::new();
    for table in TABLES {
        let n: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
            .fetch_one(app.store.pool())
            .await
            .unwrap();
        counts.push((table, n));
    }
    counts
}

/// Sends a request that must fail with `code` and a message containing `needle`, and checks
/// that it wrote nothing.
async fn refused(
    app: &TestApp,
    label: &str,
    query: &str,
    variables: Value,
    code: &str,
    needle: &str,
) {
    let before = rows(app).await;
    let (got, message) = app.error(query, variables).await;
    assert_eq!(got, code, "{label}: {message}");
    assert!(message.contains(needle), "{label}: {message:.300}");
    assert_eq!(rows(app).await, before, "{label}: nothing is written");
}

fn long(n: usize) -> String {
    "x".repeat(n)
}

/// A running session (stage 0, one execution, a streaming event) and a finished one with a
/// chat.
struct Scene {
    session: String,
    stage: String,
    exec: String,
    event: String,
    chat: String,
}

async fn scene(a: &Agent<'_>) -> Scene {
    let session = a.session().await;
    let stage = a.stage(&session, 0, 1, None).await;
    let exec = a.execution(&stage, 1, "Agent").await;
    let (event, _) = a.event(&exec, "STREAMING").await;
    let done = finished_session(a).await;
    let chat = a
        .ok(
            "mutation ($s: ID!) { openChat(input: { sessionId: $s }) { uuid } }",
            json!({ "s": done }),
        )
        .await["openChat"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    Scene {
        session,
        stage,
        exec,
        event,
        chat,
    }
}

async fn finished_session(a: &Agent<'_>) -> String {
    let session = a.session().await;
    complete(a, &session).await;
    session
}

async fn complete(a: &Agent<'_>, session: &str) {
    a.ok(
        "mutation ($id: ID!) { startSession(id: $id) { status } }",
        json!({ "id": session }),
    )
    .await;
    a.ok(
        "mutation ($id: ID!) { completeSession(input: { id: $id }) { status } }",
        json!({ "id": session }),
    )
    .await;
}

const CREATE_SESSION: &str =
    "mutation ($v: CreateSessionInput!) { createSession(input: $v) { uuid } }";
const CREATE_STAGE: &str = "mutation ($v: CreateStageInput!) { createStage(input: $v) { uuid } }";
const CREATE_EXECUTION: &str = "mutation ($v: CreateAgentExecutionInput!) {
    createAgentExecution(input: $v) { uuid iterationStrategy } }";
const APPEND_MESSAGE: &str =
    "mutation ($v: AppendMessageInput!) { appendMessage(input: $v) { uuid } }";
const RECORD_LLM: &str =
    "mutation ($v: RecordLLMInteractionInput!) { recordLLMInteraction(input: $v) { uuid } }";
const RECORD_MCP: &str =
    "mutation ($v: RecordMCPInteractionInput!) { recordMCPInteraction(input: $v) { uuid } }";
const CREATE_EVENT: &str =
    "mutation ($v: CreateTimelineEventInput!) { createTimelineEvent(input: $v) { uuid } }";
const APPEND: &str =
    "mutation ($v: AppendTimelineContentInput!) { appendTimelineContent(input: $v) { end } }";
const OPEN_CHAT: &str = "mutation ($v: OpenChatInput!) { openChat(input: $v) { uuid } }";
const POST_CHAT: &str =
    "mutation ($v: PostChatMessageInput!) { postChatMessage(input: $v) { uuid } }";
const CREATE_TOKEN: &str =
    "mutation ($v: CreateApiTokenInput!) { createApiToken(input: $v) { secret } }";
const INGEST: &str =
    "mutation ($ops: [IngestOperation!]!) { ingest(operations: $ops) { __typename } }";

#[tokio::test]
async fn oversized_text_is_refused_naming_the_field_in_every_table() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let s = scene(&a).await;
    let cases: Vec<(&str, &str, Value, &str)> = vec![
        (
            "sessions.alert_type",
            CREATE_SESSION,
            json!({ "v": { "alertType": long(201), "chainId": "c" } }),
            "`alertType` is 201 characters long; at most 200",
        ),
        (
            "sessions.runbook_url",
            CREATE_SESSION,
            json!({ "v": { "alertType": "A", "chainId": "c", "runbookUrl": long(2_001) } }),
            "`runbookUrl` is 2001 characters long",
        ),
        (
            "session_status_changes.reason",
            CREATE_SESSION,
            json!({ "v": { "alertType": "A", "chainId": "c", "reason": long(2_001) } }),
            "`reason` is 2001 characters long",
        ),
        (
            "stages.stage_name",
            CREATE_STAGE,
            json!({ "v": { "sessionId": s.session, "stageIndex": 1, "name": long(201) } }),
            "`name` is 201 characters long",
        ),
        (
            "agent_executions.agent_name",
            CREATE_EXECUTION,
            json!({ "v": { "stageId": s.stage, "agentIndex": 2, "agentName": long(201), "iterationStrategy": "react" } }),
            "`agentName` is 201 characters long",
        ),
        (
            "messages.tool_call_id",
            APPEND_MESSAGE,
            json!({ "v": { "executionId": s.exec, "role": "TOOL", "content": "ok", "toolCallId": long(201) } }),
            "`toolCallId` is 201 characters long",
        ),
        (
            "messages.content",
            APPEND_MESSAGE,
            json!({ "v": { "executionId": s.exec, "role": "USER", "content": long(1_000_001) } }),
            "`content` is 1000001 characters long",
        ),
        (
            "llm_interactions.model_name",
            RECORD_LLM,
            json!({ "v": { "executionId": s.exec, "interactionType": "ITERATION", "modelName": long(201) } }),
            "`modelName` is 201 characters long",
        ),
        (
            "mcp_interactions.server_name",
            RECORD_MCP,
            json!({ "v": { "executionId": s.exec, "interactionType": "TOOL_LIST", "serverName": long(201) } }),
            "`serverName` is 201 characters long",
        ),
        (
            "timeline_events.content",
            CREATE_EVENT,
            json!({ "v": { "executionId": s.exec, "eventType": "LLM_RESPONSE", "content": long(1_000_001) } }),
            "`content` is 1000001 characters long",
        ),
        (
            "timeline_event_chunks.content",
            APPEND,
            json!({ "v": { "eventId": s.event, "offset": 0, "delta": long(65_537) } }),
            "`delta` is 65537 characters long",
        ),
        (
            "chats.created_by",
            OPEN_CHAT,
            json!({ "v": { "sessionId": finished_session(&a).await, "createdBy": long(201) } }),
            "`createdBy` is 201 characters long",
        ),
        (
            "chat_user_messages.content",
            POST_CHAT,
            json!({ "v": { "chatId": s.chat, "content": long(5_001) } }),
            "exceeds 5000 character limit",
        ),
        (
            "chat_user_messages.author",
            POST_CHAT,
            json!({ "v": { "chatId": s.chat, "content": "Why?", "author": long(201) } }),
            "`author` is 201 characters long",
        ),
        (
            "sessions.error_message",
            "mutation ($id: ID!, $e: String!) { failSession(input: { id: $id, errorMessage: $e }) { status } }",
            json!({ "id": s.session, "e": long(1_000_001) }),
            "`errorMessage` is 1000001 characters long",
        ),
        (
            "api_tokens.name",
            CREATE_TOKEN,
            json!({ "v": { "name": long(101), "role": "READER" } }),
            "must be 1–100 letters",
        ),
    ];
    for (label, query, variables, needle) in cases {
        refused(&app, label, query, variables, "BAD_USER_INPUT", needle).await;
    }
    // At the limits, everything is stored.
    a.ok(
        CREATE_SESSION,
        json!({ "v": { "alertType": long(200), "chainId": long(200), "reason": long(2_000) } }),
    )
    .await;
    a.ok(
        APPEND,
        json!({ "v": { "eventId": s.event, "offset": 0, "delta": long(65_536) } }),
    )
    .await;
    // An error message was held to 200 characters, not the 1,000,000 its description states.
    let failed = a
        .ok(
            "mutation ($id: ID!, $e: String!) { failSession(input: { id: $id, errorMessage: $e }) { errorMessage } }",
            json!({ "id": s.session, "e": long(5_000) }),
        )
        .await;
    assert_eq!(failed["failSession"]["errorMessage"], long(5_000));
    app.stop().await;
}

#[tokio::test]
async fn iteration_strategy_is_at_most_the_columns_100_characters() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let s = scene(&a).await;
    let stage = a.stage(&s.session, 1, 2, Some("ALL")).await;
    // 101–200 characters passed the API's old limit of 200 and broke the column's 100: a 500.
    for n in [101, 150, 200] {
        refused(
            &app,
            &format!("createAgentExecution, {n}"),
            CREATE_EXECUTION,
            json!({ "v": { "stageId": stage, "agentIndex": 2, "agentName": "B", "iterationStrategy": long(n) } }),
            "BAD_USER_INPUT",
            &format!("`iterationStrategy` is {n} characters long; at most 100 are allowed"),
        )
        .await;
    }
    refused(
        &app,
        "postChatMessage",
        POST_CHAT,
        json!({ "v": { "chatId": s.chat, "content": "Why?", "iterationStrategy": long(150) } }),
        "BAD_USER_INPUT",
        "`iterationStrategy` is 150 characters long",
    )
    .await;
    refused(
        &app,
        "ingest",
        INGEST,
        json!({ "ops": [{ "createAgentExecution": { "stageId": stage, "agentIndex": 2, "agentName": "B", "iterationStrategy": long(150) } }] }),
        "BAD_USER_INPUT",
        "operation 0 (createAgentExecution): `iterationStrategy` is 150",
    )
    .await;
    let d = a
        .ok(
            CREATE_EXECUTION,
            json!({ "v": { "stageId": stage, "agentIndex": 2, "agentName": "B", "iterationStrategy": long(100) } }),
        )
        .await;
    assert_eq!(d["createAgentExecution"]["iterationStrategy"], long(100));
    app.stop().await;
}

#[tokio::test]
async fn nul_characters_in_text_and_json_are_refused() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let s = scene(&a).await;
    let nul = "before\u{0}after";
    let cases: Vec<(&str, &str, Value, &str)> = vec![
        (
            "text: alertType",
            CREATE_SESSION,
            json!({ "v": { "alertType": nul, "chainId": "c" } }),
            "`alertType` contains a NUL character",
        ),
        (
            "text: reason",
            CREATE_SESSION,
            json!({ "v": { "alertType": "A", "chainId": "c", "reason": nul } }),
            "`reason` contains a NUL character",
        ),
        (
            "text: message content",
            APPEND_MESSAGE,
            json!({ "v": { "executionId": s.exec, "role": "USER", "content": nul } }),
            "`content` contains a NUL character",
        ),
        (
            "text: delta",
            APPEND,
            json!({ "v": { "eventId": s.event, "offset": 0, "delta": nul } }),
            "`delta` contains a NUL character",
        ),
        (
            "text: chat question",
            POST_CHAT,
            json!({ "v": { "chatId": s.chat, "content": nul } }),
            "`content` contains a NUL character",
        ),
        (
            "text: token name",
            CREATE_TOKEN,
            json!({ "v": { "name": "a\u{0}", "role": "READER" } }),
            "must be 1–100 letters",
        ),
        (
            "text: revoked token name",
            "mutation ($n: String!) { revokeApiToken(name: $n) { name } }",
            json!({ "n": "a\u{0}" }),
            "must be 1–100 letters",
        ),
        (
            "JSON: a string",
            CREATE_SESSION,
            json!({ "v": { "alertType": "A", "chainId": "c", "alertData": { "pod": nul } } }),
            "`alertData` contains a NUL character (\\u0000) in a string or key",
        ),
        (
            "JSON: a key",
            CREATE_SESSION,
            json!({ "v": { "alertType": "A", "chainId": "c", "alertData": { nul: 1 } } }),
            "`alertData` contains a NUL character",
        ),
        (
            "JSON: deep in an array",
            RECORD_LLM,
            json!({ "v": { "executionId": s.exec, "interactionType": "ITERATION", "modelName": "m",
                           "llmRequest": { "messages": [[{ "parts": ["ok", nul] }]] } } }),
            "`llmRequest` contains a NUL character",
        ),
        (
            "JSON: event metadata",
            CREATE_EVENT,
            json!({ "v": { "executionId": s.exec, "eventType": "LLM_RESPONSE", "metadata": { "tool": nul } } }),
            "`metadata` contains a NUL character",
        ),
        (
            "JSON: in a batch",
            INGEST,
            json!({ "ops": [{ "recordMCPInteraction": { "executionId": s.exec, "interactionType": "TOOL_CALL",
                                                         "serverName": "k8s", "toolName": "get", "toolResult": [nul] } }] }),
            "operation 0 (recordMCPInteraction): `toolResult` contains a NUL character",
        ),
        (
            "read: search",
            "query ($f: SessionFilterInput) { sessions(filter: $f) { totalCount } }",
            json!({ "f": { "search": nul } }),
            "`search` contains a NUL character",
        ),
        (
            "read: createdBy",
            "query ($f: SessionFilterInput) { sessions(filter: $f) { totalCount } }",
            json!({ "f": { "createdBy": nul } }),
            "`createdBy` contains a NUL character",
        ),
    ];
    for (label, query, variables, needle) in cases {
        refused(&app, label, query, variables, "BAD_USER_INPUT", needle).await;
    }
    // A backslash followed by "u0000" is just text.
    a.ok(
        CREATE_SESSION,
        json!({ "v": { "alertType": "A", "chainId": "c", "alertData": { "path": "C:\\u0000" } } }),
    )
    .await;
    app.stop().await;
}

#[tokio::test]
async fn filters_the_database_could_not_compare_are_refused() {
    let app = TestApp::start().await;
    let q =
        "query ($f: SessionFilterInput) { sessions(filter: $f) { totalCount edges { cursor } } }";
    for (filter, needle) in [
        (
            json!({ "createdAfter": "-200000-01-01T00:00:00Z" }),
            "`createdAfter` is -200000-01-01 00:00:00 UTC; the earliest date allowed is 4714-11-24 BC",
        ),
        (
            json!({ "createdBefore": "-4714-01-01T00:00:00Z" }),
            "`createdBefore` is",
        ),
        (
            json!({ "alertType": long(201) }),
            "`alertType` is 201 characters long",
        ),
        (
            json!({ "deletedBy": "a\u{0}" }),
            "`deletedBy` contains a NUL character",
        ),
    ] {
        refused(
            &app,
            &filter.to_string(),
            q,
            json!({ "f": filter }),
            "BAD_USER_INPUT",
            needle,
        )
        .await;
    }
    app.data(
        q,
        json!({ "f": { "createdAfter": "-4713-11-24T00:00:00Z" } }),
    )
    .await;
    app.stop().await;
}

#[tokio::test]
async fn numbers_past_what_the_database_can_hold_are_refused() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let s = scene(&a).await;

    // A stage at the largest index: its session's next chat stage would need one more.
    let session = a.session().await;
    a.stage(&session, i32::MAX, 1, None).await;
    complete(&a, &session).await;
    let chat = a
        .ok(OPEN_CHAT, json!({ "v": { "sessionId": session } }))
        .await["openChat"]["uuid"]
        .clone();
    refused(
        &app,
        "stage index overflow",
        POST_CHAT,
        json!({ "v": { "chatId": chat, "content": "Why?" } }),
        "CONFLICT",
        "has a stage at index 2147483647, the largest there is",
    )
    .await;

    let llm = |extra: Value| {
        let mut v =
            json!({ "executionId": s.exec, "interactionType": "ITERATION", "modelName": "m" });
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({ "v": v })
    };
    for (label, extra, needle) in [
        (
            "cost past the limit",
            json!({ "estimatedCostUsd": 1e10 }),
            "`estimatedCostUsd` must be between 0 and 1000000000",
        ),
        (
            "cost whose sum overflows",
            json!({ "estimatedCostUsd": 1.7e308 }),
            "`estimatedCostUsd`",
        ),
        (
            "negative duration",
            json!({ "durationMs": -1 }),
            "`durationMs` must be 0 or more",
        ),
        (
            "tokens past a 32-bit integer",
            json!({ "inputTokens": 2_147_483_648_i64 }),
            "`inputTokens` is 2147483648, outside the range -2147483648 to 2147483647",
        ),
    ] {
        refused(
            &app,
            label,
            RECORD_LLM,
            llm(extra),
            "BAD_USER_INPUT",
            needle,
        )
        .await;
    }
    refused(
        &app,
        "offset past a 32-bit integer",
        APPEND,
        json!({ "v": { "eventId": s.event, "offset": 2_147_483_648_i64, "delta": "x" } }),
        "BAD_USER_INPUT",
        "`offset` is 2147483648, outside the range",
    )
    .await;
    refused(
        &app,
        "stage index past a 32-bit integer",
        CREATE_STAGE,
        json!({ "v": { "sessionId": s.session, "stageIndex": 3_000_000_000_i64, "name": "Far" } }),
        "BAD_USER_INPUT",
        "`stageIndex` is 3000000000, outside the range",
    )
    .await;
    // The largest values allowed are stored, and their sums read back.
    for _ in 0..2 {
        a.ok(
            RECORD_LLM,
            llm(
                json!({ "estimatedCostUsd": 1e9, "inputTokens": i32::MAX, "outputTokens": i32::MAX,
                        "durationMs": i64::MAX }),
            ),
        )
        .await;
    }
    let usage = a
        .ok(
            "query ($id: ID!) { session(id: $id) { tokenUsage { inputTokens totalTokens estimatedCostUsd } } }",
            json!({ "id": s.session }),
        )
        .await;
    assert_eq!(
        usage["session"]["tokenUsage"],
        json!({ "inputTokens": 2 * i64::from(i32::MAX), "totalTokens": 2 * i64::from(i32::MAX),
                "estimatedCostUsd": 2e9 })
    );
    app.stop().await;
}

#[tokio::test]
async fn long_lists_never_become_one_parameter_each() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    a.session().await;
    // More than PostgreSQL's 65,535 parameters.
    let ids: Vec<String> = (0..70_000)
        .map(|_| encode(NodeType::Session, uuid::Uuid::now_v7()).0)
        .collect();
    refused(
        &app,
        "nodes",
        "query ($ids: [ID!]!) { nodes(ids: $ids) { id } }",
        json!({ "ids": ids }),
        "BAD_USER_INPUT",
        "at most 100 ids per request, got 70000",
    )
    .await;
    let statuses: Vec<&str> = ["PENDING", "COMPLETED"]
        .into_iter()
        .cycle()
        .take(70_000)
        .collect();
    let d = a
        .ok(
            "query ($s: [SessionStatus!]) { sessions(filter: { status: $s }) { totalCount edges { node { status } } } }",
            json!({ "s": statuses }),
        )
        .await;
    assert_eq!(d["sessions"]["totalCount"], 1);
    assert_eq!(d["sessions"]["edges"][0]["node"]["status"], "PENDING");

    // A long list under nested pages: the complexity estimate saturates instead of
    // overflowing (the query is refused for its depth and its cost, with a code).
    let nested = format!(
        "query ($ids: [ID!]!) {{ nodes(ids: $ids) {{ ... on Session {{ {}id{} }} }} }}",
        "timeline(first: 100) { edges { node { session { ".repeat(7),
        " } } } }".repeat(7)
    );
    let many: Vec<&str> = vec!["a"; 2_000_000];
    let body = app.graphql(&nested, json!({ "ids": many })).await;
    assert_eq!(
        body["errors"][0]["extensions"]["code"],
        "QUERY_TOO_DEEP",
        "{:.500}",
        body.to_string()
    );
    app.stop().await;
}

fn cursor(json: Value) -> String {
    URL_SAFE_NO_PAD.encode(json.to_string())
}

#[tokio::test]
async fn forged_cursors_with_extreme_numbers_are_refused_or_harmless() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let session = a.session().await;
    let stage = a.stage(&session, 0, 1, None).await;
    let exec = a.execution(&stage, 1, "Agent").await;
    let (event, _) = a.event(&exec, "STREAMING").await;
    a.append(&event, 0, "abc").await;
    let id = "0190a0b4-0000-7000-8000-000000000000";

    let list = "query ($after: String, $o: SessionOrder) { sessions(first: 5, after: $after, orderBy: $o) {
        edges { cursor } } }";
    let by = |field: &str| json!({ "field": field, "direction": "ASC" });
    let sessions_cursor = |value: Value| {
        cursor(json!({ "sessions": { "order": "DURATION", "value": value, "id": id } }))
    };
    // Out of a 64-bit integer's range, or values the database cannot compare: refused.
    for (label, after, order) in [
        (
            "u64::MAX",
            sessions_cursor(json!({ "i": u64::MAX })),
            by("DURATION"),
        ),
        (
            "a time before PostgreSQL's calendar",
            cursor(
                json!({ "sessions": { "order": "CREATED_AT", "value": { "t": "-200000-01-01T00:00:00Z" }, "id": id } }),
            ),
            by("CREATED_AT"),
        ),
        (
            "a NUL in a text",
            cursor(
                json!({ "sessions": { "order": "AUTHOR", "value": { "s": "a\u{0}" }, "id": id } }),
            ),
            by("AUTHOR"),
        ),
    ] {
        let (code, message) = app.error(list, json!({ "after": after, "o": order })).await;
        assert_eq!(code, "BAD_USER_INPUT", "{label}: {message}");
        assert!(
            message.contains("is not a valid cursor"),
            "{label}: {message}"
        );
    }
    // The extremes of a 64-bit integer are merely positions.
    for (value, rows) in [(i64::MAX, 0), (i64::MIN, 1)] {
        let d = a
            .ok(
                list,
                json!({ "after": sessions_cursor(json!({ "i": value })), "o": by("DURATION") }),
            )
            .await;
        assert_eq!(
            d["sessions"]["edges"].as_array().unwrap().len(),
            rows,
            "{value}"
        );
    }

    let timeline =
        "query ($id: ID!, $after: String) { session(id: $id) { timeline(first: 5, after: $after) {
        edges { cursor } pageInfo { hasNextPage } } } }";
    let (code, message) = app
        .error(
            timeline,
            json!({ "id": session, "after": cursor(json!({ "timeline": { "session": session, "seq": u64::MAX } })) }),
        )
        .await;
    assert_eq!(code, "BAD_USER_INPUT", "{message}");
    assert!(message.contains("is not a valid cursor"), "{message}");
    let d = a
        .ok(
            timeline,
            json!({ "id": session, "after": cursor(json!({ "timeline": { "session": session, "seq": i64::MAX } })) }),
        )
        .await;
    assert_eq!(
        d["session"]["timeline"],
        json!({ "edges": [], "pageInfo": { "hasNextPage": false } })
    );
    // As `before`, the extremes are positions too.
    let backward = "query ($before: String, $o: SessionOrder) {
        sessions(last: 5, before: $before, orderBy: $o) { edges { cursor } } }";
    for (value, rows) in [(i64::MAX, 1), (i64::MIN, 0)] {
        let d = a
            .ok(
                backward,
                json!({ "before": sessions_cursor(json!({ "i": value })), "o": by("DURATION") }),
            )
            .await;
        assert_eq!(
            d["sessions"]["edges"].as_array().unwrap().len(),
            rows,
            "{value}"
        );
    }
    let backward = "query ($id: ID!, $before: String) { session(id: $id) {
        timeline(last: 5, before: $before) { pageInfo { hasPreviousPage hasNextPage } } } }";
    for (seq, next) in [(i64::MAX, false), (0, true)] {
        let d = a
            .ok(
                backward,
                json!({ "id": session, "before": cursor(json!({ "timeline": { "session": session, "seq": seq } })) }),
            )
            .await;
        assert_eq!(
            d["session"]["timeline"]["pageInfo"],
            json!({ "hasPreviousPage": false, "hasNextPage": next }),
            "{seq}"
        );
    }

    // The subscription: out of range is refused; the largest watermark is followed without
    // overflowing (event 1, listed as still streaming, goes on streaming to it).
    let subscribe =
        "subscription ($s: ID!, $after: String) { timeline(sessionId: $s, after: $after) {
        kind sequenceNumber offset delta } }";
    let too_big = cursor(json!({ "live": { "session": session, "seen": u64::MAX } }));
    let mut sse = SseSubscription::start(
        app.addr,
        subscribe,
        json!({ "s": session, "after": too_big }),
    )
    .await;
    let error = sse.next().await.expect_err("refused");
    assert_eq!(
        error["errors"][0]["extensions"]["code"], "BAD_USER_INPUT",
        "{error}"
    );
    let live = cursor(
        json!({ "live": { "session": session, "seen": i64::MAX, "streaming": { "1": 0 } } }),
    );
    let page = cursor(
        json!({ "timeline": { "session": session, "seq": i64::MAX, "streaming": { "1": 1 } } }),
    );
    let mut from_live =
        SseSubscription::start(app.addr, subscribe, json!({ "s": session, "after": live })).await;
    let mut from_page =
        SseSubscription::start(app.addr, subscribe, json!({ "s": session, "after": page })).await;
    for (sub, offset, delta) in [(&mut from_live, 0, "abc"), (&mut from_page, 1, "bc")] {
        let update = sub.next().await.expect("the replay")["timeline"].clone();
        assert_eq!(
            update,
            json!({ "kind": "APPENDED", "sequenceNumber": 1, "offset": offset, "delta": delta })
        );
    }
    a.append(&event, 3, "def").await;
    for sub in [&mut from_live, &mut from_page] {
        let update = sub.next().await.expect("the live append")["timeline"].clone();
        assert_eq!(
            update,
            json!({ "kind": "APPENDED", "sequenceNumber": 1, "offset": 3, "delta": "def" })
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn a_taken_id_is_said_to_be_taken() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let s = scene(&a).await;
    refused(
        &app,
        "the answering stage's id",
        POST_CHAT,
        json!({ "v": { "chatId": s.chat, "content": "Why?", "stageId": s.stage } }),
        "CONFLICT",
        &format!("id {} is already used by another record", s.stage),
    )
    .await;
    app.stop().await;
}

/// A stage index taken by a writer outside casefile between casefile's check and its insert:
/// the unique violation reaches the edge, which says which rule it broke (and not that an id
/// was taken). It needs two connections at once, so an external database.
#[tokio::test]
async fn a_constraint_violation_reaches_the_safety_net_in_words() {
    safety_net_catches(
        CREATE_STAGE,
        |session| json!({ "v": { "sessionId": session, "stageIndex": 0, "name": "Mine" } }),
        "this stage index is already used in the session (`stageIndex` is unique in a session)",
    )
    .await;
}

#[tokio::test]
async fn in_a_batch_the_safety_net_names_the_operation() {
    safety_net_catches(
        "mutation ($ops: [IngestOperation!]!) { ingest(operations: $ops) { __typename } }",
        |session| {
            json!({ "ops": [
                { "createStage": { "sessionId": session, "stageIndex": 5, "name": "Fine" } },
                { "createStage": { "sessionId": session, "stageIndex": 0, "name": "Mine" } },
            ] })
        },
        "operation 1 (createStage): this stage index is already used in the session \
         (`stageIndex` is unique in a session)",
    )
    .await;
}

/// A stage index taken by a concurrent writer between casefile's check and its insert: only
/// the database's unique index sees it; `request` (given the session) must get `CONFLICT` with
/// `expected` and store nothing.
async fn safety_net_catches(query: &str, variables: fn(&str) -> Value, expected: &str) {
    let Some((app, _)) = TestApp::start_external("a concurrent writer").await else {
        return;
    };
    let a = Agent { app: &app };
    let session = a.session().await;
    let pool = app.store.pool();
    let mut intruder = pool.begin().await.unwrap();
    sqlx::query(
        "INSERT INTO stages (id, session_id, stage_name, stage_index, expected_agent_count) \
         VALUES ($1, $2, 'Intruder', 0, 1)",
    )
    .bind(uuid::Uuid::now_v7())
    .bind(session.parse::<uuid::Uuid>().unwrap())
    .execute(&mut *intruder)
    .await
    .unwrap();
    let before = rows(&app).await;
    let request = app.error(query, variables(&session));
    let commit = async {
        // Once casefile's insert waits for the intruder's row, the intruder commits.
        loop {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                 AND wait_event_type = 'Lock'",
            )
            .fetch_one(pool)
            .await
            .unwrap();
            if waiting > 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        intruder.commit().await.unwrap();
    };
    let ((code, message), ()) = tokio::join!(request, commit);
    assert_eq!(code, "CONFLICT", "{message}");
    assert_eq!(message, expected);
    let mut after = rows(&app).await;
    let stages = after.iter_mut().find(|(t, _)| *t == "stages").unwrap();
    stages.1 -= 1; // the intruder's
    assert_eq!(after, before, "casefile wrote nothing");
    app.stop().await;
}

#[tokio::test]
async fn every_constraint_of_the_schema_is_put_into_words() {
    let app = TestApp::start().await;
    let names: Vec<String> = sqlx::query_scalar(
        // A partition's copies are its table's (their names are put into words as those).
        "SELECT conname::text FROM pg_constraint \
         WHERE connamespace = 'public'::regnamespace AND contype IN ('c', 'u', 'f', 'p', 'x') \
           AND conparentid = 0 \
         UNION \
         SELECT i.indexrelid::regclass::text FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid \
         WHERE i.indisunique AND c.relnamespace = 'public'::regnamespace AND NOT c.relispartition \
           AND NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conindid = i.indexrelid)",
    )
    .fetch_all(app.store.pool())
    .await
    .unwrap();
    assert!(names.len() > 80, "{names:?}");
    let unknown: Vec<&String> = names
        .iter()
        .filter(|n| refusals::describe(n).is_none())
        .collect();
    assert!(unknown.is_empty(), "no words for {unknown:?}");
    app.stop().await;
}
