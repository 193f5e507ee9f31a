//! Demo data: eight investigation sessions, one in every status, that between them use every
//! table, status and type of the data model, with plausible Kubernetes / Argo CD / Prometheus
//! content (`casefile demo`, `casefile serve --demo`).
//!
//! A [`Demo`] first builds the rows in memory while it plays a clock forward, so timestamps,
//! durations, token counts, costs and stage outcomes follow from what the scenario does instead
//! of being typed in by hand. [`Demo::write`] then inserts them in one transaction. Ids are
//! UUIDv7 built from that fixed clock and a hash of a stable label, and every insert is
//! `ON CONFLICT (id) DO NOTHING`, so loading twice writes nothing the second time.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{Value as Json, json};
use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use sqlx::{Postgres, Transaction};
use uuid::{Builder, Uuid};

use crate::error::Result;
use crate::model::{
    ExecutionStatus, LlmInteractionType, McpInteractionType, MessageRole, ParallelType,
    SessionStatus, StageStatus, SuccessPolicy, TimelineEventStatus, TimelineEventType,
};
use crate::store::{
    ChatRow, ChatUserMessageRow, ExecutionRow, LlmInteractionRow, McpInteractionRow, MessageRow,
    SessionRow, StageRow, Store, TimelineEventRow,
};

use LlmInteractionType as Llm;
use TimelineEventType as Kind;

/// Loads the demo sessions (idempotent) and says what it wrote.
pub async fn load(store: &Store) -> Result<String> {
    let mut demo = Demo::default();
    crash_loop_with_chat(&mut demo);
    latency_orchestrated(&mut demo);
    oom_failed(&mut demo);
    backup_cancelled(&mut demo);
    disk_timed_out(&mut demo);
    ingress_cancelling(&mut demo);
    rollout_in_progress(&mut demo);
    node_pending(&mut demo);
    demo.write(store).await
}

// ---------------------------------------------------------------------------------------------
// Deterministic ids and time
// ---------------------------------------------------------------------------------------------

/// The demo's day: 2026-11-20T08:00:00Z. Every timestamp is an offset from it.
const BASE: DateTime<Utc> = DateTime::from_timestamp_nanos(1_795_161_600_000_000_000);

/// 64-bit FNV-1a: small, stable across Rust versions (unlike `DefaultHasher`).
fn fnv1a(seed: u64, text: &str) -> u64 {
    text.bytes().fold(seed, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// A UUIDv7 that sorts by `at` like a live one, but whose "random" bits are a hash of `label`,
/// so the same label at the same instant always gives the same id.
fn demo_id(label: &str, at: DateTime<Utc>) -> Uuid {
    let high = fnv1a(FNV_OFFSET, label);
    let low = fnv1a(high, label);
    let mut bytes = [0u8; 10];
    bytes[..8].copy_from_slice(&high.to_be_bytes());
    bytes[8..].copy_from_slice(&low.to_be_bytes()[..2]);
    Builder::from_unix_timestamp_millis(at.timestamp_millis().unsigned_abs(), &bytes).into_uuid()
}

fn millis_between(from: DateTime<Utc>, to: DateTime<Utc>) -> i64 {
    (to - from).num_milliseconds()
}

/// Rough token count of a text (about four characters per token).
fn tokens(chars: usize) -> i32 {
    i32::try_from(chars / 4).unwrap_or(i32::MAX)
}

// ---------------------------------------------------------------------------------------------
// Models, agents and MCP servers
// ---------------------------------------------------------------------------------------------

/// An LLM as the demo uses it; prices are USD per million tokens (thinking bills as output).
struct Model {
    name: &'static str,
    provider: &'static str,
    strategy: &'static str,
    input_price: f64,
    output_price: f64,
}

const GEMINI_PRO: Model = Model {
    name: "gemini-2.5-pro",
    provider: "google",
    strategy: "native_thinking",
    input_price: 1.25,
    output_price: 10.0,
};
const GEMINI_FLASH: Model = Model {
    name: "gemini-2.5-flash",
    provider: "google",
    strategy: "native_thinking",
    input_price: 0.30,
    output_price: 2.50,
};
const GPT_41: Model = Model {
    name: "gpt-4.1",
    provider: "openai",
    strategy: "react",
    input_price: 2.0,
    output_price: 8.0,
};
const CLAUDE_SONNET: Model = Model {
    name: "claude-sonnet-4",
    provider: "anthropic",
    strategy: "react",
    input_price: 3.0,
    output_price: 15.0,
};

/// A configured agent: its model, the MCP servers it may use, other functions it may call,
/// and its system prompt.
struct Profile {
    name: &'static str,
    model: &'static Model,
    servers: &'static [&'static str],
    functions: &'static [&'static str],
    prompt: &'static str,
}

impl Profile {
    /// The function names the model is offered (`server__tool` for MCP tools).
    fn tools(&self) -> Vec<String> {
        let mcp = TOOLS
            .iter()
            .filter(|(server, _, _)| self.servers.contains(server))
            .map(|(server, tool, _)| format!("{server}__{tool}"));
        mcp.chain(self.functions.iter().map(|f| f.to_string()))
            .collect()
    }
}

const KUBERNETES_AGENT: Profile = Profile {
    name: "KubernetesAgent",
    model: &GEMINI_PRO,
    servers: &["kubernetes"],
    functions: &[],
    prompt: "You are KubernetesAgent, an SRE assistant that investigates alerts in Kubernetes \
             clusters. Use the kubernetes tools to inspect pods, events and resources; never \
             change cluster state. Finish with a concise analysis: root cause, evidence, next \
             steps.",
};
const ARGOCD_AGENT: Profile = Profile {
    name: "ArgoCDAgent",
    model: &GPT_41,
    servers: &["argocd"],
    functions: &[],
    prompt: "You are ArgoCDAgent. Find out how Argo CD deployed the affected application: sync \
             status, health, history and recent operations. Do not sync or roll back anything \
             yourself.",
};
const PROMETHEUS_AGENT: Profile = Profile {
    name: "PrometheusAgent",
    model: &GEMINI_FLASH,
    servers: &["prometheus"],
    functions: &[],
    prompt: "You are PrometheusAgent. Use PromQL to quantify the problem: when it started, how \
             large it is and what it correlates with. Quote the queries you used.",
};
const REMEDIATION_AGENT: Profile = Profile {
    name: "RemediationAgent",
    model: &CLAUDE_SONNET,
    servers: &[],
    functions: &[],
    prompt: "You are RemediationAgent. You receive the findings of the previous investigation \
             stages and turn them into a root cause statement and a short, ordered remediation \
             plan an on-call engineer can follow.",
};
const ORCHESTRATOR_AGENT: Profile = Profile {
    name: "OrchestratorAgent",
    model: &CLAUDE_SONNET,
    servers: &[],
    functions: &["dispatch_agent"],
    prompt: "You are OrchestratorAgent. Split the investigation into focused tasks, hand them to \
             specialist agents with dispatch_agent, and combine their findings into one \
             analysis.",
};
const LOG_AGENT: Profile = Profile {
    name: "LogAnalysisAgent",
    model: &GEMINI_FLASH,
    servers: &["kubernetes"],
    functions: &[],
    prompt: "You are LogAnalysisAgent. Read container logs, group the errors by signature and \
             report which of them explain the alert.",
};
const CHAT_AGENT: Profile = Profile {
    name: "ChatAgent",
    model: &GEMINI_PRO,
    servers: &["kubernetes", "argocd"],
    functions: &[],
    prompt: "You are ChatAgent. Answer follow-up questions about a finished investigation. Use \
             the tools when the answer depends on the current state of the cluster or of Argo \
             CD.",
};

/// What each MCP server lists: (server, tool, description).
#[rustfmt::skip]
const TOOLS: &[(&str, &str, &str)] = &[
    ("kubernetes", "pods_list_in_namespace", "List the pods of a namespace"),
    ("kubernetes", "pods_get", "Get a pod's manifest and status"),
    ("kubernetes", "pods_log", "Get the logs of a pod's container"),
    ("kubernetes", "pods_top", "Show CPU and memory usage of pods"),
    ("kubernetes", "events_list", "List Kubernetes events"),
    ("kubernetes", "resources_get", "Get a resource by apiVersion, kind, namespace and name"),
    ("argocd", "list_applications", "List Argo CD applications"),
    ("argocd", "get_application", "Get an application's spec, sync status, health and history"),
    ("argocd", "get_application_events", "List the events of an application"),
    ("argocd", "get_application_manifests", "Render an application's manifests at a revision"),
    ("prometheus", "execute_query", "Run an instant PromQL query"),
    ("prometheus", "execute_range_query", "Run a PromQL range query"),
    ("prometheus", "list_metrics", "List metric names"),
    ("prometheus", "get_targets", "List scrape targets and their health"),
];

const SUMMARY_PROMPT: &str = "Summarize the investigation for the on-call engineer in at most \
                              three sentences: what is broken, why, and the first action.";

// ---------------------------------------------------------------------------------------------
// The builder
// ---------------------------------------------------------------------------------------------

/// What a scenario says about the alert that opens a session.
struct Alert {
    key: &'static str,
    alert_type: &'static str,
    chain_id: &'static str,
    runbook_url: &'static str,
    data: Json,
}

/// How many agents a stage runs.
enum Agents {
    One,
    Parallel(ParallelType, SuccessPolicy, i32),
}

/// What a session ended with.
#[derive(Default)]
struct Outcome {
    final_analysis: Option<&'static str>,
    executive_summary: Option<&'static str>,
    error: Option<String>,
}

#[derive(Clone, Copy)]
struct Session {
    idx: usize,
    id: Uuid,
}

#[derive(Clone, Copy)]
struct Stage {
    idx: usize,
    id: Uuid,
    session: Uuid,
}

#[derive(Clone, Copy)]
struct Agent {
    idx: usize,
    id: Uuid,
    stage: Uuid,
    session: Uuid,
    profile: &'static Profile,
}

