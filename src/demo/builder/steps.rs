//! What agents do, built from the records: frame a conversation, take ReAct steps with MCP
//! tools, answer and summarize, and LLM calls that broke off or are still streaming.

use serde_json::{Value as Json, json};

use super::records::{Event, Msg, Output, Reply};
use super::{Agent, Demo};
use crate::demo::catalog::SUMMARY_PROMPT;
use crate::demo::ids::{FNV_OFFSET, fnv1a};
use crate::model::{LlmInteractionType, TimelineEventStatus, TimelineEventType};

use LlmInteractionType as Llm;
use TimelineEventType as Kind;

/// One ReAct step: the model (maybe thinking or saying something) asks for one MCP tool call,
/// the tool runs, and its result (or a summary of it) goes back into the conversation.
pub(in crate::demo) struct Step<'a> {
    thinking: Option<&'a str>,
    say: Option<&'a str>,
    server: &'a str,
    tool: &'a str,
    args: Json,
    output: Output<'a>,
    summary: Option<&'a str>,
    /// The error of a first attempt that failed, after which the agent retried the call.
    retried_after: Option<&'a str>,
}

impl<'a> Step<'a> {
    /// A call of `tool` on `server`. Until [`Self::returns`] or [`Self::fails`] says how it
    /// ended, it never comes back: the session is cancelled while it runs.
    pub(in crate::demo) fn call(server: &'a str, tool: &'a str, args: Json) -> Self {
        Self {
            thinking: None,
            say: None,
            server,
            tool,
            args,
            output: Output::Cancelled,
            summary: None,
            retried_after: None,
        }
    }
    pub(in crate::demo) fn returns(self, text: &'a str) -> Self {
        Self {
            output: Output::Text(text),
            ..self
        }
    }
    pub(in crate::demo) fn fails(self, error: &'a str) -> Self {
        Self {
            output: Output::Error(error),
            ..self
        }
    }
    pub(in crate::demo) fn thinking(self, text: &'a str) -> Self {
        Self {
            thinking: Some(text),
            ..self
        }
    }
    pub(in crate::demo) fn say(self, text: &'a str) -> Self {
        Self {
            say: Some(text),
            ..self
        }
    }
    /// A first attempt failed with `error` and the agent ran the call again (seed 003's
    /// retries): the failed attempt is a debug record of its own, the model sees only the last.
    pub(in crate::demo) fn retried_after(self, error: &'a str) -> Self {
        Self {
            retried_after: Some(error),
            ..self
        }
    }
    /// The result was long: the agent summarized it and sent the summary to the model.
    pub(in crate::demo) fn summary(self, text: &'a str) -> Self {
        Self {
            summary: Some(text),
            ..self
        }
    }
}

impl Demo {
    /// An agent lists its tools and frames its conversation: system prompt, then the task.
    pub(in crate::demo) fn begin(&mut self, a: Agent, task: &str) {
        self.list_tools(a);
        self.message(a, Msg::System(a.profile.prompt));
        self.message(a, Msg::User(task));
    }

    /// An OpenAI-style call id, stable per execution.
    pub(in crate::demo) fn call_id(&mut self, a: Agent) -> String {
        let n = self.next(a.id, "call");
        format!(
            "call_{:016x}",
            fnv1a(FNV_OFFSET, &format!("{}/call/{n}", a.id))
        )
    }

    /// The model reasons and asks for tool calls: one iteration, its timeline events and the
    /// assistant message carrying the calls. `calls` are (call id, function, arguments).
    pub(in crate::demo) fn request_tools(
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
    pub(in crate::demo) fn tool_step(&mut self, a: Agent, step: Step<'_>) {
        let call_id = self.call_id(a);
        let function = format!("{}__{}", step.server, step.tool);
        self.request_tools(
            a,
            step.thinking,
            step.say,
            &[(&call_id, &function, &step.args)],
        );
        let since = self.now;
        let tool = (step.server, step.tool);
        let mut attempt = 1;
        if let Some(error) = step.retried_after {
            self.mcp(
                a,
                tool,
                &step.args,
                Output::Error(error),
                (&call_id, attempt),
            );
            attempt += 1;
        }
        let mcp = self.mcp(a, tool, &step.args, step.output, (&call_id, attempt));
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
    pub(in crate::demo) fn answer(
        &mut self,
        a: Agent,
        kind: LlmInteractionType,
        thinking: Option<&str>,
        text: &str,
    ) {
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
    pub(in crate::demo) fn summarize(&mut self, a: Agent, text: &str) {
        self.message(a, Msg::User(SUMMARY_PROMPT));
        self.answer(a, Llm::ExecutiveSummary, None, text);
    }

    /// An LLM call that broke off after `ms`. If something had streamed, its event ends with
    /// `status` (failed, cancelled or timed out) and links to the failed interaction.
    pub(in crate::demo) fn broken_llm(
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
    pub(in crate::demo) fn streaming(&mut self, a: Agent, kind: TimelineEventType, partial: &str) {
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
}
