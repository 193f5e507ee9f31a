//! The write side: lifecycle, derived facts, state machines, idempotency, atomicity, validation.

use serde_json::{Value, json};

use crate::common::{TestApp, nodes, statements};

/// A small client for the mutations, used by the write-side tests.
pub struct Agent<'a> {
    pub app: &'a TestApp,
}

impl Agent<'_> {
    pub async fn ok(&self, query: &str, variables: Value) -> Value {
        self.app.data(query, variables).await
    }

    pub async fn session(&self) -> String {
        let d = self
            .ok(
                "mutation { createSession(input: { alertType: \"PodCrashLooping\", chainId: \"k8s\", \
                 alertData: { pod: \"api-1\" } }) { uuid } }",
                json!({}),
            )
            .await;
        d["createSession"]["uuid"].as_str().unwrap().to_owned()
    }

    pub async fn stage(
        &self,
        session: &str,
        index: i32,
        agents: i32,
        policy: Option<&str>,
    ) -> String {
        let (parallel, policy) = match policy {
            Some(p) => (json!("MULTI_AGENT"), json!(p)),
            None => (Value::Null, Value::Null),
        };
        let d = self
            .ok(
                "mutation ($s: ID!, $i: Int!, $n: Int!, $p: ParallelType, $sp: SuccessPolicy) {
                   createStage(input: { sessionId: $s, stageIndex: $i, name: \"Stage\", expectedAgentCount: $n,
                                        parallelType: $p, successPolicy: $sp }) { uuid } }",
                json!({ "s": session, "i": index, "n": agents, "p": parallel, "sp": policy }),
            )
            .await;
        d["createStage"]["uuid"].as_str().unwrap().to_owned()
    }

    pub async fn execution(&self, stage: &str, index: i32, name: &str) -> String {
        let d = self
            .ok(
                "mutation ($s: ID!, $i: Int!, $n: String!) { createAgentExecution(input: { stageId: $s,
                   agentIndex: $i, agentName: $n, iterationStrategy: \"react\" }) { uuid } }",
                json!({ "s": stage, "i": index, "n": name }),
            )
            .await;
        d["createAgentExecution"]["uuid"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    pub async fn start(&self, execution: &str) {
        self.ok(
            "mutation ($id: ID!) { startAgentExecution(input: { id: $id }) { status } }",
            json!({ "id": execution }),
        )
        .await;
    }

    pub async fn finish(&self, execution: &str, status: &str, error: Option<&str>) -> Value {
        self.app
            .graphql(
                "mutation ($id: ID!, $s: ExecutionOutcome!, $e: String) {
                   finishAgentExecution(input: { id: $id, status: $s, errorMessage: $e }) {
                     status errorMessage startedAt completedAt durationMs stage { status errorMessage } } }",
                json!({ "id": execution, "s": status, "e": error }),
            )
            .await
    }

    pub async fn event(&self, execution: &str, status: &str) -> (String, i64) {
        let d = self
            .ok(
                "mutation ($e: ID!, $s: TimelineEventStatus!) { createTimelineEvent(input: { executionId: $e,
                   eventType: LLM_RESPONSE, status: $s, metadata: { model: \"m\" } }) { uuid sequenceNumber } }",
                json!({ "e": execution, "s": status }),
            )
            .await;
        (
            d["createTimelineEvent"]["uuid"]
                .as_str()
                .unwrap()
                .to_owned(),
            d["createTimelineEvent"]["sequenceNumber"].as_i64().unwrap(),
        )
    }

    pub async fn append(&self, event: &str, offset: i64, delta: &str) -> Value {
        self.app
            .graphql(
                "mutation ($e: ID!, $o: Int!, $d: String!) { appendTimelineContent(input: { eventId: $e,
                   offset: $o, delta: $d }) { offset end applied } }",
                json!({ "e": event, "o": offset, "d": delta }),
            )
            .await
    }

    pub async fn content(&self, event: &str) -> (String, String) {
        let gid = casefile::api::ids::encode(
            casefile::api::ids::NodeType::TimelineEvent,
            event.parse().unwrap(),
        );
        let d = self
            .ok(
                "query ($id: ID!) { node(id: $id) { ... on TimelineEvent { content status } } }",
                json!({ "id": gid.0 }),
            )
            .await;
        (
            d["node"]["content"].as_str().unwrap().to_owned(),
            d["node"]["status"].as_str().unwrap().to_owned(),
        )
    }
}

fn code(body: &Value) -> &str {
    body["errors"][0]["extensions"]["code"]
        .as_str()
        .unwrap_or("(none)")
}

fn message(body: &Value) -> &str {
    body["errors"][0]["message"].as_str().unwrap_or("")
}

#[tokio::test]
async fn an_investigation_recorded_end_to_end() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let session = a.session().await;
    let stage = a.stage(&session, 0, 1, None).await;
    let exec = a.execution(&stage, 1, "KubernetesAgent").await;

    // Recording under a pending execution starts it, its stage and its session.
    let (event, seq) = a.event(&exec, "STREAMING").await;
    assert_eq!(seq, 1);
    let d = a.ok("query ($id: ID!) { session(id: $id) { status startedAt stages { status startedAt executions { status startedAt } } } }", json!({ "id": session })).await;
    assert_eq!(d["session"]["status"], "IN_PROGRESS");
    assert_eq!(d["session"]["stages"][0]["status"], "ACTIVE");
    assert_eq!(
        d["session"]["stages"][0]["executions"][0]["status"],
        "ACTIVE"
    );
    assert!(d["session"]["stages"][0]["executions"][0]["startedAt"].is_string());

    for (offset, delta) in [
        (0, "The pod "),
        (8, "is OOMKilled"),
        (20, " — raise the limit."),
    ] {
        let r = a.append(&event, offset, delta).await;
        assert!(r.get("errors").is_none(), "{r}");
    }
    assert_eq!(
        a.content(&event).await,
        (
            "The pod is OOMKilled — raise the limit.".to_owned(),
            "STREAMING".to_owned()
        )
    );

    let m1 = a.ok("mutation ($e: ID!) { appendMessage(input: { executionId: $e, role: SYSTEM, content: \"You are KubernetesAgent\" }) { uuid sequenceNumber } }", json!({ "e": exec })).await;
    let m2 = a.ok("mutation ($e: ID!) { appendMessage(input: { executionId: $e, role: USER, content: \"Why?\" }) { uuid sequenceNumber } }", json!({ "e": exec })).await;
    assert_eq!(m1["appendMessage"]["sequenceNumber"], 1);
    assert_eq!(m2["appendMessage"]["sequenceNumber"], 2);
    let llm = a.ok(
        "mutation ($e: ID!, $m: ID!) { recordLLMInteraction(input: { executionId: $e, interactionType: ITERATION,
           modelName: \"gemini-2.5-pro\", lastMessageId: $m, inputTokens: 100, outputTokens: 20, thinkingTokens: 5,
           estimatedCostUsd: 0.002, llmRequest: { messages: 2 }, llmResponse: { text: \"ok\" } })
           { uuid totalTokens conversationConnection(first: 20) { edges { node { sequenceNumber } } } } }",
        json!({ "e": exec, "m": m2["appendMessage"]["uuid"] }),
    ).await;
    assert_eq!(llm["recordLLMInteraction"]["totalTokens"], 120);
    assert_eq!(
        nodes(&llm["recordLLMInteraction"]["conversationConnection"]),
        json!([{ "sequenceNumber": 1 }, { "sequenceNumber": 2 }])
    );
    let mcp = a.ok(
        "mutation ($e: ID!) { recordMCPInteraction(input: { executionId: $e, interactionType: TOOL_CALL,
           serverName: \"kubernetes\", toolName: \"get_pods\", toolArguments: { ns: \"payments\" }, toolResult: { pods: 3 } }) { uuid } }",
        json!({ "e": exec }),
    ).await;
    let fin = a.ok(
        "mutation ($id: ID!, $l: ID!, $m: ID!) { finishTimelineEvent(input: { eventId: $id, status: COMPLETED,
           llmInteractionId: $l, mcpInteractionId: $m }) { status content llmInteraction { modelName } mcpInteraction { toolName } } }",
        json!({ "id": event, "l": llm["recordLLMInteraction"]["uuid"], "m": mcp["recordMCPInteraction"]["uuid"] }),
    ).await;
    assert_eq!(
        fin["finishTimelineEvent"]["content"],
        "The pod is OOMKilled — raise the limit."
    );
    assert_eq!(
        fin["finishTimelineEvent"]["llmInteraction"]["modelName"],
        "gemini-2.5-pro"
    );
    assert_eq!(
        fin["finishTimelineEvent"]["mcpInteraction"]["toolName"],
        "get_pods"
    );

    let done = a.finish(&exec, "COMPLETED", None).await;
    let e = &done["data"]["finishAgentExecution"];
    assert_eq!(e["status"], "COMPLETED");
    assert!(e["completedAt"].is_string() && e["durationMs"].as_i64().unwrap() >= 0);
    assert_eq!(
        e["stage"]["status"], "COMPLETED",
        "a single-agent stage takes its agent's status"
    );

    let d = a.ok("mutation ($id: ID!) { completeSession(input: { id: $id, finalAnalysis: \"Raise the memory limit\", executiveSummary: \"OOM\" }) { status completedAt durationMs finalAnalysis tokenUsage { totalTokens } counts { timelineEvents messages llmInteractions mcpInteractions } } }", json!({ "id": session })).await;
    let s = &d["completeSession"];
    assert_eq!(s["status"], "COMPLETED");
    assert!(s["durationMs"].as_i64().unwrap() >= 0);
    assert_eq!(s["tokenUsage"]["totalTokens"], 120);
    assert_eq!(
        s["counts"],
        json!({ "timelineEvents": 1, "messages": 2, "llmInteractions": 1, "mcpInteractions": 1 })
    );
    app.stop().await;
}