/// One message of an execution's LLM conversation.
enum Msg<'a> {
    System(&'a str),
    User(&'a str),
    Assistant(&'a str, Option<Json>),
    Tool {
        call_id: &'a str,
        function: &'a str,
        content: &'a str,
    },
}

/// What an MCP tool call came back with.
#[derive(Clone, Copy)]
enum Output<'a> {
    Text(&'a str),
    Error(&'a str),
    Cancelled,
}

/// One ReAct step: the model (maybe thinking or saying something) asks for one MCP tool call,
/// the tool runs, and its result (or a summary of it) goes back into the conversation.
struct Step<'a> {
    thinking: Option<&'a str>,
    say: Option<&'a str>,
    server: &'a str,
    tool: &'a str,
    args: Json,
    output: Output<'a>,
    summary: Option<&'a str>,
}

impl<'a> Step<'a> {
    /// A call of `tool` on `server`. Until [`Self::returns`] or [`Self::fails`] says how it
    /// ended, it never comes back: the session is cancelled while it runs.
    fn call(server: &'a str, tool: &'a str, args: Json) -> Self {
        Self {
            thinking: None,
            say: None,
            server,
            tool,
            args,
            output: Output::Cancelled,
            summary: None,
        }
    }
    fn returns(self, text: &'a str) -> Self {
        Self {
            output: Output::Text(text),
            ..self
        }
    }
    fn fails(self, error: &'a str) -> Self {
        Self {
            output: Output::Error(error),
            ..self
        }
    }
    fn thinking(self, text: &'a str) -> Self {
        Self {
            thinking: Some(text),
            ..self
        }
    }
    fn say(self, text: &'a str) -> Self {
        Self {
            say: Some(text),
            ..self
        }
    }
    /// The result was long: the agent summarized it and sent the summary to the model.
    fn summary(self, text: &'a str) -> Self {
        Self {
            summary: Some(text),
            ..self
        }
    }
}

/// A timeline event about to be written; it is created `since` and last updated now.
struct Event {
    kind: TimelineEventType,
    status: TimelineEventStatus,
    content: String,
    metadata: Json,
    llm: Option<Uuid>,
    mcp: Option<Uuid>,
    since: DateTime<Utc>,
}

impl Event {
    fn new(kind: TimelineEventType, content: impl Into<String>, since: DateTime<Utc>) -> Self {
        Self {
            kind,
            status: TimelineEventStatus::Completed,
            content: content.into(),
            metadata: json!({}),
            llm: None,
            mcp: None,
            since,
        }
    }
    fn status(self, status: TimelineEventStatus) -> Self {
        Self { status, ..self }
    }
    fn meta(self, metadata: Json) -> Self {
        Self { metadata, ..self }
    }
    fn llm(self, id: Uuid) -> Self {
        Self {
            llm: Some(id),
            ..self
        }
    }
    fn mcp(self, id: Uuid) -> Self {
        Self {
            mcp: Some(id),
            ..self
        }
    }
}

/// The rows of all scenarios, in the order they were created (which is also a valid insert
/// order within each table), plus the clock and per-parent counters that derive them.
#[derive(Default)]
struct Demo {
    now: DateTime<Utc>,
    /// Next ordinal of a kind of child under a parent: stage index, sequence numbers, ...
    ordinals: HashMap<(Uuid, &'static str), i32>,
    sessions: Vec<SessionRow>,
    chats: Vec<ChatRow>,
    chat_messages: Vec<ChatUserMessageRow>,
    stages: Vec<StageRow>,
    executions: Vec<ExecutionRow>,
    messages: Vec<MessageRow>,
    llm: Vec<LlmInteractionRow>,
    mcp: Vec<McpInteractionRow>,
    events: Vec<TimelineEventRow>,
}

impl Demo {
    fn wait(&mut self, ms: i64) {
        self.now += TimeDelta::milliseconds(ms);
    }

    /// The next 1-based ordinal of `kind` under `parent`.
    fn next(&mut self, parent: Uuid, kind: &'static str) -> i32 {
        let n = self.ordinals.entry((parent, kind)).or_default();
        *n += 1;
        *n
    }

    /// The id of the `n`-th `kind` under `parent`, created `at`.
    fn child_id(parent: Uuid, kind: &str, n: i32, at: DateTime<Utc>) -> Uuid {
        demo_id(&format!("{parent}/{kind}/{n}"), at)
    }

    // --- sessions, chats, stages, executions ---------------------------------------------

    /// A session created `minutes` after [`BASE`] for an alert; it starts out pending.
    fn session(&mut self, minutes: i64, alert: Alert) -> Session {
        self.now = BASE + TimeDelta::minutes(minutes);
        let id = demo_id(&format!("demo/{}", alert.key), self.now);
        self.sessions.push(SessionRow {
            id,
            alert_type: alert.alert_type.into(),
            alert_data: alert.data,
            status: SessionStatus::Pending,
            chain_id: alert.chain_id.into(),
            author: Some("alertmanager".into()),
            runbook_url: Some(alert.runbook_url.into()),
            final_analysis: None,
            executive_summary: None,
            error_message: None,
            started_at: None,
            completed_at: None,
            created_at: self.now,
            updated_at: self.now,
            deleted_at: None,
            duration_ms: None,
        });
        Session {
            idx: self.sessions.len() - 1,
            id,
        }
    }

    /// The worker picks the session up a moment after the alert arrived.
    fn start(&mut self, s: Session) {
        self.wait(1_800);
        let row = &mut self.sessions[s.idx];
        row.status = SessionStatus::InProgress;
        row.started_at = Some(self.now);
        row.updated_at = self.now;
    }

    /// Records where a session stands; terminal statuses also get `completed_at`.
    fn settle(&mut self, s: Session, status: SessionStatus, outcome: Outcome) {
        self.wait(400);
        let row = &mut self.sessions[s.idx];
        row.status = status;
        row.final_analysis = outcome.final_analysis.map(Into::into);
        row.executive_summary = outcome.executive_summary.map(Into::into);
        row.error_message = outcome.error;
        row.updated_at = self.now;
        if status != SessionStatus::InProgress && status != SessionStatus::Cancelling {
            row.completed_at = Some(self.now);
        }
    }

    fn stage(&mut self, s: Session, name: &str, agents: Agents) -> Stage {
        let n = self.next(s.id, "stage");
        let id = Self::child_id(s.id, "stage", n, self.now);
        let (expected, parallel_type, success_policy) = match agents {
            Agents::One => (1, None, None),
            Agents::Parallel(kind, policy, count) => (count, Some(kind), Some(policy)),
        };
        self.stages.push(StageRow {
            id,
            session_id: s.id,
            stage_name: name.into(),
            stage_index: n - 1,
            expected_agent_count: expected,
            parallel_type,
            success_policy,
            status: StageStatus::Active,
            started_at: Some(self.now),
            completed_at: None,
            duration_ms: None,
            error_message: None,
            chat_id: None,
            chat_user_message_id: None,
            created_at: self.now,
            updated_at: self.now,
        });
        Stage {
            idx: self.stages.len() - 1,
            id,
            session: s.id,
        }
    }

    /// Ends a stage with the status its agents add up to under its success policy (see the
    /// design: all completed, or any completed under `any`; all timed out or all cancelled
    /// keep that status; anything else failed). The error names the agents that fell short;
    /// it is returned so a failing session can quote it.
    fn end_stage(&mut self, st: Stage) -> Option<String> {
        self.wait(150);
        let row = &self.stages[st.idx];
        let (policy, policy_name) = match row.success_policy {
            Some(SuccessPolicy::Any) => (SuccessPolicy::Any, "any"),
            _ => (SuccessPolicy::All, "all"),
        };
        let agents: Vec<&ExecutionRow> = self
            .executions
            .iter()
            .filter(|e| e.stage_id == st.id && e.parent_execution_id.is_none())
            .collect();
        let all = |status| agents.iter().all(|e| e.status == status);
        let any_completed = agents
            .iter()
            .any(|e| e.status == ExecutionStatus::Completed);
        let status =
            if all(ExecutionStatus::Completed) || (policy == SuccessPolicy::Any && any_completed) {
                StageStatus::Completed
            } else if all(ExecutionStatus::TimedOut) {
                StageStatus::TimedOut
            } else if all(ExecutionStatus::Cancelled) {
                StageStatus::Cancelled
            } else {
                StageStatus::Failed
            };
        let error = (status != StageStatus::Completed).then(|| {
            let failures: Vec<String> = agents
                .iter()
                .filter(|e| e.status != ExecutionStatus::Completed)
                .map(|e| {
                    let verb = match e.status {
                        ExecutionStatus::TimedOut => "timed out",
                        ExecutionStatus::Cancelled => "was cancelled",
                        _ => "failed",
                    };
                    let reason = e.error_message.as_deref().unwrap_or("no error recorded");
                    format!("{} {verb}: {reason}", e.agent_name)
                })
                .collect();
            if agents.len() == 1 {
                failures.join("; ")
            } else {
                format!(
                    "{} of {} agents did not succeed (success policy: {policy_name}): {}",
                    failures.len(),
                    agents.len(),
                    failures.join("; ")
                )
            }
        });
        let now = self.now;
        let row = &mut self.stages[st.idx];
        row.status = status;
        row.completed_at = Some(now);
        row.duration_ms = row.started_at.map(|started| millis_between(started, now));
        row.error_message = error.clone();
        row.updated_at = now;
        error
    }

    fn chat(&mut self, s: Session, created_by: &str) -> Uuid {
        let n = self.next(s.id, "chat");
        let id = Self::child_id(s.id, "chat", n, self.now);
        self.chats.push(ChatRow {
            id,
            session_id: s.id,
            created_by: Some(created_by.into()),
            created_at: self.now,
            updated_at: self.now,
        });
        id
    }

    /// A question asked in a chat: its stage starts a chat agent, whose timeline opens with
    /// the question.
    fn chat_question(
        &mut self,
        s: Session,
        chat: Uuid,
        author: &str,
        content: &str,
    ) -> (Stage, Agent) {
        let n = self.next(chat, "question");
        let question = Self::child_id(chat, "question", n, self.now);
        self.chat_messages.push(ChatUserMessageRow {
            id: question,
            chat_id: chat,
            session_id: s.id,
            content: content.into(),
            author: Some(author.into()),
            created_at: self.now,
        });
        let asked = self.now;
        self.wait(600);
        let st = self.stage(s, "Chat Response", Agents::One);
        let row = &mut self.stages[st.idx];
        row.chat_id = Some(chat);
        row.chat_user_message_id = Some(question);
        let agent = self.agent(st, &CHAT_AGENT, None);
        let meta = json!({ "author": author, "chat_id": chat, "chat_user_message_id": question });
        self.event(
            agent,
            Event::new(Kind::UserQuestion, content, asked).meta(meta),
        );
        (st, agent)
    }

    /// An agent execution in a stage; `parent` makes it a sub-agent of an orchestrator.
    fn agent(&mut self, st: Stage, profile: &'static Profile, parent: Option<Agent>) -> Agent {
        let index = self.next(st.id, "agent");
        let id = Self::child_id(st.id, "agent", index, self.now);
        self.executions.push(ExecutionRow {
            id,
            stage_id: st.id,
            session_id: st.session,
            parent_execution_id: parent.map(|p| p.id),
            agent_name: profile.name.into(),
            agent_index: index,
            status: ExecutionStatus::Active,
            started_at: Some(self.now),
            completed_at: None,
            duration_ms: None,
            error_message: None,
            iteration_strategy: profile.model.strategy.into(),
            llm_provider: Some(profile.model.provider.into()),
            llm_model: Some(profile.model.name.into()),
            created_at: self.now,
            updated_at: self.now,
        });
        Agent {
            idx: self.executions.len() - 1,
            id,
            stage: st.id,
            session: st.session,
            profile,
        }
    }

    fn end_agent(&mut self, a: Agent, status: ExecutionStatus, error: Option<&str>) {
        self.wait(120);
        let now = self.now;
        let row = &mut self.executions[a.idx];
        row.status = status;
        row.completed_at = Some(now);
        row.duration_ms = row.started_at.map(|started| millis_between(started, now));
        row.error_message = error.map(Into::into);
        row.updated_at = now;
    }

    // --- the five layers -----------------------------------------------------------------

    fn message(&mut self, a: Agent, msg: Msg<'_>) {
        let n = self.next(a.id, "message");
        let id = Self::child_id(a.id, "message", n, self.now);
        let (role, content, tool_call_id, tool_name, tool_calls) = match msg {
            Msg::System(text) => (MessageRole::System, text, None, None, None),
            Msg::User(text) => (MessageRole::User, text, None, None, None),
            Msg::Assistant(text, calls) => (MessageRole::Assistant, text, None, None, calls),
            Msg::Tool {
                call_id,
                function,
                content,
            } => (
                MessageRole::Tool,
                content,
                Some(call_id.into()),
                Some(function.into()),
                None,
            ),
        };
        self.messages.push(MessageRow {
            id,
            session_id: a.session,
            stage_id: a.stage,
            execution_id: a.id,
            sequence_number: n,
            role,
            content: content.into(),
            tool_call_id,
            tool_name,
            tool_calls,
            created_at: self.now,
        });
        self.wait(40);
    }

    fn event(&mut self, a: Agent, event: Event) {
        let n = self.next(a.session, "event");
        let id = Self::child_id(a.session, "event", n, event.since);
        self.events.push(TimelineEventRow {
            id,
            session_id: a.session,
            stage_id: a.stage,
            execution_id: a.id,
            sequence_number: i64::from(n),
            event_type: event.kind,
            status: event.status,
            content: event.content,
            metadata: event.metadata,
            llm_interaction_id: event.llm,
            mcp_interaction_id: event.mcp,
            created_at: event.since,
            updated_at: self.now,
        });
    }

    /// One call to the agent's model with its whole conversation so far (the interaction
    /// points at the last message, so the conversation rebuilt from it is what was sent).
    /// The clock moves past the call; tokens, cost and duration follow from the text.
    fn llm(&mut self, a: Agent, kind: LlmInteractionType, reply: Reply<'_>) -> Uuid {
        let model = a.profile.model;
        let tools = a.profile.tools();
        let sent: Vec<&MessageRow> = self
            .messages
            .iter()
            .filter(|m| m.execution_id == a.id)
            .collect();
        let last_message = sent.last().map(|m| (m.id, m.sequence_number));
        let sent_chars: usize = sent
            .iter()
            .map(|m| m.content.len() + m.tool_calls.as_ref().map_or(0, |c| c.to_string().len()))
            .sum();
        let request = json!({
            "model": model.name,
            "stream": true,
            "temperature": 0.2,
            "max_output_tokens": 8192,
            "tools": tools,
            // The conversation itself lives in `messages` (stored once, not O(n²)); the
            // request records how many of them were sent.
            "message_count": last_message.map_or(0, |(_, seq)| seq),
        });

        let (response, usage, ms) = match reply.failure {
            None => {
                let usage = Usage::estimate(model, tools.len(), sent_chars, &reply);
                let finish = if reply.calls.is_null() {
                    "stop"
                } else {
                    "tool_calls"
                };
                let response = json!({
                    "model": model.name,
                    "finish_reason": finish,
                    "content": reply.text,
                    "tool_calls": reply.calls,
                    "usage": {
                        "input_tokens": usage.input,
                        "output_tokens": usage.output,
                        "thinking_tokens": usage.thinking,
                    },
                });
                (response, Some(usage), usage.ms)
            }
            Some((error, ms)) => (json!({ "error": { "message": error } }), None, ms),
        };
        let error = reply.failure.map(|(error, _)| error.to_owned());
        let attempts = if error.is_some() { 3 } else { 1 };
        self.wait(ms);
        let n = self.next(a.id, "llm");
        let id = Self::child_id(a.id, "llm", n, self.now);
        self.llm.push(LlmInteractionRow {
            id,
            session_id: a.session,
            stage_id: a.stage,
            execution_id: a.id,
            interaction_type: kind,
            model_name: model.name.into(),
            last_message_id: last_message.map(|(id, _)| id),
            llm_request: request,
            llm_response: response,
            thinking_content: reply.thinking.map(Into::into),
            response_metadata: json!({
                "provider": model.provider,
                "request_id": format!("req_{:016x}", fnv1a(FNV_OFFSET, &id.to_string())),
                "streamed": true,
                "attempts": attempts,
            }),
            input_tokens: usage.map(|u| u.input),
            output_tokens: usage.map(|u| u.output),
            total_tokens: usage.map(|u| u.input + u.output + u.thinking.unwrap_or(0)),
            thinking_tokens: usage.and_then(|u| u.thinking),
            estimated_cost_usd: usage.map(|u| u.cost),
            duration_ms: Some(ms),
            error_message: error,
            created_at: self.now,
        });
        id
    }

    /// One MCP tool call; the clock moves past it.
    fn mcp(&mut self, a: Agent, step: &Step<'_>) -> Uuid {
        // MCP results are a list of content blocks plus an error flag.
        let content = |text: &str, is_error: bool| json!({ "content": [{ "type": "text", "text": text }], "isError": is_error });
        let (result, error, ms) = match step.output {
            Output::Text(text) => {
                let ms = 180 + i64::try_from(text.len() / 5).unwrap_or(0);
                (content(text, false), None, ms)
            }
            Output::Error(error) => (content(error, true), Some(error.to_owned()), 3_050),
            Output::Cancelled => (json!({}), Some("context canceled".to_owned()), 1_900),
        };
        self.wait(ms);
        let n = self.next(a.id, "mcp");
        let id = Self::child_id(a.id, "mcp", n, self.now);
        self.mcp.push(McpInteractionRow {
            id,
            session_id: a.session,
            stage_id: a.stage,
            execution_id: a.id,
            interaction_type: McpInteractionType::ToolCall,
            server_name: step.server.into(),
            tool_name: Some(step.tool.into()),
            tool_arguments: step.args.clone(),
            tool_result: result,
            available_tools: json!([]),
            duration_ms: Some(ms),
            error_message: error,
            created_at: self.now,
        });
        id
    }

    /// An agent starts by listing the tools of its MCP servers (debug records only).
    fn list_tools(&mut self, a: Agent) {
        for server in a.profile.servers {
            let tools: Vec<Json> = TOOLS
                .iter()
                .filter(|(s, _, _)| s == server)
                .map(|(_, name, description)| {
                    json!({
                        "name": name,
                        "description": description,
                        "inputSchema": { "type": "object" },
                    })
                })
                .collect();
            self.wait(85);
            let n = self.next(a.id, "mcp");
            let id = Self::child_id(a.id, "mcp", n, self.now);
            self.mcp.push(McpInteractionRow {
                id,
                session_id: a.session,
                stage_id: a.stage,
                execution_id: a.id,
                interaction_type: McpInteractionType::ToolList,
                server_name: (*server).into(),
                tool_name: None,
                tool_arguments: json!({}),
                tool_result: json!({}),
                available_tools: Json::Array(tools),
                duration_ms: Some(85),
                error_message: None,
                created_at: self.now,
            });
        }
    }

    // --- what agents do ----------------------------------------------------------------

    /// An agent lists its tools and frames its conversation: system prompt, then the task.
    fn begin(&mut self, a: Agent, task: &str) {
        self.list_tools(a);
        self.message(a, Msg::System(a.profile.prompt));
        self.message(a, Msg::User(task));
    }

    /// An OpenAI-style call id, stable per execution.
    fn call_id(&mut self, a: Agent) -> String {
        let n = self.next(a.id, "call");
        format!(
            "call_{:016x}",
            fnv1a(FNV_OFFSET, &format!("{}/call/{n}", a.id))
        )
    }

    /// The model reasons and asks for tool calls: one iteration, its timeline events and the
    /// assistant message carrying the calls. `calls` are (call id, function, arguments).
    fn request_tools(
        &mut self,
        a: Agent,
        thinking: Option<&str>,
        say: Option<&str>,
        calls: &[(&str, &str, &Json)],
    ) {
        let since = self.now;
        let tool_calls: Vec<Json> = calls
            .iter()
            .map(|(id, function, args)| {
                json!({
                    "id": id,
                    "type": "function",
                    "function": { "name": function, "arguments": args.to_string() },
                })
            })
            .collect();
        let tool_calls = Json::Array(tool_calls);
        let text = say.unwrap_or_default();
        let llm = self.llm(
            a,
            Llm::Iteration,
            Reply::text(thinking, text).calls(&tool_calls),
        );
        let model = json!({ "model": a.profile.model.name });
        if let Some(thinking) = thinking {
            self.event(
                a,
                Event::new(Kind::LlmThinking, thinking, since)
                    .llm(llm)
                    .meta(model.clone()),
            );
        }
        if let Some(say) = say {
            self.event(
                a,
                Event::new(Kind::LlmResponse, say, since)
                    .llm(llm)
                    .meta(model),
            );
        }
        for (id, function, args) in calls {
            let (server, tool) = function.split_once("__").unwrap_or(("", function));
            let content = format!("{function}({args})");
            let meta = json!({
                "tool_call_id": id,
                "server_name": (!server.is_empty()).then_some(server),
                "tool_name": tool,
                "arguments": args,
            });
            self.event(
                a,
                Event::new(Kind::LlmToolCall, content, self.now)
                    .llm(llm)
                    .meta(meta),
            );
        }
        self.message(a, Msg::Assistant(text, Some(tool_calls)));
    }

    /// One ReAct step with an MCP tool (see [`Step`]).
    fn tool_step(&mut self, a: Agent, step: Step<'_>) {
        let call_id = self.call_id(a);
        let function = format!("{}__{}", step.server, step.tool);
        self.request_tools(
            a,
            step.thinking,
            step.say,
            &[(&call_id, &function, &step.args)],
        );
        let since = self.now;
        let mcp = self.mcp(a, &step);
        let (status, content) = match step.output {
            Output::Text(text) => (TimelineEventStatus::Completed, text.to_owned()),
            Output::Error(error) => (TimelineEventStatus::Failed, error.to_owned()),
            Output::Cancelled => (TimelineEventStatus::Cancelled, String::new()),
        };
        let meta = json!({
            "tool_call_id": call_id,
            "server_name": step.server,
            "tool_name": step.tool,
            "arguments": step.args,
        });
        let call = Event::new(Kind::McpToolCall, content, since).status(status);
        self.event(a, call.mcp(mcp).meta(meta));
        let result = match (step.output, step.summary) {
            (Output::Cancelled, _) => return,
            (Output::Error(error), _) => format!("Error: {error}"),
            (Output::Text(text), None) => text.to_owned(),
            (Output::Text(text), Some(summary)) => {
                let since = self.now;
                self.wait(2_600);
                let meta = json!({
                    "server_name": step.server,
                    "tool_name": step.tool,
                    "original_length": text.len(),
                    "summarized_by": a.profile.model.name,
                });
                self.event(
                    a,
                    Event::new(Kind::McpToolSummary, summary, since)
                        .mcp(mcp)
                        .meta(meta),
                );
                summary.to_owned()
            }
        };
        self.message(
            a,
            Msg::Tool {
                call_id: &call_id,
                function: &function,
                content: &result,
            },
        );
    }

    /// The model answers without tools: a final analysis, an executive summary or a chat
    /// answer (shown as an `llm_response`).
    fn answer(&mut self, a: Agent, kind: LlmInteractionType, thinking: Option<&str>, text: &str) {
        let since = self.now;
        let llm = self.llm(a, kind, Reply::text(thinking, text));
        let model = json!({ "model": a.profile.model.name });
        if let Some(thinking) = thinking {
            self.event(
                a,
                Event::new(Kind::LlmThinking, thinking, since)
                    .llm(llm)
                    .meta(model.clone()),
            );
        }
        let event_kind = match kind {
            Llm::FinalAnalysis => Kind::FinalAnalysis,
            Llm::ExecutiveSummary => Kind::ExecutiveSummary,
            Llm::Iteration | Llm::ChatResponse => Kind::LlmResponse,
        };
        self.event(a, Event::new(event_kind, text, since).llm(llm).meta(model));
        self.message(a, Msg::Assistant(text, None));
    }

    /// After the last stage, the same agent is asked for the executive summary.
    fn summarize(&mut self, a: Agent, text: &str) {
        self.message(a, Msg::User(SUMMARY_PROMPT));
        self.answer(a, Llm::ExecutiveSummary, None, text);
    }

    /// An LLM call that broke off after `ms`. If something had streamed, its event ends with
    /// `status` (failed, cancelled or timed out) and links to the failed interaction.
    fn broken_llm(
        &mut self,
        a: Agent,
        streamed: Option<(TimelineEventType, &str)>,
        status: TimelineEventStatus,
        error: &str,
        ms: i64,
    ) {
        let since = self.now;
        let llm = self.llm(a, Llm::Iteration, Reply::failed(error, ms));
        if let Some((kind, partial)) = streamed {
            let meta = json!({ "model": a.profile.model.name, "error": error });
            self.event(
                a,
                Event::new(kind, partial, since)
                    .status(status)
                    .llm(llm)
                    .meta(meta),
            );
        }
    }

    /// An LLM call still streaming: its event exists, its interaction does not yet.
    fn streaming(&mut self, a: Agent, kind: TimelineEventType, partial: &str) {
        let since = self.now;
        self.wait(3_400);
        let meta = json!({ "model": a.profile.model.name });
        self.event(
            a,
            Event::new(kind, partial, since)
                .status(TimelineEventStatus::Streaming)
                .meta(meta),
        );
    }

    // --- writing -------------------------------------------------------------------------

    async fn write(&self, store: &Store) -> Result<String> {
        let mut tx = store.pool().begin().await?;
        // A session that is already there keeps what it has: it may come from an older version
        // of this demo, whose child ids differ and would collide on sequence numbers and
        // indexes. So only the children of newly inserted sessions are written.
        let mut fresh = HashSet::new();
        for session in &self.sessions {
            if insert(&mut tx, session).await? {
                fresh.insert(session.id);
            }
        }
        // Parents before children: the foreign keys are checked row by row.
        let new = fresh.len()
            + insert_all(&mut tx, &fresh, &self.chats).await?
            + insert_all(&mut tx, &fresh, &self.chat_messages).await?
            + insert_all(&mut tx, &fresh, &self.stages).await?
            + insert_all(&mut tx, &fresh, &self.executions).await?
            + insert_all(&mut tx, &fresh, &self.messages).await?
            + insert_all(&mut tx, &fresh, &self.llm).await?
            + insert_all(&mut tx, &fresh, &self.mcp).await?
            + insert_all(&mut tx, &fresh, &self.events).await?;
        tx.commit().await?;
        let counts = [
            (self.sessions.len(), "sessions"),
            (self.chats.len(), "chats"),
            (self.chat_messages.len(), "chat messages"),
            (self.stages.len(), "stages"),
            (self.executions.len(), "agent executions"),
            (self.events.len(), "timeline events"),
            (self.messages.len(), "messages"),
            (self.llm.len(), "LLM interactions"),
            (self.mcp.len(), "MCP interactions"),
        ];
        let total: usize = counts.iter().map(|(n, _)| n).sum();
        let parts: Vec<String> = counts
            .iter()
            .map(|&(n, what)| match what.strip_suffix('s') {
                Some(one) if n == 1 => format!("{n} {one}"),
                _ => format!("{n} {what}"),
            })
            .collect();
        Ok(format!(
            "demo data: {} ({new} of {total} rows new)",
            parts.join(", ")
        ))
    }
}

/// Tokens, cost and duration of a successful LLM call, estimated from the text involved.
#[derive(Clone, Copy)]
struct Usage {
    input: i32,
    output: i32,
    thinking: Option<i32>,
    cost: f64,
    ms: i64,
}

impl Usage {
    fn estimate(model: &Model, tool_count: usize, sent_chars: usize, reply: &Reply<'_>) -> Self {
        // System instructions and runbook excerpts, then ~180 tokens per tool declaration.
        let tool_count = i32::try_from(tool_count).unwrap_or(i32::MAX);
        let input = 2_400 + 180 * tool_count + tokens(sent_chars);
        let output = tokens(reply.text.len() + reply.calls.to_string().len()) + 12;
        // What is stored of the thinking is a summary; the model thought several times as much.
        let thinking = reply.thinking.map(|t| tokens(t.len()) * 6);
        let generated = output + thinking.unwrap_or(0);
        let cost = (f64::from(input) * model.input_price
            + f64::from(generated) * model.output_price)
            / 1e6;
        Self {
            input,
            output,
            thinking,
            cost: (cost * 1e6).round() / 1e6,
            // Time to first token, then about 40 tokens per second.
            ms: 1_800 + 25 * i64::from(generated),
        }
    }
}

/// What the model sends back: text, maybe thinking and tool calls, or a failure after `ms`.
struct Reply<'a> {
    thinking: Option<&'a str>,
    text: &'a str,
    calls: &'a Json,
    failure: Option<(&'a str, i64)>,
}

/// The `calls` of a reply without tool calls.
static NO_CALLS: Json = Json::Null;

impl<'a> Reply<'a> {
    fn text(thinking: Option<&'a str>, text: &'a str) -> Self {
        Self {
            thinking,
            text,
            calls: &NO_CALLS,
            failure: None,
        }
    }
    fn calls(self, calls: &'a Json) -> Self {
        Self { calls, ..self }
    }
    fn failed(error: &'a str, ms: i64) -> Self {
        Self {
            thinking: None,
            text: "",
            calls: &NO_CALLS,
            failure: Some((error, ms)),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Inserting
// ---------------------------------------------------------------------------------------------

type PgQuery<'q> = Query<'q, Postgres, PgArguments>;

/// A row the demo writes: its idempotent INSERT and how to bind its values.
trait Insert {
    const SQL: &'static str;
    fn session_id(&self) -> Uuid;
    fn bind<'q>(&'q self, query: PgQuery<'q>) -> PgQuery<'q>;
}

/// Inserts a row unless its id exists; says whether it was new.
async fn insert<R: Insert>(tx: &mut Transaction<'_, Postgres>, row: &R) -> Result<bool> {
    let query = row.bind(sqlx::query(R::SQL));
    Ok(query.execute(&mut **tx).await?.rows_affected() == 1)
}

/// Inserts the rows of the given sessions; returns how many were new.
async fn insert_all<R: Insert>(
    tx: &mut Transaction<'_, Postgres>,
    sessions: &HashSet<Uuid>,
    rows: &[R],
) -> Result<usize> {
    let mut new = 0;
    for row in rows
        .iter()
        .filter(|row| sessions.contains(&row.session_id()))
    {
        new += usize::from(insert(tx, row).await?);
    }
    Ok(new)
}

impl Insert for SessionRow {
    // duration_ms is generated by the database.
    const SQL: &'static str = "INSERT INTO sessions (id, alert_type, alert_data, status, \
        chain_id, author, runbook_url, final_analysis, executive_summary, error_message, \
        started_at, completed_at, created_at, updated_at, deleted_at) \
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) \
        ON CONFLICT (id) DO NOTHING";
    fn session_id(&self) -> Uuid {
        self.id
    }
    fn bind<'q>(&'q self, query: PgQuery<'q>) -> PgQuery<'q> {
        query
            .bind(self.id)
            .bind(&self.alert_type)
            .bind(&self.alert_data)
            .bind(self.status)
            .bind(&self.chain_id)
            .bind(&self.author)
            .bind(&self.runbook_url)
            .bind(&self.final_analysis)
            .bind(&self.executive_summary)
            .bind(&self.error_message)
            .bind(self.started_at)
            .bind(self.completed_at)
            .bind(self.created_at)
            .bind(self.updated_at)
            .bind(self.deleted_at)
    }
}

impl Insert for ChatRow {
    const SQL: &'static str = "INSERT INTO chats (id, session_id, created_by, created_at, \
        updated_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING";
    fn session_id(&self) -> Uuid {
        self.session_id
    }
    fn bind<'q>(&'q self, query: PgQuery<'q>) -> PgQuery<'q> {
        query
            .bind(self.id)
            .bind(self.session_id)
            .bind(&self.created_by)
            .bind(self.created_at)
            .bind(self.updated_at)
    }
}

impl Insert for ChatUserMessageRow {
    const SQL: &'static str = "INSERT INTO chat_user_messages (id, chat_id, session_id, \
        content, author, created_at) VALUES ($1, $2, $3, $4, $5, $6) \
        ON CONFLICT (id) DO NOTHING";
    fn session_id(&self) -> Uuid {
        self.session_id
    }
    fn bind<'q>(&'q self, query: PgQuery<'q>) -> PgQuery<'q> {
        query
            .bind(self.id)
            .bind(self.chat_id)
            .bind(self.session_id)
            .bind(&self.content)
            .bind(&self.author)
            .bind(self.created_at)
    }
}

impl Insert for StageRow {
    const SQL: &'static str = "INSERT INTO stages (id, session_id, stage_name, stage_index, \
        expected_agent_count, parallel_type, success_policy, status, started_at, completed_at, \
        duration_ms, error_message, chat_id, chat_user_message_id, created_at, updated_at) \
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) \
        ON CONFLICT (id) DO NOTHING";
    fn session_id(&self) -> Uuid {
        self.session_id
    }
    fn bind<'q>(&'q self, query: PgQuery<'q>) -> PgQuery<'q> {
        query
            .bind(self.id)
            .bind(self.session_id)
            .bind(&self.stage_name)
            .bind(self.stage_index)
            .bind(self.expected_agent_count)
            .bind(self.parallel_type)
            .bind(self.success_policy)
            .bind(self.status)
            .bind(self.started_at)
            .bind(self.completed_at)
            .bind(self.duration_ms)
            .bind(&self.error_message)
            .bind(self.chat_id)
            .bind(self.chat_user_message_id)
            .bind(self.created_at)
            .bind(self.updated_at)
    }
}

impl Insert for ExecutionRow {
    const SQL: &'static str = "INSERT INTO agent_executions (id, stage_id, session_id, \
        parent_execution_id, agent_name, agent_index, status, started_at, completed_at, \
        duration_ms, error_message, iteration_strategy, llm_provider, llm_model, created_at, \
        updated_at) \
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) \
        ON CONFLICT (id) DO NOTHING";
    fn session_id(&self) -> Uuid {
        self.session_id
    }
    fn bind<'q>(&'q self, query: PgQuery<'q>) -> PgQuery<'q> {
        query
            .bind(self.id)
            .bind(self.stage_id)
            .bind(self.session_id)
            .bind(self.parent_execution_id)
            .bind(&self.agent_name)
            .bind(self.agent_index)
            .bind(self.status)
            .bind(self.started_at)
            .bind(self.completed_at)
            .bind(self.duration_ms)
            .bind(&self.error_message)
            .bind(&self.iteration_strategy)
            .bind(&self.llm_provider)
            .bind(&self.llm_model)
            .bind(self.created_at)
            .bind(self.updated_at)
    }
}

impl Insert for MessageRow {
    const SQL: &'static str = "INSERT INTO messages (id, session_id, stage_id, execution_id, \
        sequence_number, role, content, tool_call_id, tool_name, tool_calls, created_at) \
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (id) DO NOTHING";
    fn session_id(&self) -> Uuid {
        self.session_id
    }
    fn bind<'q>(&'q self, query: PgQuery<'q>) -> PgQuery<'q> {
        query
            .bind(self.id)
            .bind(self.session_id)
            .bind(self.stage_id)
            .bind(self.execution_id)
            .bind(self.sequence_number)
            .bind(self.role)
            .bind(&self.content)
            .bind(&self.tool_call_id)
            .bind(&self.tool_name)
            .bind(&self.tool_calls)
            .bind(self.created_at)
    }
}

impl Insert for LlmInteractionRow {
    const SQL: &'static str = "INSERT INTO llm_interactions (id, session_id, stage_id, \
        execution_id, interaction_type, model_name, last_message_id, llm_request, llm_response, \
        thinking_content, response_metadata, input_tokens, output_tokens, total_tokens, \
        thinking_tokens, estimated_cost_usd, duration_ms, error_message, created_at) \
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, \
        $18, $19) ON CONFLICT (id) DO NOTHING";
    fn session_id(&self) -> Uuid {
        self.session_id
    }
    fn bind<'q>(&'q self, query: PgQuery<'q>) -> PgQuery<'q> {
        query
            .bind(self.id)
            .bind(self.session_id)
            .bind(self.stage_id)
            .bind(self.execution_id)
            .bind(self.interaction_type)
            .bind(&self.model_name)
            .bind(self.last_message_id)
            .bind(&self.llm_request)
            .bind(&self.llm_response)
            .bind(&self.thinking_content)
            .bind(&self.response_metadata)
            .bind(self.input_tokens)
            .bind(self.output_tokens)
            .bind(self.total_tokens)
            .bind(self.thinking_tokens)
            .bind(self.estimated_cost_usd)
            .bind(self.duration_ms)
            .bind(&self.error_message)
            .bind(self.created_at)
    }
}

impl Insert for McpInteractionRow {
    const SQL: &'static str = "INSERT INTO mcp_interactions (id, session_id, stage_id, \
        execution_id, interaction_type, server_name, tool_name, tool_arguments, tool_result, \
        available_tools, duration_ms, error_message, created_at) \
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
        ON CONFLICT (id) DO NOTHING";
    fn session_id(&self) -> Uuid {
        self.session_id
    }
    fn bind<'q>(&'q self, query: PgQuery<'q>) -> PgQuery<'q> {
        query
            .bind(self.id)
            .bind(self.session_id)
            .bind(self.stage_id)
            .bind(self.execution_id)
            .bind(self.interaction_type)
            .bind(&self.server_name)
            .bind(&self.tool_name)
            .bind(&self.tool_arguments)
            .bind(&self.tool_result)
            .bind(&self.available_tools)
            .bind(self.duration_ms)
            .bind(&self.error_message)
            .bind(self.created_at)
    }
}

impl Insert for TimelineEventRow {
    const SQL: &'static str = "INSERT INTO timeline_events (id, session_id, stage_id, \
        execution_id, sequence_number, event_type, status, content, metadata, \
        llm_interaction_id, mcp_interaction_id, created_at, updated_at) \
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
        ON CONFLICT (id) DO NOTHING";
    fn session_id(&self) -> Uuid {
        self.session_id
    }
    fn bind<'q>(&'q self, query: PgQuery<'q>) -> PgQuery<'q> {
        query
            .bind(self.id)
            .bind(self.session_id)
            .bind(self.stage_id)
            .bind(self.execution_id)
            .bind(self.sequence_number)
            .bind(self.event_type)
            .bind(self.status)
            .bind(&self.content)
            .bind(&self.metadata)
            .bind(self.llm_interaction_id)
            .bind(self.mcp_interaction_id)
            .bind(self.created_at)
            .bind(self.updated_at)
    }
}

// ---------------------------------------------------------------------------------------------
// Scenarios: one function per session, each followed by the texts it uses
// ---------------------------------------------------------------------------------------------

/// Completed: the three-stage chain (one agent → three in parallel under `any`, one of which
/// fails → one agent), an executive summary, then a follow-up chat answered by a chat stage.
fn crash_loop_with_chat(d: &mut Demo) {
    let s = d.session(
        0,
        Alert {
            key: "checkout-crashloop",
            alert_type: "KubePodCrashLooping",
            chain_id: "kubernetes-deep-dive",
            runbook_url: "https://runbooks.example.com/kubernetes/KubePodCrashLooping",
            data: json!({
                "alertname": "KubePodCrashLooping",
                "severity": "critical",
                "cluster": "prod-eu-west-1",
                "namespace": "shop",
                "pod": "checkout-7d9f8b6c5-x2k4q",
                "container": "checkout",
                "summary": "Pod shop/checkout-7d9f8b6c5-x2k4q is crash looping.",
                "description": "Pod shop/checkout-7d9f8b6c5-x2k4q (checkout) is in waiting state \
                                (reason: \"CrashLoopBackOff\"); 14 restarts in the last 30 minutes.",
                "starts_at": "2026-11-20T07:56:40Z",
                "generator_url": "https://prometheus.prod-eu-west-1.example.com/graph?g0.expr=\
                                  increase(kube_pod_container_status_restarts_total%5B30m%5D)%3E3",
            }),
        },
    );
    d.start(s);

    let st = d.stage(s, "Initial Analysis", Agents::One);
    let k8s = d.agent(st, &KUBERNETES_AGENT, None);
    d.begin(
        k8s,
        "Alert KubePodCrashLooping (critical) in cluster prod-eu-west-1:\n\
         Pod shop/checkout-7d9f8b6c5-x2k4q (container checkout) is in CrashLoopBackOff with 14 \
         restarts in the last 30 minutes.\n\
         Find out why the container keeps exiting.",
    );
    let pod = json!({ "namespace": "shop", "name": "checkout-7d9f8b6c5-x2k4q" });
    d.tool_step(
        k8s,
        Step::call("kubernetes", "pods_get", pod)
            .returns(CHECKOUT_POD)
            .thinking(
                "The alert is about one pod of the checkout Deployment. Before reading logs I \
                 want the container's last termination state: exit code, reason and how long it \
                 ran. That separates an OOM kill or a failing probe from the process exiting on \
                 its own.",
            )
            .summary(
                "Container checkout is in CrashLoopBackOff with 14 restarts. Last termination: \
                 exit code 1, reason Error, after 2 s (07:57:03 → 07:57:05). Image \
                 registry.example.com/shop/checkout:2.14.0, pod created 07:41:12 by ReplicaSet \
                 checkout-7d9f8b6c5. Configuration comes from ConfigMap checkout-config via \
                 envFrom. Not an OOM kill, and the probes are not what kills it.",
            ),
    );
    let logs = json!({
        "namespace": "shop",
        "name": "checkout-7d9f8b6c5-x2k4q",
        "container": "checkout",
        "previous": true,
        "tail": 40,
    });
    d.tool_step(
        k8s,
        Step::call("kubernetes", "pods_log", logs)
            .returns(CHECKOUT_LOG)
            .thinking(
                "Exit code 1 after two seconds means the process gives up during start-up, so the \
                 previous container's log should say why.",
            ),
    );
    d.answer(
        k8s,
        Llm::FinalAnalysis,
        Some(
            "The log is unambiguous: 2.14.0 refuses to start because PAYMENTS_API_URL is not set, \
             and it ignores PAYMENTS_BASE_URL. The pod was created by a rollout 15 minutes before \
             the alert, so something in that release changed the configuration contract.",
        ),
        CHECKOUT_INITIAL,
    );
    d.end_agent(k8s, ExecutionStatus::Completed, None);
    d.end_stage(st);

    let findings = format!("Findings of stage 'Initial Analysis':\n{CHECKOUT_INITIAL}");
    let deep_dive = Agents::Parallel(ParallelType::MultiAgent, SuccessPolicy::Any, 3);
    let st = d.stage(s, "Deep Dive", deep_dive);
    let k8s = d.agent(st, &KUBERNETES_AGENT, None);
    let argo = d.agent(st, &ARGOCD_AGENT, None);
    let prom = d.agent(st, &PROMETHEUS_AGENT, None);
    d.begin(
        k8s,
        &format!("{findings}\n\nTask: check which settings the checkout pods receive."),
    );
    d.begin(
        argo,
        &format!("{findings}\n\nTask: find out what Argo CD deployed to checkout and when."),
    );
    d.begin(
        prom,
        &format!("{findings}\n\nTask: quantify the impact on checkout traffic."),
    );
    // The agents run side by side, so their steps interleave on the session's timeline.
    let config_map = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "namespace": "shop",
        "name": "checkout-config",
    });
    d.tool_step(
        k8s,
        Step::call("kubernetes", "resources_get", config_map)
            .returns(CHECKOUT_CONFIG_MAP)
            .thinking(
                "The Deployment injects its settings with envFrom from checkout-config. If the \
                 key is missing there, the FATAL error is fully explained.",
            ),
    );
    let app = json!({ "applicationName": "checkout-prod" });
    d.tool_step(
        argo,
        Step::call("argocd", "get_application", app.clone())
            .returns(CHECKOUT_APP)
            .say("I'll start with the sync status and history of the checkout-prod application."),
    );
    let error_ratio = json!({
        "query": "sum(rate(http_requests_total{namespace=\"shop\",service=\"checkout\",code=~\"5..\"}[5m])) \
                  / sum(rate(http_requests_total{namespace=\"shop\",service=\"checkout\"}[5m]))",
    });
    d.tool_step(
        prom,
        Step::call("prometheus", "execute_query", error_ratio)
            .returns(CHECKOUT_ERROR_RATIO)
            .thinking(
                "The user-facing impact is the share of checkout requests that fail. Old pods \
                 may still serve, so I expect a partial outage rather than a full one.",
            ),
    );
    d.answer(
        k8s,
        Llm::FinalAnalysis,
        Some(
            "PAYMENTS_BASE_URL holds the payments endpoint; PAYMENTS_API_URL is gone. The two \
             pods of the previous ReplicaSet still run because envFrom is resolved when a \
             container starts.",
        ),
        CHECKOUT_CONFIG_FINDING,
    );
    d.end_agent(k8s, ExecutionStatus::Completed, None);
    d.broken_llm(
        prom,
        None,
        TimelineEventStatus::Failed,
        GEMINI_QUOTA_ERROR,
        2_350,
    );
    d.end_agent(
        prom,
        ExecutionStatus::Failed,
        Some("LLM call failed after 3 attempts: googleapi: Error 429: Resource has been exhausted"),
    );
    d.tool_step(
        argo,
        Step::call("argocd", "get_application_events", app)
            .returns(CHECKOUT_APP_EVENTS)
            .say("The current revision is a41c9e2. Let me see what that sync did and when."),
    );
    d.answer(argo, Llm::FinalAnalysis, None, CHECKOUT_ARGO_FINDING);
    d.end_agent(argo, ExecutionStatus::Completed, None);
    d.end_stage(st);

    let st = d.stage(s, "Recommendations", Agents::One);
    let fix = d.agent(st, &REMEDIATION_AGENT, None);
    d.begin(
        fix,
        &format!(
            "{findings}\n\nFindings of stage 'Deep Dive':\n\
             - KubernetesAgent: {CHECKOUT_CONFIG_FINDING}\n\
             - ArgoCDAgent: {CHECKOUT_ARGO_FINDING}\n\
             - PrometheusAgent: failed (LLM quota exhausted) after measuring a 4.1% 5xx ratio \
             on checkout.\n\n\
             Write the root cause and a remediation plan."
        ),
    );
    d.answer(
        fix,
        Llm::FinalAnalysis,
        Some(
            "Two facts must fit together: the 2.14.0 image reads PAYMENTS_API_URL, and the \
             ConfigMap now only has PAYMENTS_BASE_URL. Both came from the same commit. Rolling \
             back only the image would not help, since 2.13.4 reads the same old key. Restoring \
             the key through Git is fast and does not fight Argo CD's self-heal.",
        ),
        CHECKOUT_FINAL,
    );
    d.summarize(fix, CHECKOUT_SUMMARY);
    d.end_agent(fix, ExecutionStatus::Completed, None);
    d.end_stage(st);
    let outcome = Outcome {
        final_analysis: Some(CHECKOUT_FINAL),
        executive_summary: Some(CHECKOUT_SUMMARY),
        error: None,
    };
    d.settle(s, SessionStatus::Completed, outcome);

    // Later, someone asks a follow-up question about the finished investigation.
    d.wait(25 * 60_000);
    let chat = d.chat(s, "maria.k@example.com");
    let (st, bot) = d.chat_question(s, chat, "maria.k@example.com", CHECKOUT_QUESTION);
    d.begin(
        bot,
        &format!(
            "Investigation of KubePodCrashLooping on shop/checkout (completed).\n\
             Final analysis:\n{CHECKOUT_FINAL}\n\n\
             Question from maria.k@example.com:\n{CHECKOUT_QUESTION}"
        ),
    );
    let manifests = json!({ "applicationName": "checkout-prod", "revision": "9c1d2f0" });
    d.tool_step(
        bot,
        Step::call("argocd", "get_application_manifests", manifests)
            .returns(CHECKOUT_OLD_MANIFESTS)
            .thinking(
                "An Argo CD rollback re-applies a previous revision as a whole, so what matters \
                 is what revision 9c1d2f0 contains for both the image and the ConfigMap.",
            ),
    );
    d.answer(
        bot,
        Llm::ChatResponse,
        Some(
            "Revision 9c1d2f0 has checkout 2.13.4 and still sets PAYMENTS_API_URL, so a full \
             rollback starts healthy pods. Auto-sync is on, which blocks a rollback and would \
             undo it.",
        ),
        CHECKOUT_ANSWER,
    );
    d.end_agent(bot, ExecutionStatus::Completed, None);
    d.end_stage(st);
}

const CHECKOUT_POD: &str = "\
apiVersion: v1
kind: Pod
metadata:
  name: checkout-7d9f8b6c5-x2k4q
  namespace: shop
  creationTimestamp: \"2026-11-20T07:41:12Z\"
  labels:
    app.kubernetes.io/name: checkout
    pod-template-hash: 7d9f8b6c5
  ownerReferences:
  - kind: ReplicaSet
    name: checkout-7d9f8b6c5
spec:
  nodeName: ip-10-0-12-41.eu-west-1.compute.internal
  containers:
  - name: checkout
    image: registry.example.com/shop/checkout:2.14.0
    envFrom:
    - configMapRef:
        name: checkout-config
    ports:
    - containerPort: 8080
    livenessProbe:
      httpGet: {path: /healthz, port: 8080}
      initialDelaySeconds: 10
    resources:
      requests: {cpu: 250m, memory: 384Mi}
      limits: {cpu: \"1\", memory: 768Mi}
status:
  phase: Running
  conditions:
  - type: Ready
    status: \"False\"
    reason: ContainersNotReady
  containerStatuses:
  - name: checkout
    ready: false
    restartCount: 14
    image: registry.example.com/shop/checkout:2.14.0
    state:
      waiting:
        reason: CrashLoopBackOff
        message: back-off 5m0s restarting failed container=checkout pod=checkout-7d9f8b6c5-x2k4q_shop
    lastState:
      terminated:
        exitCode: 1
        reason: Error
        startedAt: \"2026-11-20T07:57:03Z\"
        finishedAt: \"2026-11-20T07:57:05Z\"";

const CHECKOUT_LOG: &str = "\
2026-11-20T07:57:03.412Z INFO  checkout starting version=2.14.0 commit=5e0c1aa go=go1.23.4
2026-11-20T07:57:03.415Z INFO  loading configuration from environment
2026-11-20T07:57:03.416Z INFO  config: CART_SERVICE_URL=http://cart.shop.svc.cluster.local:8080
2026-11-20T07:57:03.416Z INFO  config: REDIS_ADDR=redis-master.shop.svc.cluster.local:6379
2026-11-20T07:57:03.417Z WARN  config: unknown setting PAYMENTS_BASE_URL ignored
2026-11-20T07:57:03.417Z FATAL config: required setting PAYMENTS_API_URL is not set
2026-11-20T07:57:03.418Z INFO  exiting with status 1";

const CHECKOUT_INITIAL: &str = "\
**Preliminary root cause:** checkout 2.14.0 exits during start-up with `FATAL config: required \
setting PAYMENTS_API_URL is not set`.

**Evidence**
- Container `checkout` exits with code 1 after ~2 s; 14 restarts, now in CrashLoopBackOff.
- The previous container's log ends with the FATAL config error and also warns that \
`PAYMENTS_BASE_URL` is an unknown setting.
- Image `registry.example.com/shop/checkout:2.14.0`; the pod was created at 07:41:12Z by a \
rollout 15 minutes before the alert.

**Next:** find out what changed in that release and in the `checkout-config` ConfigMap, and how \
much traffic fails.";

const CHECKOUT_CONFIG_MAP: &str = "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: checkout-config
  namespace: shop
  labels:
    app.kubernetes.io/instance: checkout-prod
  annotations:
    argocd.argoproj.io/tracking-id: checkout-prod:/ConfigMap:shop/checkout-config
data:
  CART_SERVICE_URL: http://cart.shop.svc.cluster.local:8080
  LOG_LEVEL: info
  PAYMENTS_BASE_URL: http://payments-api.payments.svc.cluster.local:8443
  REDIS_ADDR: redis-master.shop.svc.cluster.local:6379";

const CHECKOUT_CONFIG_FINDING: &str = "\
ConfigMap `shop/checkout-config` (tracked by Argo CD application `checkout-prod`) defines \
`PAYMENTS_BASE_URL` but no longer `PAYMENTS_API_URL`, which checkout 2.14.0 requires. Two pods \
of the previous ReplicaSet (2.13.4) keep running because a container's environment is read when \
it starts; every new pod crashes.";

const CHECKOUT_APP: &str = r#"{
  "metadata": {"name": "checkout-prod", "namespace": "argocd"},
  "spec": {
    "source": {"repoURL": "https://git.example.com/platform/gitops.git", "path": "apps/checkout/overlays/prod", "targetRevision": "main"},
    "destination": {"server": "https://kubernetes.default.svc", "namespace": "shop"},
    "syncPolicy": {"automated": {"prune": true, "selfHeal": true}}
  },
  "status": {
    "sync": {"status": "Synced", "revision": "a41c9e2"},
    "health": {"status": "Degraded", "message": "Deployment checkout: 2 of 4 updated replicas are unavailable"},
    "history": [
      {"id": 41, "revision": "9c1d2f0", "deployedAt": "2026-11-18T14:02:11Z"},
      {"id": 42, "revision": "a41c9e2", "deployedAt": "2026-11-20T07:41:05Z"}
    ]
  }
}"#;

const CHECKOUT_APP_EVENTS: &str = "\
2026-11-20T07:41:05Z  OperationStarted    Initiated automated sync to 'a41c9e2' (checkout: release 2.14.0, rename PAYMENTS_API_URL to PAYMENTS_BASE_URL)
2026-11-20T07:41:09Z  OperationCompleted  Sync operation to a41c9e2 succeeded
2026-11-20T07:41:12Z  ResourceUpdated     Updated health status: Healthy -> Progressing
2026-11-20T07:49:30Z  ResourceUpdated     Updated health status: Progressing -> Degraded";

const CHECKOUT_ARGO_FINDING: &str = "\
Argo CD application `checkout-prod` auto-synced revision `a41c9e2` at 07:41:05Z (commit \
\"checkout: release 2.14.0, rename PAYMENTS_API_URL to PAYMENTS_BASE_URL\"). The sync succeeded; \
health went Progressing → Degraded at 07:49:30Z. The previous revision `9c1d2f0` (history id 41, \
deployed 2026-11-18) ran 2.13.4. Self-heal is enabled, so a manual edit of the ConfigMap would \
be reverted: the fix has to go through Git, or auto-sync has to be disabled for a rollback.";

const CHECKOUT_ERROR_RATIO: &str =
    r#"{"resultType": "vector", "result": [{"metric": {}, "value": [1795161540.123, "0.0412"]}]}"#;

const GEMINI_QUOTA_ERROR: &str = "googleapi: Error 429: Resource has been exhausted (e.g. check \
    quota). Quota exceeded for aiplatform.googleapis.com/generate_content_requests_per_minute_per_\
    project_per_base_model with base model: gemini-2.5-flash.";

const CHECKOUT_FINAL: &str = "\
## Root cause
Commit `a41c9e2` in the gitops repository released checkout 2.14.0 **and** renamed \
`PAYMENTS_API_URL` to `PAYMENTS_BASE_URL` in `checkout-config`. Checkout 2.14.0 still reads \
`PAYMENTS_API_URL`, so every new pod exits at start-up (`FATAL config: required setting \
PAYMENTS_API_URL is not set`). Pods started before the sync keep their old environment and \
still serve, which limits the impact to about 4% failed checkout requests.

## Remediation
1. Add `PAYMENTS_API_URL` back to `apps/checkout/overlays/prod/configmap.yaml` (same value as \
`PAYMENTS_BASE_URL`) and merge; Argo CD applies it within 3 minutes.
2. Restart the crash-looping pods: `kubectl -n shop rollout restart deployment/checkout`.
3. Verify that `kube_pod_container_status_restarts_total` stays flat and the 5xx ratio drops \
below 0.1%.

## Follow-up
- Keep both keys until a checkout release reads only `PAYMENTS_BASE_URL`.
- Render the overlay in CI and run `checkout --check-config` against it before merging.";

const CHECKOUT_SUMMARY: &str = "\
checkout 2.14.0 crash-loops in prod-eu-west-1 because the same release renamed PAYMENTS_API_URL \
to PAYMENTS_BASE_URL in its ConfigMap while the code still reads the old key; about 4% of \
checkout requests fail. Restore the old key in the gitops overlay, then restart the deployment.";

const CHECKOUT_QUESTION: &str = "\
Can we just roll back checkout to 2.13.4 in Argo CD instead of editing the ConfigMap? We are in \
a change freeze and I'd rather not touch config by hand.";

const CHECKOUT_OLD_MANIFESTS: &str = "\
# checkout-prod at revision 9c1d2f0 (history id 41)
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: checkout-config
  namespace: shop
data:
  CART_SERVICE_URL: http://cart.shop.svc.cluster.local:8080
  LOG_LEVEL: info
  PAYMENTS_API_URL: http://payments-api.payments.svc.cluster.local:8443
  REDIS_ADDR: redis-master.shop.svc.cluster.local:6379
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: checkout
  namespace: shop
spec:
  replicas: 4
  template:
    spec:
      containers:
      - name: checkout
        image: registry.example.com/shop/checkout:2.13.4";

const CHECKOUT_ANSWER: &str = "\
Yes. A rollback of `checkout-prod` to history id 41 (revision `9c1d2f0`) is safe: that revision \
contains **both** checkout 2.13.4 and the old `PAYMENTS_API_URL` key, so new pods will start. Two \
caveats:
1. Auto-sync is enabled on `checkout-prod`. Argo CD refuses a rollback while it is on, and \
turning it back on would re-deploy `a41c9e2`. Disable it first and keep it off until the fix is \
merged.
2. Rolling back only the image (for example with `kubectl set image`) would **not** help: 2.13.4 \
reads `PAYMENTS_API_URL` too, and the current ConfigMap no longer has it.

`argocd app set checkout-prod --sync-policy none && argocd app rollback checkout-prod 41`";

/// Completed: an orchestrator dispatches two sub-agents (executions whose parent is the
/// orchestrator's, in the same stage) and combines what they found.
fn latency_orchestrated(d: &mut Demo) {
    let s = d.session(
        55,
        Alert {
            key: "payments-latency",
            alert_type: "PaymentsApiHighLatency",
            chain_id: "latency-orchestrated",
            runbook_url: "https://runbooks.example.com/payments/PaymentsApiHighLatency",
            data: json!({
                "alertname": "PaymentsApiHighLatency",
                "severity": "warning",
                "cluster": "prod-us-east-1",
                "namespace": "payments",
                "service": "payments-api",
                "summary": "payments-api p99 latency is above its 750 ms objective.",
                "description": "p99 latency of payments-api has been 1.84 s for 10 minutes.",
                "value": 1.84,
                "threshold": 0.75,
                "starts_at": "2026-11-20T08:44:30Z",
            }),
        },
    );
    d.start(s);
    let st = d.stage(s, "Investigation", Agents::One);
    let lead = d.agent(st, &ORCHESTRATOR_AGENT, None);
    d.begin(
        lead,
        "Alert PaymentsApiHighLatency (warning) in cluster prod-us-east-1:\n\
         p99 latency of payments-api (namespace payments) is 1.84 s, above the 750 ms objective, \
         for 10 minutes.\n\
         Find the cause.",
    );
    let metrics_call = d.call_id(lead);
    let pods_call = d.call_id(lead);
    let metrics_task = json!({ "agent": "PrometheusAgent", "task": PAYMENTS_METRICS_TASK });
    let pods_task = json!({ "agent": "KubernetesAgent", "task": PAYMENTS_PODS_TASK });
    d.request_tools(
        lead,
        Some(
            "Latency alerts on payments-api usually come from saturated pods, a slow dependency \
             or a traffic change. Metrics and pod state are independent questions, so I'll \
             hand them to two specialists in parallel.",
        ),
        None,
        &[
            (&metrics_call, "dispatch_agent", &metrics_task),
            (&pods_call, "dispatch_agent", &pods_task),
        ],
    );

    let metrics = d.agent(st, &PROMETHEUS_AGENT, Some(lead));
    let pods = d.agent(st, &KUBERNETES_AGENT, Some(lead));
    d.begin(metrics, PAYMENTS_METRICS_TASK);
    d.begin(pods, PAYMENTS_PODS_TASK);
    let p99 = json!({
        "query": "histogram_quantile(0.99, sum by (le, route) \
                  (rate(http_server_request_duration_seconds_bucket{service=\"payments-api\"}[5m])))",
        "start": "2026-11-20T07:55:00Z",
        "end": "2026-11-20T08:55:00Z",
        "step": "15m",
    });
    d.tool_step(
        metrics,
        Step::call("prometheus", "execute_range_query", p99)
            .returns(PAYMENTS_P99)
            .thinking("First the shape of the problem: which routes got slow, and since when.")
            .summary(
                "p99 of /v1/charges rose from 0.41 s (07:55) to 1.92 s (08:55), starting \
                 between 08:10 and 08:25; /v1/refunds and /v1/payment-methods rose less \
                 (0.22 → 0.31 s, 0.09 → 0.35 s).",
            ),
    );
    let top =
        json!({ "namespace": "payments", "label_selector": "app.kubernetes.io/name=payments-api" });
    d.tool_step(
        pods,
        Step::call("kubernetes", "pods_top", top)
            .returns(PAYMENTS_TOP)
            .thinking("Start with resource usage of the payments-api pods against their limits."),
    );
    let throttling = json!({
        "query": "sum(rate(container_cpu_cfs_throttled_periods_total{namespace=\"payments\",container=\"payments-api\"}[5m])) \
                  / sum(rate(container_cpu_cfs_periods_total{namespace=\"payments\",container=\"payments-api\"}[5m]))",
    });
    d.tool_step(
        metrics,
        Step::call("prometheus", "execute_query", throttling)
            .returns(PAYMENTS_THROTTLING)
            .thinking("All routes slowed down together, which smells like CPU. Check throttling."),
    );
    let hpa = json!({
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "namespace": "payments",
        "name": "payments-api",
    });
    d.tool_step(
        pods,
        Step::call("kubernetes", "resources_get", hpa)
            .returns(PAYMENTS_HPA)
            .thinking("Every pod sits at its 500m CPU limit. Why did the autoscaler not add pods?"),
    );
    let traffic = json!({
        "query": "sum(rate(http_requests_total{service=\"payments-api\"}[5m])) \
                  / sum(rate(http_requests_total{service=\"payments-api\"}[5m] offset 1h))",
    });
    d.tool_step(
        metrics,
        Step::call("prometheus", "execute_query", traffic)
            .returns(PAYMENTS_TRAFFIC)
            .thinking(
                "Throttling needs more work to throttle on. Compare traffic with an hour ago.",
            ),
    );
    let database = json!({
        "query": "histogram_quantile(0.99, sum by (le) \
                  (rate(pg_client_query_duration_seconds_bucket{service=\"payments-api\"}[5m])))",
    });
    d.tool_step(
        metrics,
        Step::call("prometheus", "execute_query", database)
            .returns(PAYMENTS_DB_P99)
            .thinking("Rule out the database before blaming CPU alone."),
    );
    d.answer(
        pods,
        Llm::FinalAnalysis,
        Some("Pods are pinned at the CPU limit and the HPA cannot grow past 6 replicas."),
        PAYMENTS_PODS_FINDING,
    );
    d.end_agent(pods, ExecutionStatus::Completed, None);
    d.answer(
        metrics,
        Llm::FinalAnalysis,
        Some(
            "Traffic +41%, 63% of CPU periods throttled, database fast: the service is CPU-bound.",
        ),
        PAYMENTS_METRICS_FINDING,
    );
    d.end_agent(metrics, ExecutionStatus::Completed, None);

    // The sub-agents' analyses are the results of the orchestrator's two tool calls.
    for (call_id, finding) in [
        (&metrics_call, PAYMENTS_METRICS_FINDING),
        (&pods_call, PAYMENTS_PODS_FINDING),
    ] {
        d.message(
            lead,
            Msg::Tool {
                call_id,
                function: "dispatch_agent",
                content: finding,
            },
        );
    }
    d.answer(
        lead,
        Llm::FinalAnalysis,
        Some(
            "Both reports agree: a 41% traffic increase met an HPA capped at 6 replicas and a \
             500m CPU limit. Throttling, not a dependency, explains the p99.",
        ),
        PAYMENTS_FINAL,
    );
    d.summarize(lead, PAYMENTS_SUMMARY);
    d.end_agent(lead, ExecutionStatus::Completed, None);
    d.end_stage(st);
    let outcome = Outcome {
        final_analysis: Some(PAYMENTS_FINAL),
        executive_summary: Some(PAYMENTS_SUMMARY),
        error: None,
    };
    d.settle(s, SessionStatus::Completed, outcome);
}

const PAYMENTS_METRICS_TASK: &str = "\
Break down the p99 latency of payments-api (namespace payments, cluster prod-us-east-1) by route \
over the last hour, and check CPU throttling, traffic and database latency.";

const PAYMENTS_PODS_TASK: &str = "\
Check the payments-api pods in namespace payments (cluster prod-us-east-1) for CPU and memory \
saturation, restarts and the state of their HorizontalPodAutoscaler.";

const PAYMENTS_P99: &str = r#"{"resultType": "matrix", "result": [
  {"metric": {"route": "/v1/charges"}, "values": [[1795161300, "0.412"], [1795162200, "0.436"], [1795163100, "0.981"], [1795164000, "1.524"], [1795164900, "1.917"]]},
  {"metric": {"route": "/v1/refunds"}, "values": [[1795161300, "0.221"], [1795162200, "0.224"], [1795163100, "0.262"], [1795164000, "0.289"], [1795164900, "0.308"]]},
  {"metric": {"route": "/v1/payment-methods"}, "values": [[1795161300, "0.094"], [1795162200, "0.097"], [1795163100, "0.188"], [1795164000, "0.301"], [1795164900, "0.352"]]}
]}"#;

const PAYMENTS_TOP: &str = "\
NAME                           CPU(cores)   MEMORY(bytes)
payments-api-5f7c9d8b4-2xkqp   499m         611Mi
payments-api-5f7c9d8b4-7hn4c   500m         598Mi
payments-api-5f7c9d8b4-b9l2t   497m         623Mi
payments-api-5f7c9d8b4-jx8wd   500m         605Mi
payments-api-5f7c9d8b4-q4m7z   498m         617Mi
payments-api-5f7c9d8b4-zr5vk   500m         609Mi";

const PAYMENTS_THROTTLING: &str =
    r#"{"resultType": "vector", "result": [{"metric": {}, "value": [1795164960.5, "0.634"]}]}"#;

const PAYMENTS_HPA: &str = "\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: payments-api
  namespace: payments
spec:
  minReplicas: 3
  maxReplicas: 6
  metrics:
  - type: Resource
    resource:
      name: cpu
      target: {type: Utilization, averageUtilization: 70}
status:
  currentReplicas: 6
  desiredReplicas: 6
  currentMetrics:
  - type: Resource
    resource:
      name: cpu
      current: {averageUtilization: 199, averageValue: 499m}
  conditions:
  - type: AbleToScale
    status: \"True\"
    reason: ReadyForNewScale
  - type: ScalingLimited
    status: \"True\"
    reason: TooManyReplicas
    message: the desired replica count is more than the maximum replica count";

const PAYMENTS_TRAFFIC: &str =
    r#"{"resultType": "vector", "result": [{"metric": {}, "value": [1795164975.2, "1.41"]}]}"#;

const PAYMENTS_DB_P99: &str =
    r#"{"resultType": "vector", "result": [{"metric": {}, "value": [1795164990.8, "0.019"]}]}"#;

const PAYMENTS_PODS_FINDING: &str = "\
All 6 payments-api pods run at their 500m CPU limit (497–500m) with memory well below the 1Gi \
limit and no restarts. The HPA `payments-api` is at `maxReplicas: 6` with CPU at 199% of \
requests and reports `ScalingLimited: TooManyReplicas`: it wants more pods but may not add them.";

const PAYMENTS_METRICS_FINDING: &str = "\
Traffic is 41% above the same time an hour ago. 63% of the container's CFS periods are \
throttled. The p99 of /v1/charges rose from 0.41 s to 1.92 s, other routes less. Database p99 \
is 19 ms, so the dependency is not the bottleneck. Queries: \
`histogram_quantile(0.99, … http_server_request_duration_seconds_bucket …)`, \
`container_cpu_cfs_throttled_periods_total / container_cpu_cfs_periods_total`, \
`rate(http_requests_total[5m]) / … offset 1h`, `pg_client_query_duration_seconds`.";

const PAYMENTS_FINAL: &str = "\
## Root cause
payments-api is CPU-bound. Traffic grew 41% within the hour; the HorizontalPodAutoscaler is \
already at its ceiling of 6 replicas (`ScalingLimited: TooManyReplicas`) and every pod is held \
at its 500m CPU limit, with 63% of CFS periods throttled. Requests queue behind throttled \
threads, so /v1/charges (the most CPU-heavy route) went from 0.41 s to 1.92 s p99. Postgres \
(p99 19 ms) is healthy.

## Remediation
1. Raise `maxReplicas` of `payments/payments-api` from 6 to 12; the node pool has headroom for \
6 more pods of this size.
2. Raise the CPU limit to 1 core (keep the 250m request) so bursts are not throttled.
3. Watch p99 of /v1/charges return below 750 ms within 10 minutes of the change.

## Follow-up
- Alert when the HPA reports `ScalingLimited` for more than 5 minutes.
- Load-test payments-api at 2× peak traffic before the seasonal peak.";

const PAYMENTS_SUMMARY: &str = "\
payments-api p99 latency is 1.9 s because a 41% traffic increase hit an autoscaler capped at 6 \
replicas and pods throttled at a 500m CPU limit; dependencies are healthy. Raise maxReplicas to \
12 and the CPU limit to 1 core.";

/// Failed: the same three-stage chain, but its parallel stage requires `all` agents to succeed
/// and ArgoCDAgent fails (its MCP server is down, then its LLM stream breaks), so the stage and
/// the session fail and the last stage never starts.
fn oom_failed(d: &mut Demo) {
    let s = d.session(
        110,
        Alert {
            key: "analytics-oom",
            alert_type: "KubeContainerOOMKilled",
            chain_id: "kubernetes-deep-dive",
            runbook_url: "https://runbooks.example.com/kubernetes/KubeContainerOOMKilled",
            data: json!({
                "alertname": "KubeContainerOOMKilled",
                "severity": "warning",
                "cluster": "prod-eu-west-1",
                "namespace": "data",
                "pod": "analytics-worker-6b5d7c9f8-q8z2m",
                "container": "worker",
                "summary": "Container worker in pod data/analytics-worker-6b5d7c9f8-q8z2m was OOMKilled.",
                "description": "Container worker has been OOMKilled 6 times in the last hour.",
                "starts_at": "2026-11-20T09:46:02Z",
            }),
        },
    );
    d.start(s);
    let st = d.stage(s, "Initial Analysis", Agents::One);
    let k8s = d.agent(st, &KUBERNETES_AGENT, None);
    d.begin(
        k8s,
        "Alert KubeContainerOOMKilled (warning) in cluster prod-eu-west-1:\n\
         Container worker in pod data/analytics-worker-6b5d7c9f8-q8z2m was OOMKilled 6 times in \
         the last hour.\n\
         Find out why it runs out of memory.",
    );
    let pod = json!({ "namespace": "data", "name": "analytics-worker-6b5d7c9f8-q8z2m" });
    d.tool_step(
        k8s,
        Step::call("kubernetes", "pods_get", pod)
            .returns(ANALYTICS_POD)
            .thinking("Confirm the kill reason and the memory limit it hits.")
            .summary(
                "Container worker: last terminated OOMKilled (exit code 137) after 41 min, 6 \
                 restarts; memory limit 512Mi, request 256Mi; image analytics-worker:3.2.0; \
                 pod created 06:52.",
            ),
    );
    d.answer(
        k8s,
        Llm::FinalAnalysis,
        Some("An OOM kill after 41 minutes suggests steady growth rather than a single spike."),
        OOM_INITIAL,
    );
    d.end_agent(k8s, ExecutionStatus::Completed, None);
    d.end_stage(st);

    let findings = format!("Findings of stage 'Initial Analysis':\n{OOM_INITIAL}");
    let deep_dive = Agents::Parallel(ParallelType::MultiAgent, SuccessPolicy::All, 3);
    let st = d.stage(s, "Deep Dive", deep_dive);
    let k8s = d.agent(st, &KUBERNETES_AGENT, None);
    let argo = d.agent(st, &ARGOCD_AGENT, None);
    let prom = d.agent(st, &PROMETHEUS_AGENT, None);
    d.begin(
        k8s,
        &format!("{findings}\n\nTask: compare memory usage across the replicas."),
    );
    d.begin(
        argo,
        &format!("{findings}\n\nTask: find out what changed in the 06:52 rollout."),
    );
    d.begin(
        prom,
        &format!("{findings}\n\nTask: show how memory evolved before and after 06:52."),
    );
    let top =
        json!({ "namespace": "data", "label_selector": "app.kubernetes.io/name=analytics-worker" });
    d.tool_step(
        k8s,
        Step::call("kubernetes", "pods_top", top)
            .returns(ANALYTICS_TOP)
            .thinking("If memory grows with uptime, the replicas sit at different levels."),
    );
    let memory = json!({
        "query": "max by (image) (container_memory_working_set_bytes{namespace=\"data\",container=\"worker\"})",
        "start": "2026-11-20T06:00:00Z",
        "end": "2026-11-20T09:50:00Z",
        "step": "10m",
    });
    d.tool_step(
        prom,
        Step::call("prometheus", "execute_range_query", memory)
            .returns(ANALYTICS_MEMORY)
            .thinking("Compare the working set before and after the 06:52 release.")
            .summary(
                "Before 06:52 (3.1.4) the working set was flat at 180–210 MiB per pod. Since \
                 3.2.0 every pod grows by about 8 MiB per minute until it is killed at 512 MiB, \
                 a cycle of roughly 40 minutes.",
            ),
    );
    let app = json!({ "applicationName": "analytics-worker-prod" });
    d.tool_step(
        argo,
        Step::call("argocd", "get_application", app)
            .fails(ARGOCD_UNREACHABLE)
            .say("I'll look up which revision of analytics-worker-prod was synced around 06:52."),
    );
    d.answer(
        k8s,
        Llm::FinalAnalysis,
        Some("Memory tracks uptime across replicas: a leak, not load."),
        OOM_PODS_FINDING,
    );
    d.end_agent(k8s, ExecutionStatus::Completed, None);
    d.answer(
        prom,
        Llm::FinalAnalysis,
        Some("The growth starts exactly with 3.2.0 and is linear."),
        OOM_MEMORY_FINDING,
    );
    d.end_agent(prom, ExecutionStatus::Completed, None);
    d.broken_llm(
        argo,
        Some((
            Kind::LlmResponse,
            "The Argo CD API refuses connections, so I can't read the sync history directly. \
             Based on the image tag in the pod spec, the release",
        )),
        TimelineEventStatus::Failed,
        "stream error: stream ID 7; INTERNAL_ERROR; received from peer",
        21_400,
    );
    d.end_agent(
        argo,
        ExecutionStatus::Failed,
        Some(
            "LLM stream failed: stream ID 7; INTERNAL_ERROR; received from peer (the argocd MCP \
             server was unreachable before that)",
        ),
    );
    let error = d.end_stage(st);
    let outcome = Outcome {
        error: error.map(|e| format!("stage 'Deep Dive' failed: {e}")),
        ..Outcome::default()
    };
    d.settle(s, SessionStatus::Failed, outcome);
}

const ANALYTICS_POD: &str = "\
apiVersion: v1
kind: Pod
metadata:
  name: analytics-worker-6b5d7c9f8-q8z2m
  namespace: data
  creationTimestamp: \"2026-11-20T06:52:40Z\"
  ownerReferences:
  - kind: ReplicaSet
    name: analytics-worker-6b5d7c9f8
spec:
  containers:
  - name: worker
    image: registry.example.com/data/analytics-worker:3.2.0
    args: [\"--queue=events\", \"--batch-size=500\"]
    resources:
      requests: {cpu: 250m, memory: 256Mi}
      limits: {cpu: \"1\", memory: 512Mi}
status:
  phase: Running
  containerStatuses:
  - name: worker
    ready: true
    restartCount: 6
    state:
      running: {startedAt: \"2026-11-20T09:36:11Z\"}
    lastState:
      terminated:
        exitCode: 137
        reason: OOMKilled
        startedAt: \"2026-11-20T08:54:57Z\"
        finishedAt: \"2026-11-20T09:36:09Z\"";

const OOM_INITIAL: &str = "\
Container `worker` of `data/analytics-worker-6b5d7c9f8-q8z2m` is OOMKilled (exit code 137) at \
its 512Mi limit after about 40 minutes of uptime, 6 times in the last hour. The pod runs \
`analytics-worker:3.2.0`, rolled out at 06:52. Next: the memory trend across replicas and \
versions, and what the 06:52 rollout changed.";

const ANALYTICS_TOP: &str = "\
NAME                               CPU(cores)   MEMORY(bytes)
analytics-worker-6b5d7c9f8-q8z2m   412m         291Mi
analytics-worker-6b5d7c9f8-tw9rx   388m         489Mi
analytics-worker-6b5d7c9f8-vd5hn   405m         402Mi";

const ANALYTICS_MEMORY: &str = r#"{"resultType": "matrix", "result": [
  {"metric": {"image": "registry.example.com/data/analytics-worker:3.1.4"}, "values": [[1795154400, "201326592"], [1795155600, "196083712"], [1795156800, "209715200"]]},
  {"metric": {"image": "registry.example.com/data/analytics-worker:3.2.0"}, "values": [[1795158000, "245366784"], [1795159200, "413138944"], [1795160400, "121634816"], [1795162200, "359661568"], [1795164000, "509607936"], [1795168200, "512753664"]]}
]}"#;

const ARGOCD_UNREACHABLE: &str = "rpc error: code = Unavailable desc = connection error: desc = \
    \"transport: Error while dialing: dial tcp 10.96.112.40:443: connect: connection refused\"";

const OOM_PODS_FINDING: &str = "\
The three replicas use 291Mi, 402Mi and 489Mi, in the order of their uptime since the last \
restart, under the same load (388–412m CPU each). Memory grows with uptime rather than with \
work: a leak introduced by the running version, not an undersized limit.";

const OOM_MEMORY_FINDING: &str = "\
Up to the 06:52 rollout (3.1.4) the worker's working set was flat at 180–210 MiB. Since 3.2.0 \
it grows by about 8 MiB/min in every pod until the kernel kills it at 512 MiB, every ~40 \
minutes. Query: `max by (image) (container_memory_working_set_bytes{namespace=\"data\", \
container=\"worker\"})`.";

/// Cancelled: someone stops the session while the second stage's agent waits for a tool.
fn backup_cancelled(d: &mut Demo) {
    let s = d.session(
        160,
        Alert {
            key: "nightly-backup-failed",
            alert_type: "KubeJobFailed",
            chain_id: "kubernetes-quick-look",
            runbook_url: "https://runbooks.example.com/kubernetes/KubeJobFailed",
            data: json!({
                "alertname": "KubeJobFailed",
                "severity": "warning",
                "cluster": "prod-eu-west-1",
                "namespace": "db",
                "job_name": "nightly-backup-29384160",
                "summary": "Job db/nightly-backup-29384160 failed to complete.",
                "description": "Job db/nightly-backup-29384160 of CronJob nightly-backup failed \
                                (BackoffLimitExceeded).",
                "starts_at": "2026-11-20T10:37:15Z",
            }),
        },
    );
    d.start(s);
    let st = d.stage(s, "Initial Analysis", Agents::One);
    let k8s = d.agent(st, &KUBERNETES_AGENT, None);
    d.begin(
        k8s,
        "Alert KubeJobFailed (warning) in cluster prod-eu-west-1:\n\
         Job db/nightly-backup-29384160 (CronJob nightly-backup) failed with \
         BackoffLimitExceeded.\n\
         Find out why the backup fails.",
    );
    let job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "namespace": "db",
        "name": "nightly-backup-29384160",
    });
    d.tool_step(
        k8s,
        Step::call("kubernetes", "resources_get", job)
            .returns(BACKUP_JOB)
            .thinking("Check how the job failed and which pods it left behind.")
            .summary(
                "Job nightly-backup-29384160 failed: 4 failed pods (backoffLimit 3), \
                 BackoffLimitExceeded at 10:36:58, 7 minutes after it started. It runs pg_dump \
                 against postgres-primary.db.svc with credentials from Secret \
                 backup-credentials.",
            ),
    );
    d.answer(k8s, Llm::FinalAnalysis, None, BACKUP_INITIAL);
    d.end_agent(k8s, ExecutionStatus::Completed, None);
    d.end_stage(st);

    let st = d.stage(s, "Root Cause", Agents::One);
    let k8s = d.agent(st, &KUBERNETES_AGENT, None);
    d.begin(
        k8s,
        &format!(
            "Findings of stage 'Initial Analysis':\n{BACKUP_INITIAL}\n\n\
             Task: find out why pg_dump cannot connect."
        ),
    );
    let logs = json!({ "namespace": "db", "name": "nightly-backup-29384160-7kq2n", "tail": 20 });
    d.tool_step(
        k8s,
        Step::call("kubernetes", "pods_log", logs)
            .returns(BACKUP_LOG)
            .thinking("The last attempt's log should show what pg_dump complained about."),
    );
    let secret = json!({
        "apiVersion": "external-secrets.io/v1beta1",
        "kind": "ExternalSecret",
        "namespace": "db",
        "name": "backup-credentials",
    });
    // This call never returns: dana.r@example.com cancels the session while it runs.
    d.tool_step(
        k8s,
        Step::call("kubernetes", "resources_get", secret).thinking(
            "Password authentication fails, so the password in backup-credentials no longer \
             matches the database. The ExternalSecret's last refresh tells when it changed.",
        ),
    );
    let by = "cancelled by dana.r@example.com";
    d.end_agent(k8s, ExecutionStatus::Cancelled, Some(by));
    d.end_stage(st);
    let outcome = Outcome {
        error: Some(format!(
            "{by}: known issue, backup credentials are being rotated (CHG-20412)"
        )),
        ..Outcome::default()
    };
    d.settle(s, SessionStatus::Cancelled, outcome);
}

const BACKUP_JOB: &str = "\
apiVersion: batch/v1
kind: Job
metadata:
  name: nightly-backup-29384160
  namespace: db
  ownerReferences:
  - kind: CronJob
    name: nightly-backup
spec:
  backoffLimit: 3
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: pg-dump
        image: registry.example.com/db/pg-backup:16.4-2
        command: [\"/bin/sh\", \"-c\", \"pg_dump -Fc -h postgres-primary.db.svc -U backup orders | aws s3 cp - s3://example-db-backups/orders/$(date +%F).dump\"]
        envFrom:
        - secretRef:
            name: backup-credentials
status:
  failed: 4
  startTime: \"2026-11-20T10:30:00Z\"
  conditions:
  - type: Failed
    status: \"True\"
    reason: BackoffLimitExceeded
    message: Job has reached the specified backoff limit
    lastTransitionTime: \"2026-11-20T10:36:58Z\"";

const BACKUP_INITIAL: &str = "\
The nightly backup job failed all 4 attempts (backoffLimit 3) within 7 minutes, so pg_dump \
fails right away rather than running out of time. Next: read the last attempt's log and check \
the credentials it uses (Secret `db/backup-credentials`).";

const BACKUP_LOG: &str = "\
pg_dump: error: connection to server at \"postgres-primary.db.svc\" (10.96.44.12), port 5432 \
failed: FATAL:  password authentication failed for user \"backup\"
upload failed: - to s3://example-db-backups/orders/2026-11-20.dump An error occurred \
(InvalidRequest) when calling the PutObject operation: empty stream";

/// Timed out: the only agent's LLM call exceeds its deadline, which ends the agent, its stage
/// and the session as timed out.
fn disk_timed_out(d: &mut Demo) {
    let s = d.session(
        210,
        Alert {
            key: "kafka-volume-filling",
            alert_type: "KubePersistentVolumeFillingUp",
            chain_id: "kubernetes-quick-look",
            runbook_url: "https://runbooks.example.com/kubernetes/KubePersistentVolumeFillingUp",
            data: json!({
                "alertname": "KubePersistentVolumeFillingUp",
                "severity": "critical",
                "cluster": "prod-us-east-1",
                "namespace": "streaming",
                "persistentvolumeclaim": "data-kafka-2",
                "summary": "PersistentVolume is filling up.",
                "description": "The PersistentVolume claimed by data-kafka-2 in namespace \
                                streaming is only 3.9% free.",
                "starts_at": "2026-11-20T11:28:45Z",
            }),
        },
    );
    d.start(s);
    let st = d.stage(s, "Initial Analysis", Agents::One);
    let k8s = d.agent(st, &KUBERNETES_AGENT, None);
    d.begin(
        k8s,
        "Alert KubePersistentVolumeFillingUp (critical) in cluster prod-us-east-1:\n\
         The volume of PVC streaming/data-kafka-2 is only 3.9% free.\n\
         Find out what fills it and how much time is left.",
    );
    let logs =
        json!({ "namespace": "streaming", "name": "kafka-2", "container": "kafka", "tail": 200 });
    d.tool_step(
        k8s,
        Step::call("kubernetes", "pods_log", logs)
            .returns(KAFKA_LOG)
            .thinking("Kafka's log cleaner reports which partitions it deletes, or does not.")
            .summary(
                "The broker deletes old segments of orders and payments, but topic clickstream \
                 has retention.ms=-1 and retention.bytes=-1, so its segments are never deleted. \
                 The log directory is 96.1% full (480.5 of 500 GiB).",
            ),
    );
    let pvc = json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": "streaming",
        "name": "data-kafka-2",
    });
    d.tool_step(
        k8s,
        Step::call("kubernetes", "resources_get", pvc)
            .returns(KAFKA_PVC)
            .thinking("Check whether the volume can be expanded online."),
    );
    d.broken_llm(
        k8s,
        Some((
            Kind::LlmThinking,
            "The clickstream topic has infinite retention, which explains the steady growth. To \
             choose between expanding the volume and restoring retention I should compare the \
             growth rate with",
        )),
        TimelineEventStatus::TimedOut,
        "context deadline exceeded",
        120_000,
    );
    d.end_agent(
        k8s,
        ExecutionStatus::TimedOut,
        Some("iteration timeout: gemini-2.5-pro did not finish within 120s"),
    );
    let error = d.end_stage(st);
    let outcome = Outcome {
        error: error.map(|e| format!("stage 'Initial Analysis' timed out: {e}")),
        ..Outcome::default()
    };
    d.settle(s, SessionStatus::TimedOut, outcome);
}

