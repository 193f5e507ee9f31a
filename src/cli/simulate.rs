//! `casefile simulate`: an agent runtime in miniature. It plays a realistic multi-stage
//! investigation against a running server through the public GraphQL API only — parallel
//! agents, tool calls, thinking, responses streamed at a configurable token rate — so anyone can
//! open GraphiQL, subscribe, and watch it happen.

use std::time::Duration;

use clap::Args;
use serde_json::json;
use uuid::Uuid;

use super::client::Api;

/// What `simulate` plays against.
#[derive(Debug, Clone, Args)]
pub struct SimulateArgs {
    /// GraphQL endpoint of the running server.
    #[arg(
        long,
        env = "CASEFILE_URL",
        default_value = "http://127.0.0.1:8080/graphql"
    )]
    pub url: String,

    /// Tokens per second each agent streams.
    #[arg(long, env = "CASEFILE_TOKEN_RATE", default_value_t = 20.0)]
    pub token_rate: f64,

    /// API token (writer or above) for a server that requires one.
    #[arg(long, env = "CASEFILE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// One agent at work.
struct Agent {
    api: Api,
    execution: String,
    pause: Duration,
    model: &'static str,
}

impl Agent {
    /// Streams `text` into a new event of `event_type`, token by token, then finishes it.
    async fn stream(&self, event_type: &str, text: &str, llm: Option<&str>) -> anyhow::Result<()> {
        let event = self
            .api
            .id(
                "mutation ($e: ID!, $t: TimelineEventType!) { createTimelineEvent(input: { executionId: $e, eventType: $t, metadata: { source: \"simulate\" } }) { uuid } }",
                json!({ "e": self.execution, "t": event_type }),
                "createTimelineEvent",
            )
            .await?;
        let mut offset = 0;
        for token in text.split_inclusive(' ') {
            self.api
                .call(
                    "mutation ($e: ID!, $o: Int!, $d: String!) { appendTimelineContent(input: { eventId: $e, offset: $o, delta: $d }) { end } }",
                    json!({ "e": event, "o": offset, "d": token }),
                )
                .await?;
            offset += token.chars().count();
            tokio::time::sleep(self.pause).await;
        }
        self.api
            .call(
                "mutation ($e: ID!, $l: ID) { finishTimelineEvent(input: { eventId: $e, status: COMPLETED, llmInteractionId: $l }) { status } }",
                json!({ "e": event, "l": llm }),
            )
            .await?;
        Ok(())
    }

    async fn message(
        &self,
        role: &str,
        content: &str,
        tool: Option<(&str, &str)>,
    ) -> anyhow::Result<String> {
        let (call_id, name) = tool.map_or((None, None), |(id, name)| (Some(id), Some(name)));
        self.api
            .id(
                "mutation ($e: ID!, $r: MessageRole!, $c: String!, $i: String, $n: String) { appendMessage(input: { executionId: $e, role: $r, content: $c, toolCallId: $i, toolName: $n }) { uuid } }",
                json!({ "e": self.execution, "r": role, "c": content, "i": call_id, "n": name }),
                "appendMessage",
            )
            .await
    }

    async fn llm(&self, last_message: &str, kind: &str, text: &str) -> anyhow::Result<String> {
        // The thinking tokens are part of the output tokens; the server prices the call.
        let tokens = text.split(' ').count() as i64 + 120;
        self.api
            .id(
                "mutation ($e: ID!, $m: ID!, $k: LLMInteractionType!, $model: String!, $out: Int!, $text: String!) {
                   recordLLMInteraction(input: { executionId: $e, lastMessageId: $m, interactionType: $k, modelName: $model,
                     inputTokens: 1800, outputTokens: $out, thinkingTokens: 120, durationMs: 2100,
                     llmRequest: { model: $model }, llmResponse: { text: $text } }) { uuid } }",
                json!({ "e": self.execution, "m": last_message, "k": kind, "model": self.model, "out": tokens, "text": text }),
                "recordLLMInteraction",
            )
            .await
    }

    /// One reasoning step with a tool call, then the agent's conclusion.
    async fn investigate(
        &self,
        name: &str,
        task: &str,
        tool: &str,
        finding: &str,
    ) -> anyhow::Result<()> {
        self.api
            .call(
                "mutation ($e: ID!) { startAgentExecution(input: { id: $e }) { status } }",
                json!({ "e": self.execution }),
            )
            .await?;
        self.message("SYSTEM", &format!("You are {name}, an SRE agent."), None)
            .await?;
        let asked = self.message("USER", task, None).await?;
        let thinking = format!(
            "To answer this I should look at {tool} output first and compare it with the recent changes in the namespace."
        );
        let llm = self.llm(&asked, "ITERATION", &thinking).await?;
        self.stream("LLM_THINKING", &thinking, Some(&llm)).await?;
        let call_id = format!("call_{}", Uuid::now_v7().simple());
        let calls = json!([{
            "id": call_id,
            "type": "function",
            "function": { "name": tool, "arguments": "{\"namespace\":\"payments\"}" },
        }]);
        self.api
            .id(
                "mutation ($e: ID!, $c: String!, $calls: JSON!) { appendMessage(input: { executionId: $e, role: ASSISTANT, content: $c, toolCalls: $calls }) { uuid } }",
                json!({ "e": self.execution, "c": format!("Calling {tool}."), "calls": calls }),
                "appendMessage",
            )
            .await?;
        let mcp = self
            .api
            .id(
                "mutation ($e: ID!, $t: String!, $call: String!) { recordMCPInteraction(input: { executionId: $e, interactionType: TOOL_CALL, serverName: \"kubernetes\", toolName: $t, toolCallId: $call, toolArguments: { namespace: \"payments\" }, toolResult: { items: 3 }, durationMs: 140 }) { uuid } }",
                json!({ "e": self.execution, "t": tool, "call": call_id }),
                "recordMCPInteraction",
            )
            .await?;
        let event = self
            .api
            .id(
                "mutation ($e: ID!, $t: String!, $m: JSON!) { createTimelineEvent(input: { executionId: $e, eventType: MCP_TOOL_CALL, content: $t, metadata: $m }) { uuid } }",
                json!({
                    "e": self.execution,
                    "t": format!("{tool} (namespace payments)"),
                    "m": { "server_name": "kubernetes", "tool_name": tool, "tool_call_id": call_id },
                }),
                "createTimelineEvent",
            )
            .await?;
        self.api
            .call(
                "mutation ($e: ID!, $m: ID!) { finishTimelineEvent(input: { eventId: $e, status: COMPLETED, mcpInteractionId: $m }) { status } }",
                json!({ "e": event, "m": mcp }),
            )
            .await?;
        let result = self
            .message(
                "TOOL",
                "3 pods, 2 restarting (OOMKilled)",
                Some((&call_id, tool)),
            )
            .await?;
        let llm = self.llm(&result, "FINAL_ANALYSIS", finding).await?;
        self.stream("FINAL_ANALYSIS", finding, Some(&llm)).await?;
        self.api
            .call("mutation ($e: ID!) { finishAgentExecution(input: { id: $e, status: COMPLETED }) { status } }", json!({ "e": self.execution }))
            .await?;
        Ok(())
    }
}

