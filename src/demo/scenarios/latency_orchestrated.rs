//! Completed: a global supervisor dispatches two teams (a team supervisor each, executions
//! whose parent is the supervisor's, in the same stage); each team supervisor dispatches a
//! worker, checks its findings and reports them up; the supervisor combines the reports.

use serde_json::json;

use crate::demo::builder::{Agent, Agents, Alert, Demo, Joins, Msg, Outcome, Step};
use crate::demo::catalog::{
    KUBERNETES_AGENT, ORCHESTRATOR_AGENT, PROMETHEUS_AGENT, TEAM_LEAD_AGENT,
};
use crate::demo::chains::{Chain, LATENCY_ORCHESTRATED};
use crate::model::{ExecutionStatus, LlmInteractionType as Llm, SessionStatus};

pub(super) fn play(d: &mut Demo) {
    let s = d.session(
        55,
        Alert {
            key: "payments-latency",
            alert_type: "PaymentsApiHighLatency",
            chain: Chain::Version(&LATENCY_ORCHESTRATED),
            runbook_url: "https://runbooks.example.com/payments/PaymentsApiHighLatency",
            data: json!({
                "alertname": "PaymentsApiHighLatency",
                "severity": "warning",
                "cluster": "prod-us-east-1",
                "namespace": "payments",
                "service": "payments-api",
                "summary": "payments-api p99 latency is above its 750 ms objective.",
                "description": "p99 latency of payments-api has been 1.84 s for 10 minutes.",
                "value": 1.84,
                "threshold": 0.75,
                "starts_at": "2026-11-20T08:44:30Z",
            }),
        },
    );
    d.start(s);
    let st = d.stage(s, "Investigation", Agents::One);
    let lead = d.agent(st, &ORCHESTRATOR_AGENT);
    d.begin(
        lead,
        "Alert PaymentsApiHighLatency (warning) in cluster prod-us-east-1:\n\
         p99 latency of payments-api (namespace payments) is 1.84 s, above the 750 ms objective, \
         for 10 minutes.\n\
         Find the cause.",
    );
    let observability_call = d.call_id(lead);
    let workloads_call = d.call_id(lead);
    let observability_task = json!({ "team": "observability", "task": OBSERVABILITY_TASK });
    let workloads_task = json!({ "team": "workloads", "task": WORKLOADS_TASK });
    d.request_tools(
        lead,
        Some(
            "Latency alerts on payments-api usually come from saturated pods, a slow dependency \
             or a traffic change. Metrics and pod state are independent questions, so I'll \
             hand them to two teams in parallel.",
        ),
        None,
        &[
            (&observability_call, "dispatch_agent", &observability_task),
            (&workloads_call, "dispatch_agent", &workloads_task),
        ],
    );
    let observability = d.dispatch(
        st,
        &TEAM_LEAD_AGENT,
        lead,
        Joins::Team("observability"),
        OBSERVABILITY_TASK,
    );
    let workloads = d.dispatch(
        st,
        &TEAM_LEAD_AGENT,
        lead,
        Joins::Team("workloads"),
        WORKLOADS_TASK,
    );
    let metrics_call = delegate(
        d,
        observability,
        OBSERVABILITY_TASK,
        "PrometheusAgent",
        PAYMENTS_METRICS_TASK,
    );
    let pods_call = delegate(
        d,
        workloads,
        WORKLOADS_TASK,
        "KubernetesAgent",
        PAYMENTS_PODS_TASK,
    );
    let metrics = d.dispatch(
        st,
        &PROMETHEUS_AGENT,
        observability,
        Joins::Worker,
        PAYMENTS_METRICS_TASK,
    );
    let pods = d.dispatch(
        st,
        &KUBERNETES_AGENT,
        workloads,
        Joins::Worker,
        PAYMENTS_PODS_TASK,
    );
    d.begin(metrics, PAYMENTS_METRICS_TASK);
    d.begin(pods, PAYMENTS_PODS_TASK);
    let p99 = json!({
        "query": "histogram_quantile(0.99, sum by (le, route) \
                  (rate(http_server_request_duration_seconds_bucket{service=\"payments-api\"}[5m])))",
        "start": "2026-11-20T07:55:00Z",
        "end": "2026-11-20T08:55:00Z",
        "step": "15m",
    });
    d.tool_step(
        metrics,
        Step::call("prometheus", "execute_range_query", p99)
            .returns(PAYMENTS_P99)
            .thinking("First the shape of the problem: which routes got slow, and since when.")
            .summary(
                "p99 of /v1/charges rose from 0.41 s (07:55) to 1.92 s (08:55), starting \
                 between 08:10 and 08:25; /v1/refunds and /v1/payment-methods rose less \
                 (0.22 → 0.31 s, 0.09 → 0.35 s).",
            ),
    );
    let top =
        json!({ "namespace": "payments", "label_selector": "app.kubernetes.io/name=payments-api" });
    d.tool_step(
        pods,
        Step::call("kubernetes", "pods_top", top)
            .returns(PAYMENTS_TOP)
            .thinking("Start with resource usage of the payments-api pods against their limits."),
    );
    let throttling = json!({
        "query": "sum(rate(container_cpu_cfs_throttled_periods_total{namespace=\"payments\",container=\"payments-api\"}[5m])) \
                  / sum(rate(container_cpu_cfs_periods_total{namespace=\"payments\",container=\"payments-api\"}[5m]))",
    });
    d.tool_step(
        metrics,
        Step::call("prometheus", "execute_query", throttling)
            .retried_after("prometheus: query timed out after 2m0s")
            .returns(PAYMENTS_THROTTLING)
            .thinking("All routes slowed down together, which smells like CPU. Check throttling."),
    );
    let hpa = json!({
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "namespace": "payments",
        "name": "payments-api",
    });
    d.tool_step(
        pods,
        Step::call("kubernetes", "resources_get", hpa)
            .returns(PAYMENTS_HPA)
            .thinking("Every pod sits at its 500m CPU limit. Why did the autoscaler not add pods?"),
    );
    let traffic = json!({
        "query": "sum(rate(http_requests_total{service=\"payments-api\"}[5m])) \
                  / sum(rate(http_requests_total{service=\"payments-api\"}[5m] offset 1h))",
    });
    d.tool_step(
        metrics,
        Step::call("prometheus", "execute_query", traffic)
            .returns(PAYMENTS_TRAFFIC)
            .thinking(
                "Throttling needs more work to throttle on. Compare traffic with an hour ago.",
            ),
    );
    let database = json!({
        "query": "histogram_quantile(0.99, sum by (le) \
                  (rate(pg_client_query_duration_seconds_bucket{service=\"payments-api\"}[5m])))",
    });
    d.tool_step(
        metrics,
        Step::call("prometheus", "execute_query", database)
            .returns(PAYMENTS_DB_P99)
            .thinking("Rule out the database before blaming CPU alone."),
    );
    d.answer(
        pods,
        Llm::FinalAnalysis,
        Some("Pods are pinned at the CPU limit and the HPA cannot grow past 6 replicas."),
        PAYMENTS_PODS_FINDING,
    );
    d.report(pods, PODS_REPORT);
    d.end_agent(pods, ExecutionStatus::Completed, None);
    d.answer(
        metrics,
        Llm::FinalAnalysis,
        Some(
            "Traffic +41%, 63% of CPU periods throttled, database fast: the service is CPU-bound.",
        ),
        PAYMENTS_METRICS_FINDING,
    );
    d.report(metrics, METRICS_REPORT);
    d.end_agent(metrics, ExecutionStatus::Completed, None);

    // Each worker's analysis is the result of its team supervisor's call; the teams' reports
    // are the results of the global supervisor's two calls.
    report_up(
        d,
        workloads,
        &pods_call,
        PAYMENTS_PODS_FINDING,
        WORKLOADS_REPORT,
    );
    report_up(
        d,
        observability,
        &metrics_call,
        PAYMENTS_METRICS_FINDING,
        OBSERVABILITY_REPORT,
    );
    for (call_id, report) in [
        (&observability_call, OBSERVABILITY_REPORT),
        (&workloads_call, WORKLOADS_REPORT),
    ] {
        d.message(
            lead,
            Msg::Tool {
                call_id,
                function: "dispatch_agent",
                content: report,
            },
        );
    }
    d.answer(
        lead,
        Llm::FinalAnalysis,
        Some(
            "Both reports agree: a 41% traffic increase met an HPA capped at 6 replicas and a \
             500m CPU limit. Throttling, not a dependency, explains the p99.",
        ),
        PAYMENTS_FINAL,
    );
    d.summarize(lead, PAYMENTS_SUMMARY);
    d.end_agent(lead, ExecutionStatus::Completed, None);
    d.end_stage(st);
    let outcome = Outcome {
        final_analysis: Some(PAYMENTS_FINAL),
        executive_summary: Some(PAYMENTS_SUMMARY),
        error: None,
    };
    d.settle(s, SessionStatus::Completed, outcome);
}

