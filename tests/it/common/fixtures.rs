//! Rows written straight into the database, so read-side tests control exactly what exists.

use chrono::{DateTime, Duration, Utc};
use sqlx::PgPool;
use uuid::Uuid;

pub struct NewSession {
    pub alert_type: &'static str,
    pub chain_id: &'static str,
    pub status: &'static str,
    pub author: Option<&'static str>,
    pub final_analysis: Option<&'static str>,
    pub created_at: DateTime<Utc>,
    /// Seconds from start to completion (sets started_at and completed_at).
    pub duration_secs: Option<i64>,
    pub deleted: bool,
}

impl Default for NewSession {
    fn default() -> Self {
        Self {
            alert_type: "PodCrashLooping",
            chain_id: "kubernetes-investigation",
            status: "pending",
            author: None,
            final_analysis: None,
            created_at: Utc::now(),
            duration_secs: None,
            deleted: false,
        }
    }
}

pub async fn session(pool: &PgPool, s: NewSession) -> Uuid {
    let id = Uuid::now_v7();
    let started = s.duration_secs.map(|_| s.created_at + Duration::seconds(1));
    let completed = s
        .duration_secs
        .map(|d| s.created_at + Duration::seconds(1 + d));
    sqlx::query(
        "INSERT INTO sessions (id, alert_type, alert_data, status, chain_id, author, final_analysis, \
         started_at, completed_at, created_at, updated_at, deleted_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11)",
    )
    .bind(id)
    .bind(s.alert_type)
    .bind(serde_json::json!({ "namespace": "payments", "pod": "api-7d9f" }))
    .bind(s.status)
    .bind(s.chain_id)
    .bind(s.author)
    .bind(s.final_analysis)
    .bind(started)
    .bind(completed)
    .bind(s.created_at)
    .bind(s.deleted.then(Utc::now))
    .execute(pool)
    .await
    .unwrap();
    id
}

pub async fn stage(pool: &PgPool, session: Uuid, index: i32, name: &str, agents: i32) -> Uuid {
    let id = Uuid::now_v7();
    let (parallel, policy) = if agents > 1 {
        (Some("multi_agent"), Some("all"))
    } else {
        (None, None)
    };
    sqlx::query(
        "INSERT INTO stages (id, session_id, stage_name, stage_index, expected_agent_count, \
         parallel_type, success_policy, status) VALUES ($1, $2, $3, $4, $5, $6, $7, 'completed')",
    )
    .bind(id)
    .bind(session)
    .bind(name)
    .bind(index)
    .bind(agents)
    .bind(parallel)
    .bind(policy)
    .execute(pool)
    .await
    .unwrap();
    id
}

pub async fn execution(
    pool: &PgPool,
    session: Uuid,
    stage: Uuid,
    index: i32,
    name: &str,
    parent: Option<Uuid>,
) -> Uuid {
    let id = Uuid::now_v7();
    sqlx::query(
        "INSERT INTO agent_executions (id, stage_id, session_id, parent_execution_id, agent_name, \
         agent_index, status, iteration_strategy, llm_provider, llm_model) \
         VALUES ($1, $2, $3, $4, $5, $6, 'completed', 'react', 'google', 'gemini-2.5-pro')",
    )
    .bind(id)
    .bind(stage)
    .bind(session)
    .bind(parent)
    .bind(name)
    .bind(index)
    .execute(pool)
    .await
    .unwrap();
    id
}

/// Where a child row hangs: (session, stage, execution).
#[derive(Clone, Copy)]
pub struct At {
    pub session: Uuid,
    pub stage: Uuid,
    pub execution: Uuid,
}

pub async fn event(pool: &PgPool, at: At, seq: i64, event_type: &str, content: &str) -> Uuid {
    let id = Uuid::now_v7();
    sqlx::query(
        "INSERT INTO timeline_events (id, session_id, stage_id, execution_id, sequence_number, \
         event_type, status, content, metadata) VALUES ($1, $2, $3, $4, $5, $6, 'completed', $7, $8)",
    )
    .bind(id)
    .bind(at.session)
    .bind(at.stage)
    .bind(at.execution)
    .bind(seq)
    .bind(event_type)
    .bind(content)
    .bind(serde_json::json!({ "source": "fixture" }))
    .execute(pool)
    .await
    .unwrap();
    id
}

