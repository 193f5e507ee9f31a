//! Cancelling: two replicas of the same agent read logs side by side (`replica`, `any`);
//! cancellation was requested, one replica has stopped and the other is still streaming.

use serde_json::json;

use crate::demo::builder::{Agents, Alert, Demo, Outcome, Step};
use crate::demo::catalog::LOG_AGENT;
use crate::demo::chains::{Chain, LOG_REPLICAS};
use crate::model::{
    ExecutionStatus, ParallelType, SessionStatus, SuccessPolicy, TimelineEventStatus,
    TimelineEventType as Kind,
};

pub(super) fn play(d: &mut Demo) {
    let s = d.session(
        260,
        Alert {
            key: "ingress-5xx",
            alert_type: "IngressHigh5xxRate",
            chain: Chain::Version(&LOG_REPLICAS),
            runbook_url: "https://runbooks.example.com/ingress/IngressHigh5xxRate",
            data: json!({
                "alertname": "IngressHigh5xxRate",
                "severity": "critical",
                "cluster": "prod-us-east-1",
                "namespace": "ingress-nginx",
                "ingress": "api",
                "host": "api.example.com",
                "summary": "More than 5% of requests to api.example.com fail with 5xx.",
                "description": "5xx ratio on ingress api (api.example.com) is 12.4% over 5 minutes.",
                "starts_at": "2026-11-20T12:18:20Z",
            }),
        },
    );
    d.start(s);
    let replicas = Agents::Parallel(ParallelType::Replica, SuccessPolicy::Any, 2);
    let st = d.stage(s, "Log Analysis", replicas);
    let first = d.agent(st, &LOG_AGENT);
    let second = d.agent(st, &LOG_AGENT);
    let task = "Alert IngressHigh5xxRate (critical): 12.4% of requests to api.example.com fail \
                with 5xx. Read the ingress-nginx controller logs and group the errors by \
                upstream and cause.";
    d.begin(first, task);
    d.begin(second, task);
    // Each replica reads the log of a different controller pod.
    let pods = [
        (
            first,
            "ingress-nginx-controller-7c6d9f-4hx2v",
            INGRESS_LOG_A,
            INGRESS_SUMMARY_A,
        ),
        (
            second,
            "ingress-nginx-controller-7c6d9f-9mzkp",
            INGRESS_LOG_B,
            INGRESS_SUMMARY_B,
        ),
    ];
    for (agent, pod, log, summary) in pods {
        let args = json!({ "namespace": "ingress-nginx", "name": pod, "tail": 200 });
        d.tool_step(
            agent,
            Step::call("kubernetes", "pods_log", args)
                .returns(log)
                .thinking(
                    "Start from the controller's error log; the upstream address tells \
                     which service fails.",
                )
                .summary(summary),
        );
    }
    d.broken_llm(
        first,
        Some((
            Kind::LlmThinking,
            "Both error signatures point at the same orders-api endpoint. Timeouts first, then \
             refused connections suggests the pod",
        )),
        TimelineEventStatus::Cancelled,
        "context canceled",
        5_200,
    );
    d.end_agent(
        first,
        ExecutionStatus::Cancelled,
        Some("cancelled: session cancellation requested by oncall@example.com"),
    );
    d.streaming(
        second,
        Kind::LlmThinking,
        "Connection refused from 10.42.3.17:8080 means nothing listens on the orders-api pod's \
         port any more; together with the earlier timeouts this looks like",
    );
    d.settle(s, SessionStatus::Cancelling, Outcome::default());
}

const INGRESS_LOG_A: &str = "\
2026/11/20 12:17:58 [error] 412#412: *8812941 upstream timed out (110: Operation timed out) while reading response header from upstream, client: 10.0.4.21, server: api.example.com, request: \"POST /v1/orders HTTP/1.1\", upstream: \"http://10.42.3.17:8080/v1/orders\", host: \"api.example.com\"
2026/11/20 12:18:03 [error] 412#412: *8813307 upstream timed out (110: Operation timed out) while reading response header from upstream, client: 10.0.7.88, server: api.example.com, request: \"GET /v1/orders/ord_8f2k1 HTTP/1.1\", upstream: \"http://10.42.3.17:8080/v1/orders/ord_8f2k1\", host: \"api.example.com\"";

const INGRESS_SUMMARY_A: &str = "\
Errors are upstream timeouts (110) reading response headers from 10.42.3.17:8080, all on \
/v1/orders.";

const INGRESS_SUMMARY_B: &str = "\
Errors are refused connections (111) to 10.42.3.17:8080 on /v1/orders; nginx has marked that \
upstream as temporarily disabled.";

const INGRESS_LOG_B: &str = "\
2026/11/20 12:18:41 [error] 398#398: *9120044 connect() failed (111: Connection refused) while connecting to upstream, client: 10.0.5.13, server: api.example.com, request: \"POST /v1/orders HTTP/1.1\", upstream: \"http://10.42.3.17:8080/v1/orders\", host: \"api.example.com\"
2026/11/20 12:18:44 [warn] 398#398: *9120051 upstream server temporarily disabled while connecting to upstream, upstream: \"http://10.42.3.17:8080/v1/orders\"";