/// A team supervisor takes its task and hands it to one worker; the call's id.
fn delegate(d: &mut Demo, team: Agent, task: &str, worker: &str, worker_task: &str) -> String {
    d.begin(team, task);
    let call = d.call_id(team);
    let dispatched = json!({ "agent": worker, "task": worker_task });
    d.request_tools(
        team,
        Some("One specialist can answer this; I'll check what it finds before reporting."),
        None,
        &[(&call, "dispatch_agent", &dispatched)],
    );
    call
}

/// A team supervisor reads its worker's finding and reports to the global supervisor.
fn report_up(d: &mut Demo, team: Agent, call_id: &str, finding: &str, report: &'static str) {
    d.message(
        team,
        Msg::Tool {
            call_id,
            function: "dispatch_agent",
            content: finding,
        },
    );
    d.answer(
        team,
        Llm::FinalAnalysis,
        Some("The finding answers the task and its evidence is consistent."),
        report,
    );
    d.report(team, report);
    d.end_agent(team, ExecutionStatus::Completed, None);
}

const OBSERVABILITY_TASK: &str = "\
Find out from metrics why payments-api p99 latency rose: which routes, since when, and whether \
CPU, traffic or a dependency explains it.";

const WORKLOADS_TASK: &str = "\
Check whether the payments-api workload (pods and autoscaling) can keep up with its load.";

