//! What an agent execution leaves behind, one row at a time: conversation messages, timeline
//! events, and LLM and MCP interactions whose tokens, costs and durations follow from the text.

use chrono::{DateTime, Utc};
use serde_json::{Value as Json, json};
use uuid::Uuid;

use super::{Agent, Demo};
use crate::demo::catalog::{TOOLS, price_at};
use crate::demo::ids::{FNV_OFFSET, fnv1a};
use crate::model::{
    CostSource, LlmInteractionType, McpInteractionType, MessageRole, TimelineEventStatus,
    TimelineEventType,
};
use crate::pricing;
use crate::store::{
    LlmInteractionRow, LlmPayloadRow, LlmRequestRow, McpInteractionRow, McpPayloadRow, MessageRow,
    TimelineEventRow,
};

/// One message of an execution's LLM conversation.
pub(in crate::demo) enum Msg<'a> {
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
pub(super) enum Output<'a> {
    Text(&'a str),
    Error(&'a str),
    Cancelled,
}

/// A timeline event about to be written; it is created `since` and last updated now.
pub(super) struct Event {
    kind: TimelineEventType,
    status: TimelineEventStatus,
    content: String,
    metadata: Json,
    llm: Option<Uuid>,
    mcp: Option<Uuid>,
    since: DateTime<Utc>,
}

impl Event {
    pub(super) fn new(
        kind: TimelineEventType,
        content: impl Into<String>,
        since: DateTime<Utc>,
    ) -> Self {
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
    pub(super) fn status(self, status: TimelineEventStatus) -> Self {
        Self { status, ..self }
    }
    pub(super) fn meta(self, metadata: Json) -> Self {
        Self { metadata, ..self }
    }
    pub(super) fn llm(self, id: Uuid) -> Self {
        Self {
            llm: Some(id),
            ..self
        }
    }
    pub(super) fn mcp(self, id: Uuid) -> Self {
        Self {
            mcp: Some(id),
            ..self
        }
    }
}

impl Demo {
    pub(in crate::demo) fn message(&mut self, a: Agent, msg: Msg<'_>) {
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
        self.rows.messages.push(MessageRow {
            id,
            session_id: a.session,
            stage_id: a.stage,
            execution_id: a.id,
            sequence_number: n,
            role,
            content: content.into(),
            tool_call_id,
            tool_name,
            tool_calls: tool_calls.as_ref().map(crate::store::raw_json),
            created_at: self.now,
        });
        self.wait(40);
    }

    pub(super) fn event(&mut self, a: Agent, event: Event) {
        let n = self.next(a.session, "event");
        let id = Self::child_id(a.session, "event", n, event.since);
        self.rows.timeline_events.push(TimelineEventRow {
            id,
            session_id: a.session,
            stage_id: a.stage,
            execution_id: a.id,
            sequence_number: i64::from(n),
            event_type: event.kind,
            status: event.status,
            content: event.content,
            metadata: crate::store::raw_json(&event.metadata),
            llm_interaction_id: event.llm,
            mcp_interaction_id: event.mcp,
            created_at: event.since,
            updated_at: self.now,
        });
    }

    /// One call to the agent's model with its whole conversation so far (the interaction
    /// points at the last message, so the conversation rebuilt from it is what was sent).
    /// The clock moves past the call; tokens, cost and duration follow from the text.
    pub(super) fn llm(&mut self, a: Agent, kind: LlmInteractionType, reply: Reply<'_>) -> Uuid {
        let model = a.profile.model;
        let tools = a.profile.tools();
        let sent: Vec<&MessageRow> = self
            .rows
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

        // After its first call, an agent's instructions and tool declarations come from the
        // provider's cache.
        let cached = self.ordinals.contains_key(&(a.id, "llm"));
        let (response, usage, ms) = match reply.failure {
            None => {
                let usage = Usage::estimate(tools.len(), sent_chars, &reply, cached);
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
                        "cached_input_tokens": usage.cached,
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
        // Priced as the live writer prices a call: at its time, from the demo's price list.
        let counts = usage.map(|u| pricing::Usage {
            input: Some(u.input),
            cached_input: u.cached,
            output: Some(u.output),
            thinking: u.thinking,
        });
        let price = counts.and_then(|_| price_at(model, self.now));
        let cost = counts.zip(price.as_ref()).map(|(c, p)| p.cost(c));
        let cost_source = match (counts, &price) {
            (None, _) => CostSource::NoTokens,
            (Some(_), None) => CostSource::NoPrice,
            (Some(_), Some(_)) => CostSource::PriceList,
        };
        let n = self.next(a.id, "llm");
        let id = Self::child_id(a.id, "llm", n, self.now);
        let request = LlmRequestRow {
            id,
            session_id: a.session,
            llm_request: request,
        };
        let payload = LlmPayloadRow {
            id,
            session_id: a.session,
            llm_response: response,
            thinking_content: reply.thinking.map(Into::into),
            response_metadata: json!({
                "provider": model.provider,
                "request_id": format!("req_{:016x}", fnv1a(FNV_OFFSET, &id.to_string())),
                "streamed": true,
                "attempts": attempts,
            }),
        };
        let row = LlmInteractionRow {
            id,
            session_id: a.session,
            stage_id: a.stage,
            execution_id: a.id,
            interaction_type: kind,
            model_name: model.name.into(),
            last_message_id: last_message.map(|(id, _)| id),
            input_tokens: usage.map(|u| u.input),
            output_tokens: usage.map(|u| u.output),
            total_tokens: usage.map(|u| u.input + u.output),
            thinking_tokens: usage.and_then(|u| u.thinking),
            estimated_cost_usd: cost.map(|c| c.total),
            duration_ms: Some(ms),
            error_message: error,
            created_at: self.now,
            cached_input_tokens: usage.and_then(|u| u.cached),
            input_cost_usd: cost.map(|c| c.input),
            output_cost_usd: cost.map(|c| c.output),
            cost_source: Some(cost_source),
            pricing_snapshot: price.map(sqlx::types::Json),
            sent_message_ids: None,
        };
        self.rows.llm_interactions.push((row, request, payload));
        id
    }

    /// One attempt at an MCP tool call (`call_id`, attempt from 1), of `tool` on `server`;
    /// the clock moves past it.
    pub(super) fn mcp(
        &mut self,
        a: Agent,
        (server, tool): (&str, &str),
        args: &Json,
        output: Output<'_>,
        (call_id, attempt): (&str, i32),
    ) -> Uuid {
        // MCP results are a list of content blocks plus an error flag.
        let content = |text: &str, is_error: bool| json!({ "content": [{ "type": "text", "text": text }], "isError": is_error });
        let (result, error, ms) = match output {
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
        let row = McpInteractionRow {
            id,
            session_id: a.session,
            stage_id: a.stage,
            execution_id: a.id,
            interaction_type: McpInteractionType::ToolCall,
            server_name: server.into(),
            tool_name: Some(tool.into()),
            duration_ms: Some(ms),
            error_message: error,
            created_at: self.now,
            tool_call_id: Some(call_id.to_owned()),
            attempt,
        };
        let payload = McpPayloadRow {
            id,
            session_id: a.session,
            tool_arguments: args.clone(),
            tool_result: result,
            available_tools: json!([]),
        };
        self.rows.mcp_interactions.push((row, payload));
        id
    }

    /// An agent starts by listing the tools of its MCP servers (debug records only).
    pub(super) fn list_tools(&mut self, a: Agent) {
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
            let row = McpInteractionRow {
                id,
                session_id: a.session,
                stage_id: a.stage,
                execution_id: a.id,
                interaction_type: McpInteractionType::ToolList,
                server_name: (*server).into(),
                tool_name: None,
                duration_ms: Some(85),
                error_message: None,
                created_at: self.now,
                tool_call_id: None,
                attempt: 1,
            };
            let payload = McpPayloadRow {
                id,
                session_id: a.session,
                tool_arguments: json!({}),
                tool_result: json!({}),
                available_tools: Json::Array(tools),
            };
            self.rows.mcp_interactions.push((row, payload));
        }
    }
}

/// Tokens and duration of a successful LLM call, estimated from the text involved.
#[derive(Clone, Copy)]
struct Usage {
    /// Cached ones included.
    input: i32,
    cached: Option<i32>,
    /// Thinking included.
    output: i32,
    thinking: Option<i32>,
    ms: i64,
}

impl Usage {
    fn estimate(tool_count: usize, sent_chars: usize, reply: &Reply<'_>, cached: bool) -> Self {
        // System instructions and runbook excerpts, then ~180 tokens per tool declaration.
        let tool_count = i32::try_from(tool_count).unwrap_or(i32::MAX);
        let preamble = 2_400 + 180 * tool_count;
        let input = preamble + tokens(sent_chars);
        let text = tokens(reply.text.len() + reply.calls.to_string().len()) + 12;
        // What is stored of the thinking is a summary; the model thought several times as much.
        let thinking = reply.thinking.map(|t| tokens(t.len()) * 6);
        let output = text + thinking.unwrap_or(0);
        Self {
            input,
            cached: cached.then_some(preamble),
            output,
            thinking,
            // Time to first token, then about 40 tokens per second.
            ms: 1_800 + 25 * i64::from(output),
        }
    }
}

/// What the model sends back: text, maybe thinking and tool calls, or a failure after `ms`.
pub(super) struct Reply<'a> {
    thinking: Option<&'a str>,
    text: &'a str,
    calls: &'a Json,
    failure: Option<(&'a str, i64)>,
}

/// The `calls` of a reply without tool calls.
static NO_CALLS: Json = Json::Null;

impl<'a> Reply<'a> {
    pub(super) fn text(thinking: Option<&'a str>, text: &'a str) -> Self {
        Self {
            thinking,
            text,
            calls: &NO_CALLS,
            failure: None,
        }
    }
    pub(super) fn calls(self, calls: &'a Json) -> Self {
        Self { calls, ..self }
    }
    pub(super) fn failed(error: &'a str, ms: i64) -> Self {
        Self {
            thinking: None,
            text: "",
            calls: &NO_CALLS,
            failure: Some((error, ms)),
        }
    }
}

/// Rough token count of a text (about four characters per token).
fn tokens(chars: usize) -> i32 {
    i32::try_from(chars / 4).unwrap_or(i32::MAX)
}
