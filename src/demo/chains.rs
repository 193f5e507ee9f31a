//! The chain versions the demo's sessions ran (seed 000, Q4), registered before them: the
//! Kubernetes deep dive in two versions (1.1.0 requires every specialist of its parallel stage
//! to succeed, which is why the OOM investigation failed), one version of each other chain.
//! The week of alerts was recorded before chains were registered: those sessions name their
//! chain only, as every session from before chain versions does.

use chrono::TimeDelta;
use serde_json::{Value as Json, json};

use super::ids::{BASE, demo_id};
use crate::store::{ChainRow, raw_json};

/// A registered chain version: its name, version, when it was registered (days before the
/// demo's day) and its definition.
pub(super) struct Version {
    pub(super) name: &'static str,
    pub(super) version: &'static str,
    days_before: i64,
    definition: fn() -> Json,
}

/// The chain a demo session ran.
pub(super) enum Chain {
    /// A registered version.
    Version(&'static Version),
    /// A name only (recorded before chains were registered).
    Named(&'static str),
}

pub(super) const DEEP_DIVE_1_0: Version = Version {
    name: "kubernetes-deep-dive",
    version: "1.0.0",
    days_before: 30,
    definition: || deep_dive("any"),
};

pub(super) const DEEP_DIVE_1_1: Version = Version {
    name: "kubernetes-deep-dive",
    version: "1.1.0",
    days_before: 2,
    definition: || deep_dive("all"),
};

pub(super) const QUICK_LOOK: Version = Version {
    name: "kubernetes-quick-look",
    version: "2.0.0",
    days_before: 3,
    definition: || {
        json!({
            "description": "A Kubernetes look in two steps: what happened, then why.",
            "alert_types": ["KubeNodeNotReady", "KubePersistentVolumeFillingUp", "KubeJobFailed"],
            "stages": [
                { "name": "Initial Analysis", "agent": "KubernetesAgent" },
                { "name": "Root Cause", "agent": "KubernetesAgent" },
            ],
        })
    },
};

pub(super) const LOG_REPLICAS: Version = Version {
    name: "log-replicas",
    version: "1.0.0",
    days_before: 20,
    definition: || {
        json!({
            "description": "Two replicas of the log agent read the same logs; the first answer wins.",
            "alert_types": ["NginxIngressErrorRate"],
            "stages": [{
                "name": "Log Analysis",
                "agent": "LogAnalysisAgent",
                "replicas": 2,
                "parallel_type": "replica",
                "success_policy": "any",
            }],
        })
    },
};

pub(super) const LATENCY_ORCHESTRATED: Version = Version {
    name: "latency-orchestrated",
    version: "1.0.0",
    days_before: 10,
    definition: || {
        json!({
            "description": "An orchestrator dispatches teams of specialists for latency alerts.",
            "alert_types": ["HighLatency"],
            "stages": [{
                "name": "Investigation",
                "agent": "OrchestratorAgent",
                "max_depth": 2,
                "teams": ["observability", "workloads"],
            }],
        })
    },
};

pub(super) const ARGOCD_ROLLOUT: Version = Version {
    name: "argocd-rollout",
    version: "1.0.0",
    days_before: 14,
    definition: || {
        json!({
            "description": "A stuck rollout: the workload, its Argo CD sync, then what to do.",
            "alert_types": ["ArgoCDAppOutOfSync"],
            "stages": [
                { "name": "Initial Analysis", "agent": "KubernetesAgent" },
                { "name": "Sync Analysis", "agent": "ArgoCDAgent" },
                { "name": "Recommendations", "agent": "RemediationAgent" },
            ],
        })
    },
};

/// The deep dive: one agent, three specialists in parallel under `policy`, then remediation.
fn deep_dive(policy: &str) -> Json {
    json!({
        "description": "Kubernetes workload alerts: triage, three specialists, a fix.",
        "alert_types": ["KubePodCrashLooping", "KubeContainerOOMKilled"],
        "stages": [
            { "name": "Initial Analysis", "agent": "KubernetesAgent" },
            {
                "name": "Deep Dive",
                "agents": ["KubernetesAgent", "ArgoCDAgent", "PrometheusAgent"],
                "parallel_type": "multi_agent",
                "success_policy": policy,
            },
            { "name": "Recommendations", "agent": "RemediationAgent" },
        ],
        "llm": { "provider": "google", "model": "gemini-2.5-pro" },
    })
}

/// Every version the demo registers.
const VERSIONS: [&Version; 6] = [
    &DEEP_DIVE_1_0,
    &DEEP_DIVE_1_1,
    &QUICK_LOOK,
    &LOG_REPLICAS,
    &LATENCY_ORCHESTRATED,
    &ARGOCD_ROLLOUT,
];

/// The versions as rows to restore.
pub(super) fn records() -> Vec<ChainRow> {
    VERSIONS
        .iter()
        .map(|v| {
            let created_at = BASE - TimeDelta::days(v.days_before);
            let definition = (v.definition)();
            let stage_count = definition["stages"].as_array().map_or(0, Vec::len) as i32;
            ChainRow {
                id: demo_id(&format!("chain/{}/{}", v.name, v.version), created_at),
                name: v.name.into(),
                version: v.version.into(),
                definition: raw_json(&definition),
                stage_count,
                created_at,
                created_by: Some("token:chain-registry".into()),
                deprecated_at: None,
                deprecated_by: None,
            }
        })
        .collect()
}