const METRICS_REPORT: &str =
    "Traffic +41% in an hour, 63% of CPU periods throttled, database p99 19 ms: CPU-bound.";

const PODS_REPORT: &str =
    "All 6 pods at their 500m CPU limit; the HPA is at maxReplicas 6 (ScalingLimited).";

const OBSERVABILITY_REPORT: &str = "\
payments-api is CPU-bound: traffic rose 41% and 63% of CPU periods are throttled; the database \
is fast (p99 19 ms). /v1/charges p99 went from 0.41 s to 1.92 s.";

const WORKLOADS_REPORT: &str = "\
The workload cannot grow: all 6 pods sit at the 500m CPU limit and the HPA is capped at 6 \
replicas (ScalingLimited: TooManyReplicas).";

const PAYMENTS_METRICS_TASK: &str = "\
Break down the p99 latency of payments-api (namespace payments, cluster prod-us-east-1) by route \
over the last hour, and check CPU throttling, traffic and database latency.";

const PAYMENTS_PODS_TASK: &str = "\
Check the payments-api pods in namespace payments (cluster prod-us-east-1) for CPU and memory \
saturation, restarts and the state of their HorizontalPodAutoscaler.";

const PAYMENTS_P99: &str = r#"{"resultType": "matrix", "result": [
  {"metric": {"route": "/v1/charges"}, "values": [[1795161300, "0.412"], [1795162200, "0.436"], [1795163100, "0.981"], [1795164000, "1.524"], [1795164900, "1.917"]]},
  {"metric": {"route": "/v1/refunds"}, "values": [[1795161300, "0.221"], [1795162200, "0.224"], [1795163100, "0.262"], [1795164000, "0.289"], [1795164900, "0.308"]]},
  {"metric": {"route": "/v1/payment-methods"}, "values": [[1795161300, "0.094"], [1795162200, "0.097"], [1795163100, "0.188"], [1795164000, "0.301"], [1795164900, "0.352"]]}
]}"#;