/// Names the tool call an event shows, as its metadata's `tool_call_id`.
pub async fn show_call(pool: &PgPool, event: Uuid, call: &str) {
    sqlx::query(
        "UPDATE timeline_events SET metadata = metadata || jsonb_build_object('tool_call_id', $2::text) \
         WHERE id = $1",
    )
    .bind(event)
    .bind(call)
    .execute(pool)
    .await
    .unwrap();
}

pub async fn link_event(pool: &PgPool, event: Uuid, llm: Option<Uuid>, mcp: Option<Uuid>) {
    sqlx::query(
        "UPDATE timeline_events SET llm_interaction_id = $2, mcp_interaction_id = $3 WHERE id = $1",
    )
    .bind(event)
    .bind(llm)
    .bind(mcp)
    .execute(pool)
    .await
    .unwrap();
}

/// A message; an assistant message requests one tool call, `call_{seq + 1}`, which a tool
/// message next in the conversation answers (`call_{seq}`).
pub async fn message(pool: &PgPool, at: At, seq: i32, role: &str, content: &str) -> Uuid {
    let id = Uuid::now_v7();
    let tool_call_id = (role == "tool").then(|| format!("call_{seq}"));
    let requested = (role == "assistant").then(|| format!("call_{}", seq + 1));
    let tool_calls = requested.as_ref().map(|call| {
        serde_json::json!([{ "id": call, "type": "function",
            "function": { "name": "kubectl_get_pods", "arguments": "{\"namespace\":\"payments\"}" } }])
    });
    sqlx::query(
        "INSERT INTO messages (id, session_id, stage_id, execution_id, sequence_number, role, \
         content, tool_call_id, tool_name, tool_calls) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(id)
    .bind(at.session)
    .bind(at.stage)
    .bind(at.execution)
    .bind(seq)
    .bind(role)
    .bind(content)
    .bind(&tool_call_id)
    .bind(tool_call_id.as_ref().map(|_| "kubectl_get_pods"))
    .bind(&tool_calls)
    .execute(pool)
    .await
    .unwrap();
    if let Some(call) = requested {
        sqlx::query(
            "INSERT INTO tool_calls (execution_id, call_id, session_id, message_id, position) \
             VALUES ($1, $2, $3, $4, 0)",
        )
        .bind(at.execution)
        .bind(call)
        .bind(at.session)
        .bind(id)
        .execute(pool)
        .await
        .unwrap();
    }
    id
}

pub async fn llm(
    pool: &PgPool,
    at: At,
    last_message: Option<Uuid>,
    input: i32,
    output: i32,
    cost: f64,
) -> Uuid {
    let id = Uuid::now_v7();
    sqlx::query(
        "INSERT INTO llm_interactions (id, session_id, stage_id, execution_id, interaction_type, \
         model_name, last_message_id, llm_request, llm_response, input_tokens, output_tokens, \
         total_tokens, thinking_tokens, estimated_cost_usd, duration_ms) \
         VALUES ($1, $2, $3, $4, 'iteration', 'gemini-2.5-pro', $5, '{\"messages\": []}', \
         '{\"text\": \"ok\"}', $6, $7, $6 + $7, 10, $8, 1200)",
    )
    .bind(id)
    .bind(at.session)
    .bind(at.stage)
    .bind(at.execution)
    .bind(last_message)
    .bind(input)
    .bind(output)
    .bind(cost)
    .execute(pool)
    .await
    .unwrap();
    id
}

/// An MCP tool call, executing the requested call `call` when given.
pub async fn mcp(pool: &PgPool, at: At, tool: &str, call: Option<&str>) -> Uuid {
    let id = Uuid::now_v7();
    sqlx::query(
        "INSERT INTO mcp_interactions (id, session_id, stage_id, execution_id, interaction_type, \
         server_name, tool_name, tool_arguments, tool_result, duration_ms, tool_call_id) \
         VALUES ($1, $2, $3, $4, 'tool_call', 'kubernetes', $5, '{\"namespace\": \"payments\"}', \
         '{\"pods\": 3}', 80, $6)",
    )
    .bind(id)
    .bind(at.session)
    .bind(at.stage)
    .bind(at.execution)
    .bind(tool)
    .bind(call)
    .execute(pool)
    .await
    .unwrap();
    id
}

/// A chat with one question, answered by a chat stage with one execution. Returns
/// (chat, question, stage).
pub async fn chat(
    pool: &PgPool,
    session: Uuid,
    stage_index: i32,
    question: &str,
) -> (Uuid, Uuid, Uuid) {
    let chat = Uuid::now_v7();
    let question_id = Uuid::now_v7();
    let stage_id = Uuid::now_v7();
    sqlx::query("INSERT INTO chats (id, session_id, created_by) VALUES ($1, $2, 'alice')")
        .bind(chat)
        .bind(session)
        .execute(pool)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO chat_user_messages (id, chat_id, session_id, content, author) \
         VALUES ($1, $2, $3, $4, 'alice')",
    )
    .bind(question_id)
    .bind(chat)
    .bind(session)
    .bind(question)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO stages (id, session_id, stage_name, stage_index, expected_agent_count, status, \
         chat_id, chat_user_message_id) VALUES ($1, $2, 'Chat', $3, 1, 'completed', $4, $5)",
    )
    .bind(stage_id)
    .bind(session)
    .bind(stage_index)
    .bind(chat)
    .bind(question_id)
    .execute(pool)
    .await
    .unwrap();
    (chat, question_id, stage_id)
}

