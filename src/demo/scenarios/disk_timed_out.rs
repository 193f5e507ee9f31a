//! Timed out: the only agent's LLM call exceeds its deadline, which ends the agent, its stage
//! and the session as timed out.

use serde_json::json;

use crate::demo::builder::{Agents, Alert, Delivery, Demo, Notify, Outcome, Step};
use crate::demo::catalog::KUBERNETES_AGENT;
use crate::demo::chains::{Chain, QUICK_LOOK};
use crate::model::{
    ExecutionStatus, NotificationType, SessionStatus, TimelineEventStatus,
    TimelineEventType as Kind,
};

pub(super) fn play(d: &mut Demo) {
    let s = d.session(
        210,
        Alert {
            key: "kafka-volume-filling",
            alert_type: "KubePersistentVolumeFillingUp",
            chain: Chain::Version(&QUICK_LOOK),
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
    let k8s = d.agent(st, &KUBERNETES_AGENT);
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
    // Slack rate-limited the first attempt; Teams has not been claimed yet.
    d.notify(
        s,
        Notify {
            kind: NotificationType::Slack,
            destination: "#alerts-kafka",
            data: json!({ "channel": "#alerts-kafka" }),
            max_attempts: 5,
            delivery: Delivery::Retrying("ratelimited"),
        },
    );
    d.notify(
        s,
        Notify {
            kind: NotificationType::Msteams,
            destination: "Platform / Incidents",
            data: json!({}),
            max_attempts: 5,
            delivery: Delivery::Pending,
        },
    );
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