#[tokio::test]
async fn illegal_moves_are_conflicts_that_name_the_state() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let session = a.session().await;
    let other = a.session().await;
    let stage = a.stage(&session, 0, 1, None).await;
    let exec = a.execution(&stage, 1, "Agent").await;
    let (event, _) = a.event(&exec, "STREAMING").await;
    a.append(&event, 0, "abc").await;
    a.ok("mutation ($id: ID!) { finishTimelineEvent(input: { eventId: $id, status: COMPLETED }) { status } }", json!({ "id": event })).await;

    // Appending to a finished event.
    let r = a.append(&event, 3, "d").await;
    assert_eq!(code(&r), "CONFLICT");
    assert!(message(&r).contains("it is completed"), "{r}");
    // Finishing a finished event differently.
    let r = app.graphql("mutation ($id: ID!) { finishTimelineEvent(input: { eventId: $id, status: FAILED }) { status } }", json!({ "id": event })).await;
    assert_eq!(code(&r), "CONFLICT");
    assert!(message(&r).contains("already completed"), "{r}");
    // A stage index that already exists.
    let r = app.graphql("mutation ($s: ID!) { createStage(input: { sessionId: $s, stageIndex: 0, name: \"Again\" }) { uuid } }", json!({ "s": session })).await;
    assert_eq!(code(&r), "CONFLICT");
    assert!(message(&r).contains("already has stage 0"), "{r}");

    let done = a.finish(&exec, "FAILED", Some("boom")).await;
    assert_eq!(
        done["data"]["finishAgentExecution"]["stage"]["status"],
        "FAILED"
    );
    // Finishing a finished execution as something else.
    let r = a.finish(&exec, "COMPLETED", None).await;
    assert_eq!(code(&r), "CONFLICT");
    assert!(message(&r).contains("it is already failed"), "{r}");
    // The same finish again is a harmless retry.
    let r = a.finish(&exec, "FAILED", Some("boom")).await;
    assert!(r.get("errors").is_none(), "{r}");
    // A message on a finished execution.
    let r = app.graphql("mutation ($e: ID!) { appendMessage(input: { executionId: $e, role: USER, content: \"x\" }) { uuid } }", json!({ "e": exec })).await;
    assert_eq!(code(&r), "CONFLICT");
    assert!(message(&r).contains("is already failed"), "{r}");
    // An execution on a finished stage.
    let r = app.graphql("mutation ($s: ID!) { createAgentExecution(input: { stageId: $s, agentIndex: 2, agentName: \"Late\", iterationStrategy: \"react\" }) { uuid } }", json!({ "s": stage })).await;
    assert_eq!(code(&r), "CONFLICT");
    assert!(message(&r).contains("is already failed"), "{r}");
    // Records that point into another session.
    let other_stage = a.stage(&other, 0, 1, None).await;
    let other_exec = a.execution(&other_stage, 1, "Other").await;
    let m = a.ok("mutation ($e: ID!) { appendMessage(input: { executionId: $e, role: USER, content: \"hi\" }) { uuid } }", json!({ "e": other_exec })).await;
    let stage2 = a.stage(&session, 1, 1, None).await;
    let exec2 = a.execution(&stage2, 1, "Agent2").await;
    let r = app.graphql(
        "mutation ($e: ID!, $m: ID!) { recordLLMInteraction(input: { executionId: $e, interactionType: ITERATION, modelName: \"m\", lastMessageId: $m }) { uuid } }",
        json!({ "e": exec2, "m": m["appendMessage"]["uuid"] }),
    ).await;
    assert_eq!(code(&r), "BAD_USER_INPUT");
    assert!(
        message(&r).contains("is not a message of agent execution"),
        "{r}"
    );
    let other_llm = a.ok("mutation ($e: ID!) { recordLLMInteraction(input: { executionId: $e, interactionType: ITERATION, modelName: \"m\" }) { uuid } }", json!({ "e": other_exec })).await;
    let (event2, _) = a.event(&exec2, "STREAMING").await;
    let r = app.graphql("mutation ($id: ID!, $l: ID!) { finishTimelineEvent(input: { eventId: $id, status: COMPLETED, llmInteractionId: $l }) { status } }",
        json!({ "id": event2, "l": other_llm["recordLLMInteraction"]["uuid"] })).await;
    assert_eq!(code(&r), "BAD_USER_INPUT");
    assert!(message(&r).contains("belongs to another session"), "{r}");
    let r = app.graphql("mutation ($s: ID!, $p: ID!) { createAgentExecution(input: { stageId: $s, agentIndex: 3, agentName: \"Sub\", iterationStrategy: \"react\", parentExecutionId: $p }) { uuid } }",
        json!({ "s": stage2, "p": other_exec })).await;
    assert_eq!(code(&r), "BAD_USER_INPUT");
    // Session moves out of final states.
    a.finish(&exec2, "COMPLETED", None).await;
    a.ok("mutation ($id: ID!) { completeSession(input: { id: $id, finalAnalysis: \"done\" }) { status } }", json!({ "id": session })).await;
    for (mutation, state) in [
        (
            "mutation ($id: ID!) { startSession(id: $id) { status } }",
            "completed",
        ),
        (
            "mutation ($id: ID!) { failSession(input: { id: $id, errorMessage: \"x\" }) { status } }",
            "completed",
        ),
        (
            "mutation ($id: ID!) { requestSessionCancellation(id: $id) { status } }",
            "completed",
        ),
        (
            "mutation ($id: ID!) { createStage(input: { sessionId: $id, stageIndex: 5, name: \"Late\" }) { uuid } }",
            "completed",
        ),
    ] {
        let r = app.graphql(mutation, json!({ "id": session })).await;
        assert_eq!(code(&r), "CONFLICT", "{mutation}");
        assert!(message(&r).contains(&format!("is {state}")), "{r}");
    }
    // Completing again with the same conclusion is a retry.
    let r = app.graphql("mutation ($id: ID!) { completeSession(input: { id: $id, finalAnalysis: \"done\" }) { status } }", json!({ "id": session })).await;
    assert!(r.get("errors").is_none(), "{r}");
    app.stop().await;
}

