//! Failed: the same three-stage chain, but its parallel stage requires `all` agents to succeed
//! and ArgoCDAgent fails (its MCP server is down, then its LLM stream breaks), so the stage and
//! the session fail and the last stage never starts.

use serde_json::json;

use crate::demo::builder::{Agents, Alert, Delivery, Demo, Notify, Outcome, Step};
use crate::demo::catalog::{ARGOCD_AGENT, KUBERNETES_AGENT, PROMETHEUS_AGENT};
use crate::demo::chains::{Chain, DEEP_DIVE_1_1};
use crate::model::{
    ExecutionStatus, LlmInteractionType as Llm, NotificationType, ParallelType, SessionStatus,
    SuccessPolicy, TimelineEventStatus, TimelineEventType as Kind,
};

pub(super) fn play(d: &mut Demo) {
    let s = d.session(
        110,
        Alert {
            key: "analytics-oom",
            alert_type: "KubeContainerOOMKilled",
            chain: Chain::Version(&DEEP_DIVE_1_1),
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
    let k8s = d.agent(st, &KUBERNETES_AGENT);
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
    let k8s = d.agent(st, &KUBERNETES_AGENT);
    let argo = d.agent(st, &ARGOCD_AGENT);
    let prom = d.agent(st, &PROMETHEUS_AGENT);
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
    // PagerDuty took the page; the team's webhook never answered: failed for good.
    d.notify(
        s,
        Notify {
            kind: NotificationType::Pagerduty,
            destination: "R0UT1NGK3Y-DATA-PLATFORM",
            data: json!({ "dedup_key": "KubeContainerOOMKilled/data/analytics-worker" }),
            max_attempts: 5,
            delivery: Delivery::Delivered,
        },
    );
    d.notify(
        s,
        Notify {
            kind: NotificationType::Webhook,
            destination: "https://hooks.data-platform.example.com/casefile",
            data: json!({}),
            max_attempts: 3,
            delivery: Delivery::Failed("connect ECONNREFUSED 10.42.7.19:443"),
        },
    );
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
