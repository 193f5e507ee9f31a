//! The demo's cast: the models and their prices, the agents configured on them, the tools
//! their MCP servers list, and the prompt that asks for an executive summary.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

use crate::pricing::PricingSnapshot;
use crate::store::prices::NewPrice;

/// An LLM as the demo uses it.
pub(super) struct Model {
    pub(super) name: &'static str,
    pub(super) provider: &'static str,
    pub(super) strategy: &'static str,
}

const GEMINI_PRO: Model = Model {
    name: "gemini-2.5-pro",
    provider: "google",
    strategy: "native_thinking",
};
const GEMINI_FLASH: Model = Model {
    name: "gemini-2.5-flash",
    provider: "google",
    strategy: "native_thinking",
};
const GPT_41: Model = Model {
    name: "gpt-4.1",
    provider: "openai",
    strategy: "react",
};
const CLAUDE_SONNET: Model = Model {
    name: "claude-sonnet-4",
    provider: "anthropic",
    strategy: "react",
};

/// US dollars: `units` × 10^-`scale` (a `Decimal` in a constant).
const fn usd(units: u32, scale: u32) -> Decimal {
    Decimal::from_parts(units, 0, 0, false, scale)
}

/// A price of the demo's price list: (model, provider, from, input, output, cached input,
/// thinking), per million tokens.
pub(super) type Price = (
    &'static Model,
    DateTime<Utc>,
    Decimal,
    Decimal,
    Option<Decimal>,
    Option<Decimal>,
);

/// When the demo's price list starts: well before its sessions (and today's live ones).
const LIST_STARTS: DateTime<Utc> = DateTime::from_timestamp_nanos(1_735_689_600_000_000_000);
/// When Gemini 2.5 Flash's price changes: in the middle of the week of alerts, whose earlier
/// sessions keep the old price.
const FLASH_CHANGES: DateTime<Utc> = DateTime::from_timestamp_nanos(1_794_902_400_000_000_000);

/// The demo's price list (`casefile demo` sets it, and prices its calls with it).
pub(super) const PRICES: [Price; 5] = [
    (
        &GEMINI_PRO,
        LIST_STARTS,
        usd(125, 2),
        usd(10, 0),
        Some(usd(31, 2)),
        None,
    ),
    // Thinking once cost more than the rest of the output.
    (
        &GEMINI_FLASH,
        LIST_STARTS,
        usd(15, 2),
        usd(6, 1),
        Some(usd(375, 4)),
        Some(usd(35, 1)),
    ),
    (
        &GEMINI_FLASH,
        FLASH_CHANGES,
        usd(3, 1),
        usd(25, 1),
        Some(usd(75, 3)),
        None,
    ),
    (
        &GPT_41,
        LIST_STARTS,
        usd(2, 0),
        usd(8, 0),
        Some(usd(5, 1)),
        None,
    ),
    (
        &CLAUDE_SONNET,
        LIST_STARTS,
        usd(3, 0),
        usd(15, 0),
        Some(usd(3, 1)),
        None,
    ),
];

/// The demo's prices as the price list takes them.
pub(super) fn price_list() -> Vec<NewPrice> {
    PRICES
        .iter()
        .map(|&(model, from, input, output, cached, thinking)| NewPrice {
            model_name: model.name.to_owned(),
            provider: Some(model.provider.to_owned()),
            effective_from: Some(from),
            input_per_million: input,
            output_per_million: output,
            cached_input_per_million: cached,
            thinking_per_million: thinking,
            created_by: Some("demo".to_owned()),
        })
        .collect()
}

/// The price of `model` in effect at `at`, as the live writer would find it in that list.
pub(super) fn price_at(model: &Model, at: DateTime<Utc>) -> Option<PricingSnapshot> {
    PRICES
        .iter()
        .filter(|(m, from, ..)| m.name == model.name && *from <= at)
        .max_by_key(|(_, from, ..)| *from)
        .map(
            |&(model, from, input, output, cached, thinking)| PricingSnapshot {
                model: model.name.to_owned(),
                provider: Some(model.provider.to_owned()),
                effective_from: from,
                input_per_million: input,
                output_per_million: output,
                cached_input_per_million: cached.unwrap_or(input),
                thinking_per_million: thinking.unwrap_or(output),
            },
        )
}