async fn stage_outcome(a: &Agent<'_>, policy: &str, outcomes: &[&str]) -> (String, Value) {
    let session = a.session().await;
    let stage = a
        .stage(&session, 0, outcomes.len() as i32, Some(policy))
        .await;
    let mut execs = Vec::new();
    for (i, _) in outcomes.iter().enumerate() {
        execs.push(
            a.execution(&stage, i as i32 + 1, &format!("Agent{}", i + 1))
                .await,
        );
    }
    for e in &execs {
        a.start(e).await;
    }
    let mut last = Value::Null;
    for (i, (e, outcome)) in execs.iter().zip(outcomes).enumerate() {
        let error = (*outcome != "COMPLETED").then_some("it broke");
        let r = a.finish(e, outcome, error).await;
        let stage = r["data"]["finishAgentExecution"]["stage"].clone();
        if i + 1 < outcomes.len() {
            assert_eq!(
                stage["status"], "ACTIVE",
                "a stage stays active while any agent runs"
            );
        }
        last = stage;
    }
    (
        last["status"].as_str().unwrap().to_owned(),
        last["errorMessage"].clone(),
    )
}

#[tokio::test]
async fn stage_status_follows_the_success_policy() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let cases: [(&str, &[&str], &str); 10] = [
        ("ALL", &["COMPLETED", "COMPLETED", "COMPLETED"], "COMPLETED"),
        ("ALL", &["COMPLETED", "FAILED", "COMPLETED"], "FAILED"),
        ("ALL", &["TIMED_OUT", "TIMED_OUT"], "TIMED_OUT"),
        ("ALL", &["CANCELLED", "CANCELLED", "CANCELLED"], "CANCELLED"),
        ("ALL", &["COMPLETED", "TIMED_OUT"], "FAILED"),
        ("ANY", &["FAILED", "COMPLETED", "TIMED_OUT"], "COMPLETED"),
        ("ANY", &["FAILED", "FAILED"], "FAILED"),
        ("ANY", &["TIMED_OUT", "TIMED_OUT", "TIMED_OUT"], "TIMED_OUT"),
        ("ANY", &["CANCELLED", "CANCELLED"], "CANCELLED"),
        ("ANY", &["CANCELLED", "TIMED_OUT", "FAILED"], "FAILED"),
    ];
    for (policy, outcomes, expected) in cases {
        let (status, error) = stage_outcome(&a, policy, outcomes).await;
        assert_eq!(status, expected, "{policy} {outcomes:?}");
        if expected == "COMPLETED" {
            assert!(error.is_null());
        } else {
            let error = error.as_str().unwrap();
            for (i, outcome) in outcomes.iter().enumerate() {
                let named = error.contains(&format!("Agent{}", i + 1));
                assert_eq!(
                    named,
                    *outcome != "COMPLETED",
                    "{policy} {outcomes:?}: {error}"
                );
            }
        }
    }
    // A single agent's stage takes its status.
    for outcome in ["COMPLETED", "FAILED", "TIMED_OUT", "CANCELLED"] {
        let session = a.session().await;
        let stage = a.stage(&session, 0, 1, None).await;
        let exec = a.execution(&stage, 1, "Solo").await;
        let r = a
            .finish(&exec, outcome, (outcome != "COMPLETED").then_some("x"))
            .await;
        assert_eq!(
            r["data"]["finishAgentExecution"]["stage"]["status"],
            outcome
        );
    }
    app.stop().await;
}

async fn count(app: &TestApp, table: &str) -> i64 {
    sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
        .fetch_one(app.store.pool())
        .await
        .unwrap()
}

