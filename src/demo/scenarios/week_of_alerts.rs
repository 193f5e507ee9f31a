//! The week before the demo's day: fourteen short investigations, two a day, so the analytics
//! (`sessionStats`) have days, weeks, alert types, chains, outcomes, models and agents to group.
//! Each is one agent's look at one alert, answered in one LLM call (or failing on its first).
//! They were recorded before chains were registered, so they name their chain only.

use serde_json::json;

use crate::demo::builder::{Agents, Alert, Demo, Outcome};
use crate::demo::catalog::{KUBERNETES_AGENT, LOG_AGENT, PROMETHEUS_AGENT, Profile};
use crate::demo::chains::Chain;
use crate::model::{
    ExecutionStatus, LlmInteractionType as Llm, SessionStatus, TimelineEventStatus,
    TimelineEventType as Kind,
};

/// One past alert: its key, type, chain, the agent that looked, and its analysis (`None`: the
/// model's API failed and so did the session).
struct Past {
    key: &'static str,
    alert_type: &'static str,
    chain_id: &'static str,
    agent: &'static Profile,
    analysis: Option<&'static str>,
}

const PAST: [Past; 14] = [
    past(
        "week-crash-api",
        "KubePodCrashLooping",
        K8S,
        &KUBERNETES_AGENT,
        Some(CRASH),
    ),
    past(
        "week-latency-web",
        "HighLatency",
        METRICS,
        &PROMETHEUS_AGENT,
        Some(LATENCY),
    ),
    past(
        "week-oom-batch",
        "KubeContainerOOMKilled",
        K8S,
        &KUBERNETES_AGENT,
        Some(OOM),
    ),
    past(
        "week-errors-checkout",
        "HighErrorRate",
        METRICS,
        &PROMETHEUS_AGENT,
        None,
    ),
    past(
        "week-crash-worker",
        "KubePodCrashLooping",
        K8S,
        &KUBERNETES_AGENT,
        Some(CRASH),
    ),
    past(
        "week-logs-auth",
        "LogErrorSpike",
        LOGS,
        &LOG_AGENT,
        Some(LOG_SPIKE),
    ),
    past(
        "week-latency-search",
        "HighLatency",
        METRICS,
        &PROMETHEUS_AGENT,
        Some(LATENCY),
    ),
    past(
        "week-oom-etl",
        "KubeContainerOOMKilled",
        K8S,
        &KUBERNETES_AGENT,
        Some(OOM),
    ),
    past(
        "week-logs-payments",
        "LogErrorSpike",
        LOGS,
        &LOG_AGENT,
        None,
    ),
    past(
        "week-crash-gateway",
        "KubePodCrashLooping",
        K8S,
        &KUBERNETES_AGENT,
        Some(CRASH),
    ),
    past(
        "week-latency-api",
        "HighLatency",
        METRICS,
        &PROMETHEUS_AGENT,
        Some(LATENCY),
    ),
    past(
        "week-logs-orders",
        "LogErrorSpike",
        LOGS,
        &LOG_AGENT,
        Some(LOG_SPIKE),
    ),
    past(
        "week-oom-ml",
        "KubeContainerOOMKilled",
        K8S,
        &KUBERNETES_AGENT,
        Some(OOM),
    ),
    past(
        "week-errors-cart",
        "HighErrorRate",
        METRICS,
        &PROMETHEUS_AGENT,
        Some(ERRORS),
    ),
];

const K8S: &str = "kubernetes-quick-look";
const METRICS: &str = "metrics-quick-look";
const LOGS: &str = "logs-quick-look";

const fn past(
    key: &'static str,
    alert_type: &'static str,
    chain_id: &'static str,
    agent: &'static Profile,
    analysis: Option<&'static str>,
) -> Past {
    Past {
        key,
        alert_type,
        chain_id,
        agent,
        analysis,
    }
}

pub(super) fn play(d: &mut Demo) {
    for (n, past) in PAST.iter().enumerate() {
        // Two a day over the seven days before the demo's day: 02:00 and 14:00 (and a bit).
        let n = n as i64;
        let minutes = -7 * 24 * 60 + (n / 2) * 24 * 60 + (n % 2) * 12 * 60 - 6 * 60 + n * 7;
        let s = d.session(
            minutes,
            Alert {
                key: past.key,
                alert_type: past.alert_type,
                chain: Chain::Named(past.chain_id),
                runbook_url: "https://runbooks.example.com/quick-look",
                data: json!({
                    "alertname": past.alert_type,
                    "severity": if n % 3 == 0 { "critical" } else { "warning" },
                    "cluster": if n % 2 == 0 { "prod-eu-west-1" } else { "prod-us-east-1" },
                    "namespace": past.key.trim_start_matches("week-"),
                }),
            },
        );
        d.start(s);
        let st = d.stage(s, "Quick Look", Agents::One);
        let agent = d.agent(st, past.agent);
        d.begin(
            agent,
            &format!("Alert {} fired. Find the likely cause.", past.alert_type),
        );
        match past.analysis {
            Some(analysis) => {
                d.answer(agent, Llm::FinalAnalysis, None, analysis);
                d.end_agent(agent, ExecutionStatus::Completed, None);
                d.end_stage(st);
                let outcome = Outcome {
                    final_analysis: Some(analysis),
                    ..Outcome::default()
                };
                d.settle(s, SessionStatus::Completed, outcome);
            }
            None => {
                let error = "LLM provider returned 503 Service Unavailable";
                d.broken_llm(
                    agent,
                    Some((Kind::LlmResponse, "Looking at the error")),
                    TimelineEventStatus::Failed,
                    error,
                    2_400,
                );
                d.end_agent(agent, ExecutionStatus::Failed, Some(error));
                let error = d.end_stage(st);
                let outcome = Outcome {
                    error: error.map(|e| format!("stage 'Quick Look' failed: {e}")),
                    ..Outcome::default()
                };
                d.settle(s, SessionStatus::Failed, outcome);
            }
        }
    }
}

const CRASH: &str = "The container exits at start-up: a required environment variable was \
removed from its ConfigMap in the last rollout. Restore it or roll back.";
const LATENCY: &str = "p99 latency follows the database connection pool saturating at peak \
traffic; the pool size was not raised with the replica count.";
const OOM: &str = "Memory grows steadily with batch size until the 512Mi limit; raise the limit \
or cap the batch.";
const LOG_SPIKE: &str = "The error spike is token validation failing after a signing key \
rotation; the service caches the old key for an hour.";
const ERRORS: &str = "5xx errors come from one upstream whose certificate expired; requests \
to it fail the TLS handshake.";