const KAFKA_LOG: &str = "\
[2026-11-20 11:20:04,118] INFO [LocalLog partition=orders-3, dir=/var/lib/kafka/data] Deleting segment files LogSegment(baseOffset=88213344, size=1073741270) (kafka.log.LocalLog$)
[2026-11-20 11:20:04,120] INFO [UnifiedLog partition=payments-1, dir=/var/lib/kafka/data] Deleting segments due to log retention time 604800000ms breach (kafka.log.UnifiedLog)
[2026-11-20 11:24:51,502] INFO [ProducerStateManager partition=clickstream-7] Wrote producer snapshot at offset 1938204411 (kafka.log.ProducerStateManager)
[2026-11-20 11:24:51,503] INFO [LocalLog partition=clickstream-7, dir=/var/lib/kafka/data] Rolled new log segment at offset 1938204411 (kafka.log.LocalLog)
[2026-11-20 11:25:12,009] WARN [LogCleaner] Topic clickstream has retention.ms=-1 and retention.bytes=-1; segments are never deleted (kafka.log.LogCleanerManager)
[2026-11-20 11:25:12,010] INFO [LogDirFailureChannel] Log directory /var/lib/kafka/data usage 96.1% (480.5 GiB of 500 GiB) (kafka.server.LogDirFailureChannel)";