#[tokio::test]
async fn every_create_is_idempotent_under_its_client_id() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let id = || uuid::Uuid::now_v7().to_string();
    let (s, st, ex, ev, msg, llm, mcp, sub) = (id(), id(), id(), id(), id(), id(), id(), id());
    let creates: Vec<(&str, &str, Value, Value, &str)> = vec![
        (
            "createSession",
            "mutation ($v: CreateSessionInput!) { createSession(input: $v) { uuid } }",
            json!({ "id": s, "alertType": "A", "chainId": "c" }),
            json!({ "id": s, "alertType": "B", "chainId": "c" }),
            "sessions",
        ),
        (
            "createStage",
            "mutation ($v: CreateStageInput!) { createStage(input: $v) { uuid } }",
            json!({ "id": st, "sessionId": s, "stageIndex": 0, "name": "S", "expectedAgentCount": 2, "parallelType": "REPLICA", "successPolicy": "ANY" }),
            json!({ "id": st, "sessionId": s, "stageIndex": 0, "name": "S2", "expectedAgentCount": 2, "parallelType": "REPLICA", "successPolicy": "ANY" }),
            "stages",
        ),
        (
            "createAgentExecution",
            "mutation ($v: CreateAgentExecutionInput!) { createAgentExecution(input: $v) { uuid } }",
            json!({ "id": ex, "stageId": st, "agentIndex": 1, "agentName": "A", "iterationStrategy": "react" }),
            json!({ "id": ex, "stageId": st, "agentIndex": 1, "agentName": "B", "iterationStrategy": "react" }),
            "agent_executions",
        ),
        (
            "createAgentExecution",
            "mutation ($v: CreateAgentExecutionInput!) { createAgentExecution(input: $v) { uuid } }",
            json!({ "id": sub, "stageId": st, "agentIndex": 7, "agentName": "Sub", "iterationStrategy": "react", "parentExecutionId": ex }),
            json!({ "id": sub, "stageId": st, "agentIndex": 8, "agentName": "Sub", "iterationStrategy": "react", "parentExecutionId": ex }),
            "agent_executions",
        ),
        (
            "createTimelineEvent",
            "mutation ($v: CreateTimelineEventInput!) { createTimelineEvent(input: $v) { uuid } }",
            json!({ "id": ev, "executionId": ex, "eventType": "LLM_THINKING" }),
            json!({ "id": ev, "executionId": ex, "eventType": "LLM_RESPONSE" }),
            "timeline_events",
        ),
        (
            "appendMessage",
            "mutation ($v: AppendMessageInput!) { appendMessage(input: $v) { uuid } }",
            json!({ "id": msg, "executionId": ex, "role": "USER", "content": "hi" }),
            json!({ "id": msg, "executionId": ex, "role": "USER", "content": "hello" }),
            "messages",
        ),
        (
            "recordLLMInteraction",
            "mutation ($v: RecordLLMInteractionInput!) { recordLLMInteraction(input: $v) { uuid } }",
            json!({ "id": llm, "executionId": ex, "interactionType": "ITERATION", "modelName": "m", "inputTokens": 3 }),
            json!({ "id": llm, "executionId": ex, "interactionType": "ITERATION", "modelName": "m", "inputTokens": 4 }),
            "llm_interactions",
        ),
        (
            "recordMCPInteraction",
            "mutation ($v: RecordMCPInteractionInput!) { recordMCPInteraction(input: $v) { uuid } }",
            json!({ "id": mcp, "executionId": ex, "interactionType": "TOOL_LIST", "serverName": "k8s" }),
            json!({ "id": mcp, "executionId": ex, "interactionType": "TOOL_LIST", "serverName": "argo" }),
            "mcp_interactions",
        ),
    ];
    for (name, mutation, input, different, table) in &creates {
        let first = a.ok(mutation, json!({ "v": input })).await;
        let rows = count(&app, table).await;
        let seq_before = count(&app, "timeline_events").await;
        let again = a.ok(mutation, json!({ "v": input })).await;
        assert_eq!(again, first, "{name}: a retry returns the same record");
        assert_eq!(
            count(&app, table).await,
            rows,
            "{name}: a retry writes nothing"
        );
        assert_eq!(count(&app, "timeline_events").await, seq_before);
        let r = app.graphql(mutation, json!({ "v": different })).await;
        assert_eq!(code(&r), "CONFLICT", "{name}: {r}");
        assert!(
            message(&r).contains("already used by a different request"),
            "{r}"
        );
    }
    // Chats (on a finished session).
    let done = a.session().await;
    a.ok(
        "mutation ($id: ID!) { requestSessionCancellation(id: $id) { status } }",
        json!({ "id": done }),
    )
    .await;
    let (chat, question) = (id(), id());
    let open = "mutation ($v: OpenChatInput!) { openChat(input: $v) { uuid } }";
    let post = "mutation ($v: PostChatMessageInput!) { postChatMessage(input: $v) { uuid stage { uuid stageIndex } } }";
    for (mutation, input, different) in [
        (
            open,
            json!({ "id": chat, "sessionId": done, "createdBy": "alice" }),
            json!({ "id": chat, "sessionId": done, "createdBy": "bob" }),
        ),
        (
            post,
            json!({ "id": question, "chatId": chat, "content": "Why?" }),
            json!({ "id": question, "chatId": chat, "content": "How?" }),
        ),
    ] {
        let first = a.ok(mutation, json!({ "v": input })).await;
        let stages = count(&app, "stages").await;
        assert_eq!(a.ok(mutation, json!({ "v": input })).await, first);
        assert_eq!(count(&app, "stages").await, stages);
        assert_eq!(
            code(&app.graphql(mutation, json!({ "v": different })).await),
            "CONFLICT"
        );
    }
    // An id already used by another kind of record.
    let r = app
        .graphql(
            "mutation ($v: CreateSessionInput!) { createSession(input: $v) { uuid } }",
            json!({ "v": { "id": ex, "alertType": "A", "chainId": "c" } }),
        )
        .await;
    assert_eq!(code(&r), "CONFLICT");
    app.stop().await;
}

/// An append locks its stream in SQL (`append_timeline_chunk`), finishing an event in casefile;
/// a batch locks sessions' event orders in casefile, the trigger that numbers changes in SQL.
/// Each pair must be one lock, or appends and finishing (or numbering) stop taking turns.
#[tokio::test]
async fn sql_and_casefile_compute_the_same_lock_keys() {
    use casefile::store::write::locks::{session_events_key, stream_key};
    let app = TestApp::start().await;
    // The low 64 bits with the sign bit set and not, and at the edges.
    let edges = [0, 1 << 63, u64::MAX as u128, u128::MAX].map(uuid::Uuid::from_u128);
    for id in (0..100).map(|_| uuid::Uuid::now_v7()).chain(edges) {
        let (stream, session): (i64, i64) =
            sqlx::query_as("SELECT stream_lock_key($1), session_events_lock_key($1)")
                .bind(id)
                .fetch_one(app.store.pool())
                .await
                .unwrap();
        assert_eq!(stream, stream_key(id), "{id}");
        assert_eq!(session, session_events_key(id), "{id}");
    }
    app.stop().await;
}

#[tokio::test]
async fn appends_apply_exactly_once_and_refuse_gaps() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let session = a.session().await;
    let stage = a.stage(&session, 0, 1, None).await;
    let exec = a.execution(&stage, 1, "Agent").await;
    let (event, _) = a.event(&exec, "STREAMING").await;
    let ok = |r: &Value| r["data"]["appendTimelineContent"].clone();
    assert_eq!(
        ok(&a.append(&event, 0, "héllo").await),
        json!({ "offset": 0, "end": 5, "applied": 5 })
    );
    // The same chunk again: acknowledged, not applied twice.
    assert_eq!(
        ok(&a.append(&event, 0, "héllo").await),
        json!({ "offset": 0, "end": 5, "applied": 0 })
    );
    // Overlapping: only the new part is stored.
    assert_eq!(
        ok(&a.append(&event, 3, "lo wörld").await),
        json!({ "offset": 3, "end": 11, "applied": 6 })
    );
    // A gap is refused, and so is different content at an applied offset.
    let r = a.append(&event, 12, "!").await;
    assert_eq!(code(&r), "CONFLICT");
    assert!(
        message(&r).contains("it has 11 characters, the append starts at 12"),
        "{r}"
    );
    let r = a.append(&event, 6, "W").await;
    assert_eq!(code(&r), "CONFLICT");
    assert!(message(&r).contains("different content at offset 6"), "{r}");
    assert_eq!(a.content(&event).await.0, "héllo wörld");
    // Bad appends.
    for (offset, delta) in [(-1, "x"), (11, "")] {
        assert_eq!(
            code(&a.append(&event, offset, delta).await),
            "BAD_USER_INPUT"
        );
    }
    assert_eq!(
        code(&a.append(&event, 11, &"x".repeat(65_537)).await),
        "BAD_USER_INPUT"
    );
    // Contiguous appends in one batch are stored as one chunk, each still exactly-once.
    let (batched, _) = a.event(&exec, "STREAMING").await;
    a.append(&batched, 0, "abc").await;
    let chunks_before = count(&app, "timeline_event_chunks").await;
    let d = a
        .ok(
            "mutation ($ops: [IngestOperation!]!) { ingest(operations: $ops) { ... on TimelineAppend { offset end applied } } }",
            json!({ "ops": [
                { "appendTimelineContent": { "eventId": batched, "offset": 0, "delta": "ab" } },
                { "appendTimelineContent": { "eventId": batched, "offset": 2, "delta": "cde" } },
                { "appendTimelineContent": { "eventId": batched, "offset": 5, "delta": "f" } },
            ] }),
        )
        .await;
    assert_eq!(
        d["ingest"],
        json!([{ "offset": 0, "end": 2, "applied": 0 }, { "offset": 2, "end": 5, "applied": 2 }, { "offset": 5, "end": 6, "applied": 1 }])
    );
    assert_eq!(
        count(&app, "timeline_event_chunks").await,
        chunks_before + 1
    );
    assert_eq!(a.content(&batched).await.0, "abcdef");

    // Finishing folds the chunks into the event; nothing is left behind.
    a.ok("mutation ($id: ID!) { finishTimelineEvent(input: { eventId: $id, status: COMPLETED }) { status } }", json!({ "id": event })).await;
    assert_eq!(
        a.content(&event).await,
        ("héllo wörld".to_owned(), "COMPLETED".to_owned())
    );
    let left: i64 =
        sqlx::query_scalar("SELECT count(*) FROM timeline_event_chunks WHERE event_id = $1::uuid")
            .bind(&event)
            .fetch_one(app.store.pool())
            .await
            .unwrap();
    assert_eq!(left, 0);
    app.stop().await;
}

