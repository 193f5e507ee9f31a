//! Records are keyed by id within their session (docs/scale-out.md): every read from a row at
//! hand names the row's session, so a record of another session with the same id is never
//! read in its place; and a write looks the session of a record it names by id up once.

use chrono::Utc;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::common::fixtures::{self, At};
use crate::common::{TestApp, statements};
use crate::write_api::Agent;

/// Every relationship read from a row at hand, under one session.
const TREE: &str = r#"
query ($id: ID!) { session(id: $id) {
  tokenUsage { totalTokens }
  counts { stages executions timelineEvents messages }
  agents { uuid agentName parent { agentName } }
  llmInteractionsConnection(first: 20) { totalCount edges { node { uuid modelName } } }
  chatsConnection(first: 10) { edges { node {
    uuid createdBy status
    messages { content answering chat { createdBy } stage { name } answer { content } }
  } } }
  timeline(first: 20) { edges { node {
    uuid content stage { name } execution { agentName }
    llmInteraction { modelName llmRequest lastMessage { content } }
    mcpInteraction { toolName toolArguments }
    toolCall { callId requestedBy { content } resultMessage { content } }
  } } }
  stages {
    uuid name tokenUsage { totalTokens }
    chat { createdBy } chatUserMessage { content }
    timeline(first: 10) { edges { node { content } } }
    messagesConnection(first: 10) { totalCount edges { node { content } } }
    executions {
      uuid agentName parent { agentName } subAgents { agentName } stage { name }
      tokenUsage { totalTokens }
      timeline(first: 10) { edges { node { content } } }
      messagesConnection(first: 10) { edges { node {
        content execution { agentName }
        requestedToolCalls {
          callId resultMessage { content } mcpInteraction { toolName }
          requestEvent { content } executionEvent { content }
        }
        answers { callId requestedBy { content } }
      } } }
      llmInteractionsConnection(first: 10) { edges { node {
        modelName llmRequest llmResponse lastMessage { content }
        execution { agentName } stage { name }
        conversationConnection(first: 10) { totalCount edges { node { content } } }
      } } }
      mcpInteractionsConnection(first: 10) { edges { node {
        toolName toolArguments requestedBy { content } toolCall { callId }
        execution { agentName } stage { name }
      } } }
    }
  }
} }"#;

/// The fields [`twin`] marks: text and JSON of the records copied into another session.
const MARKED: [&str; 9] = [
    "name",
    "agentName",
    "content",
    "createdBy",
    "modelName",
    "toolName",
    "llmRequest",
    "llmResponse",
    "toolArguments",
];

/// Copies every record of session `from` into session `to` with the same ids (as a client
/// reusing ids could; the API would take them), each marked `TWIN` in the fields of [`MARKED`].
/// Written without the triggers: only the rows matter here.
async fn twin(app: &TestApp, from: Uuid, to: Uuid) {
    let mut conn = app.store.pool().acquire().await.unwrap();
    sqlx::query("SET session_replication_role = replica")
        .execute(&mut *conn)
        .await
        .unwrap();
    for (table, marks) in [
        ("chats", "created_by = 'TWIN'"),
        (
            "chat_user_messages",
            "content = 'TWIN', created_by = 'TWIN'",
        ),
        ("stages", "stage_name = 'TWIN'"),
        ("agent_executions", "agent_name = 'TWIN'"),
        ("messages", "content = 'TWIN'"),
        // Nothing of a call is shown but its id.
        ("tool_calls", "position = position"),
        (
            "llm_interactions",
            "model_name = 'TWIN', llm_request = '\"TWIN\"', llm_response = '\"TWIN\"'",
        ),
        (
            "mcp_interactions",
            "tool_name = 'TWIN', tool_arguments = '\"TWIN\"'",
        ),
        ("timeline_events", "content = 'TWIN'"),
    ] {
        for statement in [
            format!("CREATE TEMP TABLE twin AS SELECT * FROM {table} WHERE session_id = '{from}'"),
            format!("UPDATE twin SET session_id = '{to}', {marks}"),
            format!("INSERT INTO {table} SELECT * FROM twin"),
            "DROP TABLE twin".to_owned(),
        ] {
            sqlx::query(&statement).execute(&mut *conn).await.unwrap();
        }
    }
    sqlx::query("RESET session_replication_role")
        .execute(&mut *conn)
        .await
        .unwrap();
}