const KAFKA_PVC: &str = "\
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data-kafka-2
  namespace: streaming
spec:
  storageClassName: gp3-expandable
  accessModes: [ReadWriteOnce]
  resources:
    requests: {storage: 500Gi}
status:
  phase: Bound
  capacity: {storage: 500Gi}";

/// Cancelling: two replicas of the same agent read logs side by side (`replica`, `any`);
/// cancellation was requested, one replica has stopped and the other is still streaming.
fn ingress_cancelling(d: &mut Demo) {
    let s = d.session(
        260,
        Alert {
            key: "ingress-5xx",
            alert_type: "IngressHigh5xxRate",
            chain_id: "log-replicas",
            runbook_url: "https://runbooks.example.com/ingress/IngressHigh5xxRate",
            data: json!({
                "alertname": "IngressHigh5xxRate",
                "severity": "critical",
                "cluster": "prod-us-east-1",
                "namespace": "ingress-nginx",
                "ingress": "api",
                "host": "api.example.com",
                "summary": "More than 5% of requests to api.example.com fail with 5xx.",
                "description": "5xx ratio on ingress api (api.example.com) is 12.4% over 5 minutes.",
                "starts_at": "2026-11-20T12:18:20Z",
            }),
        },
    );
    d.start(s);
    let replicas = Agents::Parallel(ParallelType::Replica, SuccessPolicy::Any, 2);
    let st = d.stage(s, "Log Analysis", replicas);
    let first = d.agent(st, &LOG_AGENT, None);
    let second = d.agent(st, &LOG_AGENT, None);
    let task = "Alert IngressHigh5xxRate (critical): 12.4% of requests to api.example.com fail \
                with 5xx. Read the ingress-nginx controller logs and group the errors by \
                upstream and cause.";
    d.begin(first, task);
    d.begin(second, task);
    // Each replica reads the log of a different controller pod.
    let pods = [
        (
            first,
            "ingress-nginx-controller-7c6d9f-4hx2v",
            INGRESS_LOG_A,
            INGRESS_SUMMARY_A,
        ),
        (
            second,
            "ingress-nginx-controller-7c6d9f-9mzkp",
            INGRESS_LOG_B,
            INGRESS_SUMMARY_B,
        ),
    ];
    for (agent, pod, log, summary) in pods {
        let args = json!({ "namespace": "ingress-nginx", "name": pod, "tail": 200 });
        d.tool_step(
            agent,
            Step::call("kubernetes", "pods_log", args)
                .returns(log)
                .thinking(
                    "Start from the controller's error log; the upstream address tells \
                     which service fails.",
                )
                .summary(summary),
        );
    }
    d.broken_llm(
        first,
        Some((
            Kind::LlmThinking,
            "Both error signatures point at the same orders-api endpoint. Timeouts first, then \
             refused connections suggests the pod",
        )),
        TimelineEventStatus::Cancelled,
        "context canceled",
        5_200,
    );
    d.end_agent(
        first,
        ExecutionStatus::Cancelled,
        Some("cancelled: session cancellation requested by oncall@example.com"),
    );
    d.streaming(
        second,
        Kind::LlmThinking,
        "Connection refused from 10.42.3.17:8080 means nothing listens on the orders-api pod's \
         port any more; together with the earlier timeouts this looks like",
    );
    d.settle(s, SessionStatus::Cancelling, Outcome::default());
}