/// What a mutation sent to PostgreSQL since the last `clear`, leaving out reads of the caller's
/// token and sqlx's look-ups of a type (once per connection): `Ok` when it was a single
/// statement containing `call`, else every statement.
fn sent(call: &str) -> Result<(), Vec<String>> {
    let sent: Vec<String> = statements::recorded_by_operations()
        .into_iter()
        .filter(|s| !s.contains("api_tokens") && !s.contains("::regtype::oid"))
        .collect();
    match sent.as_slice() {
        [one] if one.contains(call) => Ok(()),
        _ => Err(sent),
    }
}

/// Creating an event under a running execution and finishing a streaming event are one
/// statement each, sent alone (no transaction around it holds the session's lock across round
/// trips); what that statement declines is decided step by step in a transaction, with the
/// answers it always gave.
#[tokio::test]
async fn an_event_is_created_and_finished_in_one_statement_each() {
    let app = TestApp::start().await;
    // This test's runtime runs the server too: every statement it causes is recorded here.
    let _recording = statements::record_on_this_thread();
    let a = Agent { app: &app };
    let session = a.session().await;
    let stage = a.stage(&session, 0, 1, None).await;
    let exec = a.execution(&stage, 1, "Agent").await;

    // The first event of a pending execution starts it: a transaction.
    statements::clear();
    let (first, seq) = a.event(&exec, "STREAMING").await;
    let steps = sent("create_timeline_event(").unwrap_err();
    assert!(steps.iter().any(|s| s.starts_with("COMMIT")), "{steps:?}");
    assert_eq!(seq, 1);
    let status: String =
        sqlx::query_scalar("SELECT status FROM agent_executions WHERE id = $1::uuid")
            .bind(&exec)
            .fetch_one(app.store.pool())
            .await
            .unwrap();
    assert_eq!(status, "active");

    // Then one statement each.
    statements::clear();
    let (event, seq) = a.event(&exec, "STREAMING").await;
    sent("create_timeline_event(").unwrap();
    assert_eq!(seq, 2);
    a.append(&event, 0, "Pods ").await;
    a.append(&event, 5, "restart").await;
    let finish = "mutation ($id: ID!, $s: TimelineEventStatus!) { finishTimelineEvent(input: { eventId: $id, status: $s }) { content status sequenceNumber } }";
    statements::clear();
    let done = a.ok(finish, json!({ "id": event, "s": "COMPLETED" })).await;
    sent("finish_timeline_event(").unwrap();
    assert_eq!(
        done["finishTimelineEvent"],
        json!({ "content": "Pods restart", "status": "COMPLETED", "sequenceNumber": 2 })
    );
    assert_eq!(
        a.content(&event).await,
        ("Pods restart".into(), "COMPLETED".into())
    );
    let chunks: i64 =
        sqlx::query_scalar("SELECT count(*) FROM timeline_event_chunks WHERE event_id = $1::uuid")
            .bind(&event)
            .fetch_one(app.store.pool())
            .await
            .unwrap();
    assert_eq!(chunks, 0, "the finish folded the chunks into the event");

    // The same finish again: declined, then answered as a retry; a different one refused.
    statements::clear();
    let again = a.ok(finish, json!({ "id": event, "s": "COMPLETED" })).await;
    assert_eq!(again, done);
    assert!(sent("finish_timeline_event(").is_err());
    let r = app
        .graphql(finish, json!({ "id": event, "s": "FAILED" }))
        .await;
    assert_eq!(code(&r), "CONFLICT", "{r}");

    // A client-chosen id: claimed in the one statement; its retry gets the same event back,
    // another request under it is refused.
    let create = "mutation ($v: CreateTimelineEventInput!) { createTimelineEvent(input: $v) { uuid sequenceNumber content } }";
    let id = uuid::Uuid::now_v7().to_string();
    let input = json!({ "id": id, "executionId": exec, "eventType": "LLM_THINKING", "status": "COMPLETED", "content": "think" });
    statements::clear();
    let made = a.ok(create, json!({ "v": input })).await;
    sent("create_timeline_event(").unwrap();
    assert_eq!(made["createTimelineEvent"]["sequenceNumber"], 3);
    assert_eq!(a.ok(create, json!({ "v": input })).await, made);
    let mut other = input.clone();
    other["content"] = json!("other");
    let r = app.graphql(create, json!({ "v": other })).await;
    assert_eq!(code(&r), "CONFLICT", "{r}");
    // An id another record of the kind holds, without a receipt (a restored event, say).
    let r = app
        .graphql(
            create,
            json!({ "v": { "id": first, "executionId": exec, "eventType": "LLM_THINKING" } }),
        )
        .await;
    assert_eq!(code(&r), "CONFLICT", "{r}");

    // Missing records and finished executions are refused as before, naming them.
    let missing = uuid::Uuid::now_v7().to_string();
    let r = app
        .graphql(
            create,
            json!({ "v": { "executionId": missing, "eventType": "LLM_THINKING" } }),
        )
        .await;
    assert_eq!(code(&r), "NOT_FOUND", "{r}");
    let r = app
        .graphql(finish, json!({ "id": missing, "s": "COMPLETED" }))
        .await;
    assert_eq!(code(&r), "NOT_FOUND", "{r}");
    a.finish(&exec, "COMPLETED", None).await;
    let r = app
        .graphql(
            create,
            json!({ "v": { "executionId": exec, "eventType": "LLM_THINKING" } }),
        )
        .await;
    assert_eq!(code(&r), "CONFLICT", "{r}");
    assert!(message(&r).contains("is already completed"), "{r}");
    // The event left streaming was closed with its execution, keeping what it had.
    assert_eq!(a.content(&first).await, (String::new(), "COMPLETED".into()));
    let sequence: Vec<i64> = sqlx::query_scalar(
        "SELECT sequence_number FROM timeline_events WHERE session_id = $1::uuid ORDER BY 1",
    )
    .bind(&session)
    .fetch_all(app.store.pool())
    .await
    .unwrap();
    assert_eq!(sequence, [1, 2, 3], "no number taken by a refused create");
    app.stop().await;
}