/// An agent's part in a stage: its name, the tool it calls, what it concludes.
type AgentPlan = (&'static str, &'static str, &'static str);

/// Plays one investigation; prints its id first so it can be watched.
pub async fn run(args: &SimulateArgs) -> anyhow::Result<()> {
    let api = Api::new(args.url.clone(), args.token.clone());
    let pause = Duration::from_secs_f64(1.0 / args.token_rate.max(1.0));
    let session = api
        .id(
            "mutation { createSession(input: { alertType: \"KubePodCrashLooping\", chainId: \"kubernetes-investigation\", author: \"casefile simulate\", alertData: { namespace: \"payments\", pod: \"payments-api-7d9f\", severity: \"critical\" } }) { uuid } }",
            json!({}),
            "createSession",
        )
        .await?;
    println!("session {session}: watch it in GraphiQL with");
    println!(
        "  subscription {{ timeline(sessionId: \"{session}\") {{ kind sequenceNumber delta event {{ eventType status }} }} }}"
    );
    api.call(
        "mutation ($s: ID!) { startSession(id: $s) { status } }",
        json!({ "s": session }),
    )
    .await?;

    let stages: [(&str, &[AgentPlan]); 3] = [
        (
            "Initial Analysis",
            &[(
                "KubernetesAgent",
                "kubectl_get_pods",
                "The payments-api pods are crash-looping: the container is OOMKilled about a minute after each start.",
            )],
        ),
        (
            "Deep Dive",
            &[
                (
                    "KubernetesAgent",
                    "kubectl_describe_pod",
                    "The memory limit is 256Mi while the working set peaks at 310Mi under normal load.",
                ),
                (
                    "ArgoCDAgent",
                    "argocd_app_history",
                    "Yesterday's rollout lowered resources.limits.memory from 512Mi to 256Mi.",
                ),
                (
                    "PrometheusAgent",
                    "prometheus_query",
                    "Memory grew steadily since the rollout; there is no leak pattern, only a lower ceiling.",
                ),
            ],
        ),
        (
            "Recommendations",
            &[(
                "KubernetesAgent",
                "kubectl_get_deployment",
                "Restore the 512Mi memory limit and add an alert on working set above 80% of the limit.",
            )],
        ),
    ];
    for (index, (name, agents)) in stages.iter().enumerate() {
        let parallel = agents.len() > 1;
        let stage = api
            .id(
                "mutation ($s: ID!, $i: Int!, $n: String!, $c: Int!, $p: ParallelType, $sp: SuccessPolicy) { createStage(input: { sessionId: $s, stageIndex: $i, name: $n, expectedAgentCount: $c, parallelType: $p, successPolicy: $sp }) { uuid } }",
                json!({ "s": session, "i": index, "n": name, "c": agents.len(), "p": parallel.then_some("MULTI_AGENT"), "sp": parallel.then_some("ALL") }),
                "createStage",
            )
            .await?;
        let mut work = Vec::new();
        for (i, (agent, tool, finding)) in agents.iter().enumerate() {
            let execution = api
                .id(
                    "mutation ($s: ID!, $i: Int!, $n: String!) { createAgentExecution(input: { stageId: $s, agentIndex: $i, agentName: $n, iterationStrategy: \"react\", llmProvider: \"google\", llmModel: \"gemini-2.5-pro\" }) { uuid } }",
                    json!({ "s": stage, "i": i + 1, "n": agent }),
                    "createAgentExecution",
                )
                .await?;
            let runner = Agent {
                api: api.clone(),
                execution,
                pause,
                model: "gemini-2.5-pro",
            };
            let task = format!("Investigate the crash-looping payments-api pods ({name}).");
            work.push(async move { runner.investigate(agent, &task, tool, finding).await });
        }
        // The agents of a stage work at the same time.
        for result in futures::future::join_all(work).await {
            result?;
        }
        println!("stage {index} ({name}) done");
    }
    api.call(
        "mutation ($s: ID!) { completeSession(input: { id: $s, finalAnalysis: \"A rollout lowered the memory limit below the service's working set; restore 512Mi.\", executiveSummary: \"OOMKilled after a limit change; roll back the limit.\" }) { status } }",
        json!({ "s": session }),
    )
    .await?;
    println!("session {session} completed");
    Ok(())
}