/// A configured agent: its model, the MCP servers it may use, other functions it may call,
/// and its system prompt.
pub(super) struct Profile {
    pub(super) name: &'static str,
    pub(super) model: &'static Model,
    pub(super) servers: &'static [&'static str],
    functions: &'static [&'static str],
    pub(super) prompt: &'static str,
}

impl Profile {
    /// The function names the model is offered (`server__tool` for MCP tools).
    pub(super) fn tools(&self) -> Vec<String> {
        let mcp = TOOLS
            .iter()
            .filter(|(server, _, _)| self.servers.contains(server))
            .map(|(server, tool, _)| format!("{server}__{tool}"));
        mcp.chain(self.functions.iter().map(|f| f.to_string()))
            .collect()
    }
}

pub(super) const KUBERNETES_AGENT: Profile = Profile {
    name: "KubernetesAgent",
    model: &GEMINI_PRO,
    servers: &["kubernetes"],
    functions: &[],
    prompt: "You are KubernetesAgent, an SRE assistant that investigates alerts in Kubernetes \
             clusters. Use the kubernetes tools to inspect pods, events and resources; never \
             change cluster state. Finish with a concise analysis: root cause, evidence, next \
             steps.",
};
pub(super) const ARGOCD_AGENT: Profile = Profile {
    name: "ArgoCDAgent",
    model: &GPT_41,
    servers: &["argocd"],
    functions: &[],
    prompt: "You are ArgoCDAgent. Find out how Argo CD deployed the affected application: sync \
             status, health, history and recent operations. Do not sync or roll back anything \
             yourself.",
};
pub(super) const PROMETHEUS_AGENT: Profile = Profile {
    name: "PrometheusAgent",
    model: &GEMINI_FLASH,
    servers: &["prometheus"],
    functions: &[],
    prompt: "You are PrometheusAgent. Use PromQL to quantify the problem: when it started, how \
             large it is and what it correlates with. Quote the queries you used.",
};
pub(super) const REMEDIATION_AGENT: Profile = Profile {
    name: "RemediationAgent",
    model: &CLAUDE_SONNET,
    servers: &[],
    functions: &[],
    prompt: "You are RemediationAgent. You receive the findings of the previous investigation \
             stages and turn them into a root cause statement and a short, ordered remediation \
             plan an on-call engineer can follow.",
};
pub(super) const ORCHESTRATOR_AGENT: Profile = Profile {
    name: "OrchestratorAgent",
    model: &CLAUDE_SONNET,
    servers: &[],
    functions: &["dispatch_agent"],
    prompt: "You are OrchestratorAgent. Split the investigation into focused tasks, hand them to \
             specialist agents with dispatch_agent, and combine their findings into one \
             analysis.",
};
pub(super) const TEAM_LEAD_AGENT: Profile = Profile {
    name: "TeamLeadAgent",
    model: &CLAUDE_SONNET,
    servers: &[],
    functions: &["dispatch_agent"],
    prompt: "You are TeamLeadAgent. You lead one team: hand your team's task to a specialist \
             with dispatch_agent, check that its findings answer the task, and report them to \
             the supervisor in a few sentences.",
};
pub(super) const LOG_AGENT: Profile = Profile {
    name: "LogAnalysisAgent",
    model: &GEMINI_FLASH,
    servers: &["kubernetes"],
    functions: &[],
    prompt: "You are LogAnalysisAgent. Read container logs, group the errors by signature and \
             report which of them explain the alert.",
};
pub(super) const CHAT_AGENT: Profile = Profile {
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
pub(super) const TOOLS: &[(&str, &str, &str)] = &[
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

pub(super) const SUMMARY_PROMPT: &str = "Summarize the investigation for the on-call engineer in at most \
                              three sentences: what is broken, why, and the first action.";