#[tokio::test]
async fn a_batch_that_fails_half_way_stores_nothing() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let session = a.session().await;
    let stage = a.stage(&session, 0, 1, None).await;
    let exec = a.execution(&stage, 1, "Agent").await;
    let (event, _) = a.event(&exec, "STREAMING").await;
    let before: Vec<i64> = futures::future::join_all(
        [
            "timeline_events",
            "timeline_event_chunks",
            "messages",
            "llm_interactions",
            "create_receipts",
        ]
        .map(|t| count(&app, t)),
    )
    .await;
    let ingest = "mutation ($ops: [IngestOperation!]!) { ingest(operations: $ops) { __typename
        ... on TimelineAppend { end } ... on Message { sequenceNumber } ... on TimelineEvent { sequenceNumber } } }";
    let new_event = uuid::Uuid::now_v7().to_string();
    let ops = json!([
        { "appendTimelineContent": { "eventId": event, "offset": 0, "delta": "one " } },
        { "appendMessage": { "executionId": exec, "role": "USER", "content": "hi" } },
        { "createTimelineEvent": { "id": new_event, "executionId": exec, "eventType": "LLM_THINKING" } },
        { "recordLLMInteraction": { "executionId": exec, "interactionType": "ITERATION", "modelName": "m" } },
        { "appendTimelineContent": { "eventId": event, "offset": 99, "delta": "gap" } },
    ]);
    let r = app.graphql(ingest, json!({ "ops": ops })).await;
    assert_eq!(code(&r), "CONFLICT");
    assert!(
        message(&r).starts_with("operation 4 (appendTimelineContent): gap"),
        "{r}"
    );
    let after: Vec<i64> = futures::future::join_all(
        [
            "timeline_events",
            "timeline_event_chunks",
            "messages",
            "llm_interactions",
            "create_receipts",
        ]
        .map(|t| count(&app, t)),
    )
    .await;
    assert_eq!(after, before, "nothing of the failed batch is stored");

    // Fixed and resent, it applies in order; resent again, it changes nothing.
    let mut ops = ops;
    ops[4] = json!({ "appendTimelineContent": { "eventId": event, "offset": 4, "delta": "two" } });
    ops[3] = json!({ "recordLLMInteraction": { "id": uuid::Uuid::now_v7().to_string(), "executionId": exec, "interactionType": "ITERATION", "modelName": "m" } });
    ops[1] = json!({ "appendMessage": { "id": uuid::Uuid::now_v7().to_string(), "executionId": exec, "role": "USER", "content": "hi" } });
    let first = a.ok(ingest, json!({ "ops": ops })).await;
    assert_eq!(
        first["ingest"][0],
        json!({ "__typename": "TimelineAppend", "end": 4 })
    );
    assert_eq!(
        first["ingest"][1],
        json!({ "__typename": "Message", "sequenceNumber": 1 })
    );
    assert_eq!(
        first["ingest"][2],
        json!({ "__typename": "TimelineEvent", "sequenceNumber": 2 })
    );
    assert_eq!(
        first["ingest"][4],
        json!({ "__typename": "TimelineAppend", "end": 7 })
    );
    let counts = futures::future::join_all(
        ["timeline_events", "messages", "llm_interactions"].map(|t| count(&app, t)),
    )
    .await;
    assert_eq!(a.ok(ingest, json!({ "ops": ops })).await, first);
    let again = futures::future::join_all(
        ["timeline_events", "messages", "llm_interactions"].map(|t| count(&app, t)),
    )
    .await;
    assert_eq!(again, counts);
    assert_eq!(a.content(&event).await.0, "one two");
    app.stop().await;
}

#[tokio::test]
async fn sixteen_concurrent_writers_get_gapless_sequence_numbers() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let session = a.session().await;
    let stage = a.stage(&session, 0, 16, Some("ALL")).await;
    let mut execs = Vec::new();
    for i in 1..=16 {
        execs.push(a.execution(&stage, i, &format!("Agent{i}")).await);
    }
    const PER_WRITER: usize = 10;
    let writers = execs.iter().map(|exec| {
        let a = Agent { app: &app };
        async move {
            let mut seqs = Vec::new();
            for i in 0..PER_WRITER {
                let (_, seq) = a.event(exec, "COMPLETED").await;
                let m = a
                    .ok("mutation ($e: ID!, $c: String!) { appendMessage(input: { executionId: $e, role: ASSISTANT, content: $c }) { sequenceNumber } }",
                        json!({ "e": exec, "c": format!("m{i}") }))
                    .await;
                assert_eq!(m["appendMessage"]["sequenceNumber"], i as i64 + 1, "messages are numbered per execution");
                seqs.push(seq);
            }
            seqs
        }
    });
    let mut all: Vec<i64> = futures::future::join_all(writers)
        .await
        .into_iter()
        .flatten()
        .collect();
    all.sort();
    assert_eq!(all, (1..=(16 * PER_WRITER) as i64).collect::<Vec<_>>());
    let stored: Vec<i64> = sqlx::query_scalar(
        "SELECT sequence_number FROM timeline_events WHERE session_id = $1::uuid ORDER BY 1",
    )
    .bind(&session)
    .fetch_all(app.store.pool())
    .await
    .unwrap();
    assert_eq!(stored, all);
    // The session's one order of everything has no gap either, whatever the commits' order.
    let positions: Vec<i64> = app
        .store
        .session_events_after(uuid::Uuid::parse_str(&session).unwrap(), 0, 1_000_000)
        .await
        .unwrap()
        .iter()
        .map(|row| row.position)
        .collect();
    assert!(positions.len() > 2 * 16 * PER_WRITER, "{}", positions.len());
    assert_eq!(positions, (1..=positions.len() as i64).collect::<Vec<_>>());
    app.stop().await;
}