/// `value` with every field of [`MARKED`] that holds something replaced by `"TWIN"`.
fn marked(value: &Value) -> Value {
    match value {
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(key, v)| {
                    let v = if MARKED.contains(&key.as_str()) && !v.is_null() {
                        json!("TWIN")
                    } else {
                        marked(v)
                    };
                    (key.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(marked).collect()),
        other => other.clone(),
    }
}

/// Whether `field` holds something somewhere in `value`.
fn holds(value: &Value, field: &str) -> bool {
    match value {
        Value::Object(fields) => fields
            .iter()
            .any(|(key, v)| (key == field && !v.is_null()) || holds(v, field)),
        Value::Array(items) => items.iter().any(|v| holds(v, field)),
        _ => false,
    }
}

#[tokio::test]
async fn a_record_of_another_session_with_the_same_id_is_never_read_in_its_place() {
    let app = TestApp::start().await;
    let pool = app.store.pool();
    let original = fixtures::investigation(pool, Utc::now()).await;
    // The chat's question answered: its stage runs an agent whose response is the answer.
    let (stage, session): (Uuid, Uuid) = sqlx::query_as(
        "SELECT id, session_id FROM stages WHERE session_id = $1 AND chat_id IS NOT NULL",
    )
    .bind(original)
    .fetch_one(pool)
    .await
    .unwrap();
    let execution = fixtures::execution(pool, session, stage, 1, "ChatAgent", None).await;
    let at = At {
        session,
        stage,
        execution,
    };
    fixtures::event(pool, at, 100, "llm_response", "Raise the limit to 512Mi").await;
    let read = async |session: Uuid| app.data(TREE, json!({ "id": session.to_string() })).await;
    let before = read(original).await;

    let copy = fixtures::session(pool, fixtures::NewSession::default()).await;
    twin(&app, original, copy).await;

    assert_eq!(
        read(original).await,
        before,
        "the original reads only its own records"
    );
    let copied = read(copy).await;
    assert_ne!(copied, before);
    assert_eq!(
        copied,
        marked(&before),
        "the copy reads only its own records"
    );
    // The tree was read whole: each kind of record is there.
    for field in MARKED {
        assert!(holds(&before, field), "{field} was read");
    }
    assert!(
        before.to_string().contains("Raise the limit"),
        "the chat's answer was read"
    );
    app.stop().await;
}

/// A look-up of a record's session by its id alone (`Owners::session_of`, or the statement that
/// creates or finishes an event when it is sent alone).
fn is_session_lookup(statement: &str) -> bool {
    statement.contains("SELECT session_id FROM ") && statement.contains("WHERE id = $1")
}

/// The batch's look-up of every record it names, locking their sessions (`LockPlan`).
fn is_batch_lookup(statement: &str) -> bool {
    statement.contains("FOR NO KEY UPDATE OF s")
}

#[tokio::test]
async fn a_write_looks_the_session_of_a_record_up_once() {
    let app = TestApp::start().await;
    // This test's runtime runs the server too: every statement it causes is recorded here.
    let _recording = statements::record_on_this_thread();
    let a = Agent { app: &app };
    let session = a.session().await;
    let lookups = async |write: &str, variables: Value| {
        statements::clear();
        let data = a.ok(write, variables).await;
        (
            statements::recorded()
                .iter()
                .filter(|s| is_session_lookup(s))
                .count(),
            data,
        )
    };
    // The session is named: nothing to look up.
    let (n, data) = lookups(
        "mutation ($s: ID!) { createStage(input: { sessionId: $s, stageIndex: 0, name: \"Stage\" }) { uuid } }",
        json!({ "s": session }),
    )
    .await;
    assert_eq!(n, 0, "createStage");
    let stage = data["createStage"]["uuid"].as_str().unwrap().to_owned();
    // A stage, an execution, an event are named by id: one look-up each, whatever the write
    // then reads and writes under it.
    let (n, data) = lookups(
        "mutation ($s: ID!) { createAgentExecution(input: { stageId: $s, agentIndex: 1, agentName: \"A\", iterationStrategy: \"react\" }) { uuid stage { name } } }",
        json!({ "s": stage }),
    )
    .await;
    assert_eq!(n, 1, "createAgentExecution");
    let execution = data["createAgentExecution"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    for (write, what) in [
        (
            "mutation ($e: ID!) { startAgentExecution(input: { id: $e }) { status } }",
            "startAgentExecution",
        ),
        (
            "mutation ($e: ID!) { appendMessage(input: { executionId: $e, role: ASSISTANT, content: \"look\", toolCalls: [{ id: \"c1\", name: \"kubectl\" }] }) { uuid } }",
            "appendMessage",
        ),
        (
            "mutation ($e: ID!) { appendMessage(input: { executionId: $e, role: TOOL, content: \"3 pods\", toolCallId: \"c1\", toolName: \"kubectl\" }) { uuid } }",
            "appendMessage (an answer)",
        ),
        (
            "mutation ($e: ID!) { recordMCPInteraction(input: { executionId: $e, interactionType: TOOL_CALL, serverName: \"k8s\", toolName: \"kubectl\", toolCallId: \"c1\" }) { uuid } }",
            "recordMCPInteraction",
        ),
    ] {
        let (n, _) = lookups(write, json!({ "e": execution })).await;
        assert_eq!(n, 1, "{what}");
    }
    let (n, data) = lookups(
        "mutation ($e: ID!) { recordLLMInteraction(input: { executionId: $e, interactionType: ITERATION, modelName: \"m\" }) { uuid } }",
        json!({ "e": execution }),
    )
    .await;
    assert_eq!(n, 1, "recordLLMInteraction");
    let llm = data["recordLLMInteraction"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let (n, data) = lookups(
        "mutation ($e: ID!) { createTimelineEvent(input: { executionId: $e, eventType: LLM_RESPONSE }) { uuid } }",
        json!({ "e": execution }),
    )
    .await;
    assert_eq!(n, 1, "createTimelineEvent");
    let event = data["createTimelineEvent"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned();

    // An append at the end is one statement, which finds the event itself; a retry that
    // overlaps what is stored looks the session up once, and stores its new part with it.
    let append = "mutation ($e: ID!, $o: Int!, $d: String!) { appendTimelineContent(input: { eventId: $e, offset: $o, delta: $d }) { end applied } }";
    let (n, data) = lookups(append, json!({ "e": event, "o": 0, "d": "Pods" })).await;
    assert_eq!(
        (n, &data["appendTimelineContent"]["applied"]),
        (0, &json!(4))
    );
    let (n, data) = lookups(append, json!({ "e": event, "o": 2, "d": "ds restart" })).await;
    assert_eq!(
        (n, &data["appendTimelineContent"]["applied"]),
        (1, &json!(8))
    );
    let sessions: Vec<Uuid> = sqlx::query_scalar(
        "SELECT session_id FROM timeline_event_chunks WHERE event_id = $1::uuid",
    )
    .bind(&event)
    .fetch_all(app.store.pool())
    .await
    .unwrap();
    // (The first append was grouped: its text is in the session's event log, not a chunk.)
    assert_eq!(sessions, vec![session.parse::<Uuid>().unwrap(); 1]);

    let (n, data) = lookups(
        "mutation ($id: ID!, $l: ID!) { finishTimelineEvent(input: { eventId: $id, status: COMPLETED, llmInteractionId: $l }) { content } }",
        json!({ "id": event, "l": llm }),
    )
    .await;
    assert_eq!(n, 1, "finishTimelineEvent");
    assert_eq!(data["finishTimelineEvent"]["content"], "Pods restart");

    // A batch looks up what it names in one statement, and what it creates is known: a
    // stage, an execution under it and an event under that, in a batch that also writes
    // under the execution above, need no look-up of their own.
    let (stage2, execution2) = (Uuid::now_v7(), Uuid::now_v7());
    let ops = json!([
        { "createStage": { "id": stage2, "sessionId": session, "stageIndex": 1, "name": "Second" } },
        { "createAgentExecution": { "id": execution2, "stageId": stage2, "agentIndex": 1,
                                    "agentName": "B", "iterationStrategy": "react" } },
        { "createTimelineEvent": { "executionId": execution2, "eventType": "LLM_RESPONSE" } },
        { "appendMessage": { "executionId": execution, "role": "ASSISTANT", "content": "done" } },
        { "finishAgentExecution": { "id": execution, "status": "COMPLETED" } },
    ]);
    statements::clear();
    a.ok(
        "mutation ($ops: [IngestOperation!]!) { ingest(operations: $ops) { __typename } }",
        json!({ "ops": ops }),
    )
    .await;
    let recorded = statements::recorded();
    assert_eq!(
        recorded.iter().filter(|s| is_batch_lookup(s)).count(),
        1,
        "the batch's look-up"
    );
    assert_eq!(
        recorded.iter().filter(|s| is_session_lookup(s)).count(),
        0,
        "no operation of the batch looks a session up again"
    );
    app.stop().await;
}