/// A notification of `session` (of type `kind`) with `status` (`pending` due now, else done
/// with), as a worker would have left it. Returns its id.
pub async fn notification(pool: &PgPool, session: Uuid, kind: &str, status: &str) -> Uuid {
    let id = Uuid::now_v7();
    sqlx::query(
        "INSERT INTO notifications (session_id, id, type, destination, status, max_attempts, \
             attempts, next_attempt_at, failed_at) \
         VALUES ($1, $2, $3, '#alerts', $4, 1, CASE WHEN $4 = 'pending' THEN 0 ELSE 1 END, \
             CASE WHEN $4 IN ('pending', 'sending') THEN now() END, \
             CASE WHEN $4 = 'failed' THEN now() END)",
    )
    .bind(session)
    .bind(id)
    .bind(kind)
    .bind(status)
    .execute(pool)
    .await
    .unwrap();
    id
}

/// A full investigation: `stages` stages; stage 1 runs three agents in parallel and stage 0 an
/// orchestrator with two sub-agents; every execution has a conversation of 4 messages, 2 LLM
/// interactions (the second sent all 4 messages), 1 MCP interaction and 2 timeline events;
/// plus a chat. Returns the session id.
pub async fn investigation(pool: &PgPool, created_at: DateTime<Utc>) -> Uuid {
    let session = session(
        pool,
        NewSession {
            status: "completed",
            author: Some("alertmanager"),
            final_analysis: Some("OOMKilled: memory limit too low"),
            created_at,
            duration_secs: Some(90),
            ..NewSession::default()
        },
    )
    .await;
    let mut seq = 0;
    for (index, (name, agents)) in [
        ("Initial Analysis", 1),
        ("Deep Dive", 3),
        ("Recommendations", 1),
    ]
    .into_iter()
    .enumerate()
    {
        let stage_id = stage(pool, session, index as i32, name, agents).await;
        let mut executions = Vec::new();
        for agent in 1..=agents {
            executions.push(
                execution(
                    pool,
                    session,
                    stage_id,
                    agent,
                    &format!("Agent{agent}"),
                    None,
                )
                .await,
            );
        }
        if index == 0 {
            let orchestrator = executions[0];
            for sub in 2..=3 {
                executions.push(
                    execution(
                        pool,
                        session,
                        stage_id,
                        sub,
                        &format!("SubAgent{sub}"),
                        Some(orchestrator),
                    )
                    .await,
                );
            }
        }
        for execution in executions {
            let at = At {
                session,
                stage: stage_id,
                execution,
            };
            let mut last = None;
            for (i, role) in ["system", "user", "assistant", "tool"]
                .into_iter()
                .enumerate()
            {
                last =
                    Some(message(pool, at, i as i32 + 1, role, &format!("{role} says {i}")).await);
            }
            let first_llm = llm(pool, at, None, 100, 20, 0.001).await;
            let second_llm = llm(pool, at, last, 400, 80, 0.004).await;
            // The assistant message (3) requested `call_4`, which the tool message answers.
            let tool = mcp(pool, at, "kubectl_get_pods", Some("call_4")).await;
            seq += 1;
            let thinking = event(pool, at, seq, "llm_thinking", "Looking at the pods").await;
            link_event(pool, thinking, Some(first_llm), None).await;
            seq += 1;
            let call = event(pool, at, seq, "mcp_tool_call", "kubectl get pods").await;
            link_event(pool, call, Some(second_llm), Some(tool)).await;
            show_call(pool, call, "call_4").await;
        }
    }
    chat(pool, session, 3, "Why was the limit so low?").await;
    session
}