#[tokio::test]
async fn bad_input_is_refused_with_a_clear_message() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let session = a.session().await;
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "mutation ($v: CreateSessionInput!) { createSession(input: $v) { uuid } }",
            json!({ "alertType": " ", "chainId": "c" }),
            "`alertType` must not be empty",
        ),
        (
            "mutation ($v: CreateSessionInput!) { createSession(input: $v) { uuid } }",
            json!({ "alertType": "x".repeat(201), "chainId": "c" }),
            "at most 200",
        ),
        (
            "mutation ($v: CreateSessionInput!) { createSession(input: $v) { uuid } }",
            json!({ "alertType": "A", "chainId": "c", "alertData": { "blob": "x".repeat(300_000) } }),
            "at most 262144",
        ),
        (
            "mutation ($v: CreateStageInput!) { createStage(input: $v) { uuid } }",
            json!({ "sessionId": session, "stageIndex": 0, "name": "S", "expectedAgentCount": 2 }),
            "needs both `parallelType` and `successPolicy`",
        ),
        (
            "mutation ($v: CreateStageInput!) { createStage(input: $v) { uuid } }",
            json!({ "sessionId": session, "stageIndex": 0, "name": "S", "successPolicy": "ALL" }),
            "single-agent stage",
        ),
        (
            "mutation ($v: CreateStageInput!) { createStage(input: $v) { uuid } }",
            json!({ "sessionId": session, "stageIndex": -1, "name": "S" }),
            "`stageIndex` must be 0 or more",
        ),
        (
            "mutation ($v: CreateStageInput!) { createStage(input: $v) { uuid } }",
            json!({ "sessionId": session, "stageIndex": 0, "name": "S", "parallelType": "SIDEWAYS" }),
            "SIDEWAYS",
        ),
        (
            "mutation ($v: CreateStageInput!) { createStage(input: $v) { uuid } }",
            json!({ "sessionId": "nope", "stageIndex": 0, "name": "S" }),
            "is not a valid id",
        ),
    ];
    for (mutation, input, expected) in cases {
        let r = app.graphql(mutation, json!({ "v": input })).await;
        assert_eq!(code(&r), "BAD_USER_INPUT", "{input}: {r}");
        assert!(message(&r).contains(expected), "{expected}: {r}");
    }
    let stage = a.stage(&session, 0, 1, None).await;
    let exec = a.execution(&stage, 1, "Agent").await;
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({ "executionId": exec, "role": "TOOL", "content": "x" }),
            "needs the `toolCallId`",
        ),
        (
            json!({ "executionId": exec, "role": "USER", "content": "x", "toolCallId": "c1" }),
            "only a `TOOL` message",
        ),
        (
            json!({ "executionId": exec, "role": "USER", "content": "x", "toolCalls": [] }),
            "only an `ASSISTANT` message",
        ),
        (
            json!({ "executionId": exec, "role": "WIZARD", "content": "x" }),
            "WIZARD",
        ),
    ];
    for (input, expected) in cases {
        let r = app
            .graphql(
                "mutation ($v: AppendMessageInput!) { appendMessage(input: $v) { uuid } }",
                json!({ "v": input }),
            )
            .await;
        assert_eq!(code(&r), "BAD_USER_INPUT", "{input}: {r}");
        assert!(message(&r).contains(expected), "{expected}: {r}");
    }
    let r = app.graphql("mutation ($e: ID!) { recordLLMInteraction(input: { executionId: $e, interactionType: ITERATION, modelName: \"m\", inputTokens: -1 }) { uuid } }", json!({ "e": exec })).await;
    assert_eq!(code(&r), "BAD_USER_INPUT");
    let r = app.graphql("mutation ($e: ID!) { recordMCPInteraction(input: { executionId: $e, interactionType: TOOL_CALL, serverName: \"k8s\" }) { uuid } }", json!({ "e": exec })).await;
    assert_eq!(code(&r), "BAD_USER_INPUT");
    assert!(message(&r).contains("needs `toolName`"), "{r}");
    let r = app.graphql("mutation ($e: ID!) { createTimelineEvent(input: { executionId: $e, eventType: LLM_RESPONSE, status: FAILED }) { uuid } }", json!({ "e": exec })).await;
    assert_eq!(code(&r), "BAD_USER_INPUT");
    let missing = uuid::Uuid::now_v7().to_string();
    let r = app.graphql("mutation ($e: ID!) { createTimelineEvent(input: { executionId: $e, eventType: LLM_RESPONSE }) { uuid } }", json!({ "e": missing })).await;
    assert_eq!(code(&r), "NOT_FOUND");

    // Chat questions are validated as the chat design does.
    a.finish(&exec, "COMPLETED", None).await;
    a.ok(
        "mutation ($id: ID!) { completeSession(input: { id: $id }) { status } }",
        json!({ "id": session }),
    )
    .await;
    let chat = a
        .ok(
            "mutation ($s: ID!) { openChat(input: { sessionId: $s }) { uuid } }",
            json!({ "s": session }),
        )
        .await;
    let chat = chat["openChat"]["uuid"].as_str().unwrap().to_owned();
    for (content, expected) in [
        (String::new(), "cannot be empty"),
        (" \n\t ".to_owned(), "only whitespace"),
        ("x".repeat(5001), "exceeds 5000 character limit"),
    ] {
        let r = app.graphql("mutation ($c: ID!, $t: String!) { postChatMessage(input: { chatId: $c, content: $t }) { uuid } }", json!({ "c": chat, "t": content })).await;
        assert_eq!(code(&r), "BAD_USER_INPUT", "{r}");
        assert!(message(&r).contains(expected), "{r}");
    }
    let r = app.graphql("mutation ($c: ID!, $t: String!) { postChatMessage(input: { chatId: $c, content: $t }) { uuid } }", json!({ "c": chat, "t": "é".repeat(5000) })).await;
    assert!(r.get("errors").is_none(), "5,000 characters are fine: {r}");
    app.stop().await;
}

#[tokio::test]
async fn chats_open_on_finished_sessions_and_each_question_gets_a_stage() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let session = a.session().await;
    let r = app
        .graphql(
            "mutation ($s: ID!) { openChat(input: { sessionId: $s }) { uuid } }",
            json!({ "s": session }),
        )
        .await;
    assert_eq!(code(&r), "CONFLICT");
    assert!(
        message(&r).contains("is pending (chat work needs a finished session)"),
        "{r}"
    );
    let stage = a.stage(&session, 0, 1, None).await;
    let exec = a.execution(&stage, 1, "Agent").await;
    a.event(&exec, "COMPLETED").await;
    a.finish(&exec, "COMPLETED", None).await;
    a.ok(
        "mutation ($id: ID!) { completeSession(input: { id: $id }) { status } }",
        json!({ "id": session }),
    )
    .await;
    let chat = a.ok("mutation ($s: ID!) { openChat(input: { sessionId: $s, createdBy: \"alice\" }) { uuid createdBy } }", json!({ "s": session })).await;
    let chat = chat["openChat"]["uuid"].as_str().unwrap().to_owned();
    let posted = a.ok(
        "mutation ($c: ID!) { postChatMessage(input: { chatId: $c, content: \"Why so low?\", author: \"alice\", llmModel: \"gpt-4.1\" }) {
           content author stage { stageIndex name status chat { uuid } chatUserMessage { content }
             executions { uuid agentName status llmModel timeline(first: 5) { edges { node { eventType status content sequenceNumber } } } } } } }",
        json!({ "c": chat }),
    ).await;
    let st = &posted["postChatMessage"]["stage"];
    assert_eq!(st["stageIndex"], 1);
    assert_eq!(st["status"], "PENDING");
    assert_eq!(st["chat"]["uuid"], chat.as_str());
    assert_eq!(st["chatUserMessage"]["content"], "Why so low?");
    let e = &st["executions"][0];
    assert_eq!(
        (e["agentName"].as_str(), e["llmModel"].as_str()),
        (Some("ChatAgent"), Some("gpt-4.1"))
    );
    assert_eq!(
        e["timeline"]["edges"][0]["node"],
        json!({ "eventType": "USER_QUESTION", "status": "COMPLETED", "content": "Why so low?", "sequenceNumber": 2 })
    );
    // A second question waits for the first answer.
    let r = app.graphql("mutation ($c: ID!) { postChatMessage(input: { chatId: $c, content: \"And?\" }) { uuid } }", json!({ "c": chat })).await;
    assert_eq!(code(&r), "CONFLICT");
    // The answer runs in the finished session without changing its status.
    let answer = e["uuid"].as_str().unwrap();
    a.event(answer, "COMPLETED").await;
    a.finish(answer, "COMPLETED", None).await;
    let d = a.ok("query ($id: ID!) { session(id: $id) { status chatsConnection(first: 20) { edges { node { messages { stage { status } } } } } } }", json!({ "id": session })).await;
    assert_eq!(d["session"]["status"], "COMPLETED");
    assert_eq!(
        nodes(&d["session"]["chatsConnection"])[0]["messages"][0]["stage"]["status"],
        "COMPLETED"
    );
    let r = app.graphql("mutation ($c: ID!) { postChatMessage(input: { chatId: $c, content: \"And?\" }) { stage { stageIndex } } }", json!({ "c": chat })).await;
    assert_eq!(r["data"]["postChatMessage"]["stage"]["stageIndex"], 2);
    app.stop().await;
}