const INGRESS_LOG_A: &str = "\
2026/11/20 12:17:58 [error] 412#412: *8812941 upstream timed out (110: Operation timed out) while reading response header from upstream, client: 10.0.4.21, server: api.example.com, request: \"POST /v1/orders HTTP/1.1\", upstream: \"http://10.42.3.17:8080/v1/orders\", host: \"api.example.com\"
2026/11/20 12:18:03 [error] 412#412: *8813307 upstream timed out (110: Operation timed out) while reading response header from upstream, client: 10.0.7.88, server: api.example.com, request: \"GET /v1/orders/ord_8f2k1 HTTP/1.1\", upstream: \"http://10.42.3.17:8080/v1/orders/ord_8f2k1\", host: \"api.example.com\"";

const INGRESS_SUMMARY_A: &str = "\
Errors are upstream timeouts (110) reading response headers from 10.42.3.17:8080, all on \
/v1/orders.";

const INGRESS_SUMMARY_B: &str = "\
Errors are refused connections (111) to 10.42.3.17:8080 on /v1/orders; nginx has marked that \
upstream as temporarily disabled.";

const INGRESS_LOG_B: &str = "\
2026/11/20 12:18:41 [error] 398#398: *9120044 connect() failed (111: Connection refused) while connecting to upstream, client: 10.0.5.13, server: api.example.com, request: \"POST /v1/orders HTTP/1.1\", upstream: \"http://10.42.3.17:8080/v1/orders\", host: \"api.example.com\"
2026/11/20 12:18:44 [warn] 398#398: *9120051 upstream server temporarily disabled while connecting to upstream, upstream: \"http://10.42.3.17:8080/v1/orders\"";