const PAYMENTS_TOP: &str = "\
NAME                           CPU(cores)   MEMORY(bytes)
payments-api-5f7c9d8b4-2xkqp   499m         611Mi
payments-api-5f7c9d8b4-7hn4c   500m         598Mi
payments-api-5f7c9d8b4-b9l2t   497m         623Mi
payments-api-5f7c9d8b4-jx8wd   500m         605Mi
payments-api-5f7c9d8b4-q4m7z   498m         617Mi
payments-api-5f7c9d8b4-zr5vk   500m         609Mi";

const PAYMENTS_THROTTLING: &str =
    r#"{"resultType": "vector", "result": [{"metric": {}, "value": [1795164960.5, "0.634"]}]}"#;

const PAYMENTS_HPA: &str = "\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: payments-api
  namespace: payments
spec:
  minReplicas: 3
  maxReplicas: 6
  metrics:
  - type: Resource
    resource:
      name: cpu
      target: {type: Utilization, averageUtilization: 70}
status:
  currentReplicas: 6
  desiredReplicas: 6
  currentMetrics:
  - type: Resource
    resource:
      name: cpu
      current: {averageUtilization: 199, averageValue: 499m}
  conditions:
  - type: AbleToScale
    status: \"True\"
    reason: ReadyForNewScale
  - type: ScalingLimited
    status: \"True\"
    reason: TooManyReplicas
    message: the desired replica count is more than the maximum replica count";

const PAYMENTS_TRAFFIC: &str =
    r#"{"resultType": "vector", "result": [{"metric": {}, "value": [1795164975.2, "1.41"]}]}"#;

const PAYMENTS_DB_P99: &str =
    r#"{"resultType": "vector", "result": [{"metric": {}, "value": [1795164990.8, "0.019"]}]}"#;

const PAYMENTS_PODS_FINDING: &str = "\
All 6 payments-api pods run at their 500m CPU limit (497–500m) with memory well below the 1Gi \
limit and no restarts. The HPA `payments-api` is at `maxReplicas: 6` with CPU at 199% of \
requests and reports `ScalingLimited: TooManyReplicas`: it wants more pods but may not add them.";

const PAYMENTS_METRICS_FINDING: &str = "\
Traffic is 41% above the same time an hour ago. 63% of the container's CFS periods are \
throttled. The p99 of /v1/charges rose from 0.41 s to 1.92 s, other routes less. Database p99 \
is 19 ms, so the dependency is not the bottleneck. Queries: \
`histogram_quantile(0.99, … http_server_request_duration_seconds_bucket …)`, \
`container_cpu_cfs_throttled_periods_total / container_cpu_cfs_periods_total`, \
`rate(http_requests_total[5m]) / … offset 1h`, `pg_client_query_duration_seconds`.";

const PAYMENTS_FINAL: &str = "\
## Root cause
payments-api is CPU-bound. Traffic grew 41% within the hour; the HorizontalPodAutoscaler is \
already at its ceiling of 6 replicas (`ScalingLimited: TooManyReplicas`) and every pod is held \
at its 500m CPU limit, with 63% of CFS periods throttled. Requests queue behind throttled \
threads, so /v1/charges (the most CPU-heavy route) went from 0.41 s to 1.92 s p99. Postgres \
(p99 19 ms) is healthy.

## Remediation
1. Raise `maxReplicas` of `payments/payments-api` from 6 to 12; the node pool has headroom for \
6 more pods of this size.
2. Raise the CPU limit to 1 core (keep the 250m request) so bursts are not throttled.
3. Watch p99 of /v1/charges return below 750 ms within 10 minutes of the change.

## Follow-up
- Alert when the HPA reports `ScalingLimited` for more than 5 minutes.
- Load-test payments-api at 2× peak traffic before the seasonal peak.";

const PAYMENTS_SUMMARY: &str = "\
payments-api p99 latency is 1.9 s because a 41% traffic increase hit an autoscaler capped at 6 \
replicas and pods throttled at a 500m CPU limit; dependencies are healthy. Raise maxReplicas to \
12 and the CPU limit to 1 core.";