#[tokio::test]
async fn cancellation_waits_for_running_work_and_failure_ends_it() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let session = a.session().await;
    let stage = a.stage(&session, 0, 2, Some("ANY")).await;
    let running = a.execution(&stage, 1, "Running").await;
    let waiting = a.execution(&stage, 2, "Waiting").await;
    let (event, _) = a.event(&running, "STREAMING").await;
    a.append(&event, 0, "partial").await;
    let d = a.ok("mutation ($id: ID!) { requestSessionCancellation(id: $id) { status stages { status executions { agentName status } } } }", json!({ "id": session })).await;
    let s = &d["requestSessionCancellation"];
    assert_eq!(s["status"], "CANCELLING");
    assert_eq!(
        s["stages"][0]["executions"][1],
        json!({ "agentName": "Waiting", "status": "CANCELLED" })
    );
    // No new work while cancelling; running work may still report.
    let r = app.graphql("mutation ($s: ID!) { createStage(input: { sessionId: $s, stageIndex: 1, name: \"More\" }) { uuid } }", json!({ "s": session })).await;
    assert_eq!(code(&r), "CONFLICT");
    assert!(message(&r).contains("is cancelling"), "{r}");
    assert!(a.append(&event, 7, " text").await.get("errors").is_none());
    let d = a.finish(&running, "CANCELLED", Some("stopped")).await;
    assert_eq!(
        d["data"]["finishAgentExecution"]["stage"]["status"],
        "CANCELLED"
    );
    let d = a
        .ok(
            "query ($id: ID!) { session(id: $id) { status completedAt } }",
            json!({ "id": session }),
        )
        .await;
    assert_eq!(d["session"]["status"], "CANCELLED");
    assert!(d["session"]["completedAt"].is_string());
    // The streaming event ended with its execution, keeping what was streamed.
    assert_eq!(
        a.content(&event).await,
        ("partial text".to_owned(), "CANCELLED".to_owned())
    );
    let _ = waiting;

    // Failing a session ends what still runs with it.
    let session = a.session().await;
    let stage = a.stage(&session, 0, 1, None).await;
    let exec = a.execution(&stage, 1, "Agent").await;
    a.start(&exec).await;
    let d = a.ok("mutation ($id: ID!) { timeOutSession(input: { id: $id, errorMessage: \"deadline\" }) { status errorMessage stages { status executions { status errorMessage } } } }", json!({ "id": session })).await;
    let s = &d["timeOutSession"];
    assert_eq!(s["status"], "TIMED_OUT");
    assert_eq!(s["stages"][0]["status"], "TIMED_OUT");
    assert_eq!(
        s["stages"][0]["executions"][0]["errorMessage"],
        "session timed_out: deadline"
    );
    // A session with nothing running cancels at once; complete is refused while work runs.
    let quick = a.session().await;
    let d = a
        .ok(
            "mutation ($id: ID!) { requestSessionCancellation(id: $id) { status } }",
            json!({ "id": quick }),
        )
        .await;
    assert_eq!(d["requestSessionCancellation"]["status"], "CANCELLED");
    let busy = a.session().await;
    let stage = a.stage(&busy, 0, 1, None).await;
    let exec = a.execution(&stage, 1, "Busy").await;
    a.start(&exec).await;
    let r = app
        .graphql(
            "mutation ($id: ID!) { completeSession(input: { id: $id }) { status } }",
            json!({ "id": busy }),
        )
        .await;
    assert_eq!(code(&r), "CONFLICT");
    assert!(
        message(&r).contains("executions still running: Busy (active)"),
        "{r}"
    );
    // A stage expecting more agents than have finished is still active.
    let s = a.session().await;
    let st = a.stage(&s, 0, 3, Some("ALL")).await;
    let e1 = a.execution(&st, 1, "One").await;
    let d = a.finish(&e1, "COMPLETED", None).await;
    assert_eq!(
        d["data"]["finishAgentExecution"]["stage"]["status"],
        "ACTIVE"
    );
    app.stop().await;
}

#[tokio::test]
async fn sessions_soft_delete_and_restore() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let session = a.session().await;
    let r = app
        .graphql(
            "mutation ($id: ID!) { deleteSession(id: $id) { deletedAt } }",
            json!({ "id": session }),
        )
        .await;
    assert_eq!(
        code(&r),
        "CONFLICT",
        "a running session is cancelled before it is deleted"
    );
    a.ok(
        "mutation ($id: ID!) { requestSessionCancellation(id: $id) { status } }",
        json!({ "id": session }),
    )
    .await;
    let d = a
        .ok(
            "mutation ($id: ID!) { deleteSession(id: $id) { deletedAt } }",
            json!({ "id": session }),
        )
        .await;
    assert!(d["deleteSession"]["deletedAt"].is_string());
    let list = "{ sessions { totalCount } all: sessions(filter: { includeDeleted: true }) { totalCount } }";
    assert_eq!(
        a.ok(list, json!({})).await,
        json!({ "sessions": { "totalCount": 0 }, "all": { "totalCount": 1 } })
    );
    let r = app
        .graphql(
            "mutation ($s: ID!) { openChat(input: { sessionId: $s }) { uuid } }",
            json!({ "s": session }),
        )
        .await;
    assert_eq!(code(&r), "CONFLICT");
    assert!(message(&r).contains("is deleted"), "{r}");
    let d = a
        .ok(
            "mutation ($id: ID!) { restoreSession(id: $id) { deletedAt } }",
            json!({ "id": session }),
        )
        .await;
    assert!(d["restoreSession"]["deletedAt"].is_null());
    assert_eq!(
        a.ok(list, json!({})).await,
        json!({ "sessions": { "totalCount": 1 }, "all": { "totalCount": 1 } })
    );
    app.stop().await;
}

/// Costs are kept and summed as decimals: 0.1 + 0.2 is 0.3, not 0.30000000000000004.
#[tokio::test]
async fn cost_roll_ups_have_no_floating_point_noise() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let (session, exec) = crate::live::running_execution(&a).await;
    for cost in [0.1, 0.2, 0.01, 0.03, 0.000_000_000_04] {
        a.ok(
            "mutation ($e: ID!, $c: Float!) { recordLLMInteraction(input: { executionId: $e,
               interactionType: ITERATION, modelName: \"m\", estimatedCostUsd: $c,
               llmRequest: {}, llmResponse: {} }) { estimatedCostUsd } }",
            json!({ "e": exec, "c": cost }),
        )
        .await;
    }
    // A retried record (same id, same input) answers with the stored row, cost included.
    let id = uuid::Uuid::now_v7();
    let record = "mutation ($id: UUID!, $e: ID!) { recordLLMInteraction(input: { id: $id,
        executionId: $e, interactionType: ITERATION, modelName: \"m\", estimatedCostUsd: 0.005,
        llmRequest: {}, llmResponse: {} }) { uuid estimatedCostUsd } }";
    let first = a.ok(record, json!({ "id": id, "e": exec })).await;
    let again = a.ok(record, json!({ "id": id, "e": exec })).await;
    assert_eq!(first, again);
    assert_eq!(
        again["recordLLMInteraction"]["estimatedCostUsd"],
        json!(0.005)
    );

    let data = a
        .ok(
            "query ($s: ID!) { session(id: $s) { tokenUsage { estimatedCostUsd }
               llmInteractionsConnection(first: 20) { edges { node { estimatedCostUsd } } } } }",
            json!({ "s": session }),
        )
        .await;
    // The last one is below the stored precision (1e-10): it rounds to 0.
    assert_eq!(
        data["session"]["tokenUsage"]["estimatedCostUsd"],
        json!(0.345),
        "{data}"
    );
    let each: Vec<Value> = nodes(&data["session"]["llmInteractionsConnection"])
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["estimatedCostUsd"].clone())
        .collect();
    assert_eq!(
        each,
        [
            json!(0.1),
            json!(0.2),
            json!(0.01),
            json!(0.03),
            json!(0.0),
            json!(0.005)
        ]
    );
    app.stop().await;
}
