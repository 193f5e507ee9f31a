//! Pending: the alert has arrived and nothing has started yet.

use serde_json::json;

use crate::demo::builder::{Alert, Demo};
use crate::demo::chains::{Chain, QUICK_LOOK};

pub(super) fn play(d: &mut Demo) {
    d.session(
        340,
        Alert {
            key: "node-not-ready",
            alert_type: "KubeNodeNotReady",
            chain: Chain::Version(&QUICK_LOOK),
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
