//! The demo's cast: the models, the agents configured on them, the tools their MCP servers
//! list, and the prompt that asks for an executive summary.

/// An LLM as the demo uses it; prices are USD per million tokens (thinking bills as output).
pub(super) struct Model {
    pub(super) name: &'static str,
    pub(super) provider: &'static str,
    pub(super) strategy: &'static str,
    pub(super) input_price: f64,
    pub(super) output_price: f64,
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