/// In progress: the first stage is done; the second stage's agent is still answering.
fn rollout_in_progress(d: &mut Demo) {
    let s = d.session(
        305,
        Alert {
            key: "frontend-rollout-stuck",
            alert_type: "KubeDeploymentRolloutStuck",
            chain_id: "argocd-rollout",
            runbook_url: "https://runbooks.example.com/kubernetes/KubeDeploymentRolloutStuck",
            data: json!({
                "alertname": "KubeDeploymentRolloutStuck",
                "severity": "warning",
                "cluster": "prod-eu-west-1",
                "namespace": "web",
                "deployment": "frontend",
                "summary": "Deployment web/frontend rollout is not progressing.",
                "description": "Rollout of deployment web/frontend is not progressing for longer \
                                than 15 minutes (ProgressDeadlineExceeded).",
                "starts_at": "2026-11-20T13:03:10Z",
            }),
        },
    );
    d.start(s);
    let st = d.stage(s, "Initial Analysis", Agents::One);
    let k8s = d.agent(st, &KUBERNETES_AGENT, None);
    d.begin(
        k8s,
        "Alert KubeDeploymentRolloutStuck (warning) in cluster prod-eu-west-1:\n\
         The rollout of deployment web/frontend has not progressed for 15 minutes.\n\
         Find out what blocks it.",
    );
    let deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "namespace": "web",
        "name": "frontend",
    });
    d.tool_step(
        k8s,
        Step::call("kubernetes", "resources_get", deployment)
            .returns(FRONTEND_DEPLOYMENT)
            .thinking(
                "The Deployment's conditions and replica counts show where the rollout stopped.",
            ),
    );
    let events = json!({ "namespace": "web", "field_selector": "involvedObject.name=frontend-5d8c7b9f6-kk2wd" });
    d.tool_step(
        k8s,
        Step::call("kubernetes", "events_list", events)
            .returns(FRONTEND_EVENTS)
            .thinking("The one new pod is not ready; its events will say why."),
    );
    d.answer(k8s, Llm::FinalAnalysis, None, FRONTEND_INITIAL);
    d.end_agent(k8s, ExecutionStatus::Completed, None);
    d.end_stage(st);

    let st = d.stage(s, "Sync Analysis", Agents::One);
    let argo = d.agent(st, &ARGOCD_AGENT, None);
    d.begin(
        argo,
        &format!(
            "Findings of stage 'Initial Analysis':\n{FRONTEND_INITIAL}\n\n\
             Task: find out why Argo CD deployed an image tag that does not exist."
        ),
    );
    let app = json!({ "applicationName": "frontend-prod" });
    d.tool_step(
        argo,
        Step::call("argocd", "get_application", app)
            .returns(FRONTEND_APP)
            .say("Let me check which revision Argo CD synced and what it changed."),
    );
    d.streaming(
        argo,
        Kind::LlmResponse,
        "Argo CD synced revision 7be21a0 (\"frontend: bump to 5.3.0\"), which sets the image to \
         registry.example.com/web/frontend:5.3.0. The registry has no such tag, so the",
    );
}

const FRONTEND_DEPLOYMENT: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: frontend
  namespace: web
  generation: 31
spec:
  replicas: 4
  strategy:
    rollingUpdate: {maxSurge: 1, maxUnavailable: 0}
  template:
    spec:
      containers:
      - name: frontend
        image: registry.example.com/web/frontend:5.3.0
status:
  observedGeneration: 31
  replicas: 5
  updatedReplicas: 1
  readyReplicas: 4
  unavailableReplicas: 1
  conditions:
  - type: Available
    status: \"True\"
    reason: MinimumReplicasAvailable
  - type: Progressing
    status: \"False\"
    reason: ProgressDeadlineExceeded
    message: ReplicaSet \"frontend-5d8c7b9f6\" has timed out progressing.";

const FRONTEND_EVENTS: &str = "\
LAST SEEN   TYPE      REASON    OBJECT                         MESSAGE
19m         Normal    Pulling   pod/frontend-5d8c7b9f6-kk2wd   Pulling image \"registry.example.com/web/frontend:5.3.0\"
19m         Warning   Failed    pod/frontend-5d8c7b9f6-kk2wd   Failed to pull image \"registry.example.com/web/frontend:5.3.0\": rpc error: code = NotFound desc = failed to pull and unpack image: manifest unknown
2m          Normal    BackOff   pod/frontend-5d8c7b9f6-kk2wd   Back-off pulling image \"registry.example.com/web/frontend:5.3.0\"";

const FRONTEND_INITIAL: &str = "\
The rollout of `web/frontend` stopped after its first new pod: `frontend-5d8c7b9f6-kk2wd` is in \
ImagePullBackOff because `registry.example.com/web/frontend:5.3.0` does not exist (manifest \
unknown). With `maxUnavailable: 0` the 4 old pods keep serving, so users are not affected yet. \
Next: find out why the Deployment references a tag that was never pushed.";

const FRONTEND_APP: &str = r#"{
  "metadata": {"name": "frontend-prod", "namespace": "argocd"},
  "spec": {"source": {"repoURL": "https://git.example.com/platform/gitops.git", "path": "apps/frontend/overlays/prod", "targetRevision": "main"}},
  "status": {
    "sync": {"status": "Synced", "revision": "7be21a0"},
    "health": {"status": "Progressing", "message": "Waiting for rollout to finish: 1 out of 4 new replicas have been updated..."},
    "operationState": {"phase": "Succeeded", "message": "successfully synced (all tasks run)", "syncResult": {"revision": "7be21a0"}, "finishedAt": "2026-11-20T12:44:52Z"},
    "summary": {"images": ["registry.example.com/web/frontend:5.3.0"]}
  }
}"#;

/// Pending: the alert has arrived and nothing has started yet.
fn node_pending(d: &mut Demo) {
    d.session(
        340,
        Alert {
            key: "node-not-ready",
            alert_type: "KubeNodeNotReady",
            chain_id: "kubernetes-quick-look",
            runbook_url: "https://runbooks.example.com/kubernetes/KubeNodeNotReady",
            data: json!({
                "alertname": "KubeNodeNotReady",
                "severity": "warning",
                "cluster": "prod-eu-west-1",
                "node": "ip-10-0-7-23.eu-west-1.compute.internal",
                "summary": "Node is not ready.",
                "description": "ip-10-0-7-23.eu-west-1.compute.internal has been unready for more \
                                than 15 minutes.",
                "starts_at": "2026-11-20T13:38:30Z",
            }),
        },
    );
}
