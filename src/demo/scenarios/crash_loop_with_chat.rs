//! Completed: the three-stage chain (one agent → three in parallel under `any`, one of which
//! fails → one agent), an executive summary, then a follow-up chat answered by a chat stage.

use serde_json::json;

use crate::demo::builder::{Agents, Alert, Delivery, Demo, Notify, Outcome, Step};
use crate::demo::catalog::{ARGOCD_AGENT, KUBERNETES_AGENT, PROMETHEUS_AGENT, REMEDIATION_AGENT};
use crate::demo::chains::{Chain, DEEP_DIVE_1_0};
use crate::model::{
    ExecutionStatus, LlmInteractionType as Llm, NotificationType, ParallelType, SessionStatus,
    SuccessPolicy, TimelineEventStatus,
};

pub(super) fn play(d: &mut Demo) {
    let s = d.session(
        0,
        Alert {
            key: "checkout-crashloop",
            alert_type: "KubePodCrashLooping",
            chain: Chain::Version(&DEEP_DIVE_1_0),
            runbook_url: "https://runbooks.example.com/kubernetes/KubePodCrashLooping",
            data: json!({
                "alertname": "KubePodCrashLooping",
                "severity": "critical",
                "cluster": "prod-eu-west-1",
                "namespace": "shop",
                "pod": "checkout-7d9f8b6c5-x2k4q",
                "container": "checkout",
                "summary": "Pod shop/checkout-7d9f8b6c5-x2k4q is crash looping.",
                "description": "Pod shop/checkout-7d9f8b6c5-x2k4q (checkout) is in waiting state \
                                (reason: \"CrashLoopBackOff\"); 14 restarts in the last 30 minutes.",
                "starts_at": "2026-11-20T07:56:40Z",
                "generator_url": "https://prometheus.prod-eu-west-1.example.com/graph?g0.expr=\
                                  increase(kube_pod_container_status_restarts_total%5B30m%5D)%3E3",
            }),
        },
    );
    d.start(s);

    let st = d.stage(s, "Initial Analysis", Agents::One);
    let k8s = d.agent(st, &KUBERNETES_AGENT);
    d.begin(
        k8s,
        "Alert KubePodCrashLooping (critical) in cluster prod-eu-west-1:\n\
         Pod shop/checkout-7d9f8b6c5-x2k4q (container checkout) is in CrashLoopBackOff with 14 \
         restarts in the last 30 minutes.\n\
         Find out why the container keeps exiting.",
    );
    let pod = json!({ "namespace": "shop", "name": "checkout-7d9f8b6c5-x2k4q" });
    d.tool_step(
        k8s,
        Step::call("kubernetes", "pods_get", pod)
            .returns(CHECKOUT_POD)
            .thinking(
                "The alert is about one pod of the checkout Deployment. Before reading logs I \
                 want the container's last termination state: exit code, reason and how long it \
                 ran. That separates an OOM kill or a failing probe from the process exiting on \
                 its own.",
            )
            .summary(
                "Container checkout is in CrashLoopBackOff with 14 restarts. Last termination: \
                 exit code 1, reason Error, after 2 s (07:57:03 → 07:57:05). Image \
                 registry.example.com/shop/checkout:2.14.0, pod created 07:41:12 by ReplicaSet \
                 checkout-7d9f8b6c5. Configuration comes from ConfigMap checkout-config via \
                 envFrom. Not an OOM kill, and the probes are not what kills it.",
            ),
    );
    let logs = json!({
        "namespace": "shop",
        "name": "checkout-7d9f8b6c5-x2k4q",
        "container": "checkout",
        "previous": true,
        "tail": 40,
    });
    d.tool_step(
        k8s,
        Step::call("kubernetes", "pods_log", logs)
            .returns(CHECKOUT_LOG)
            .thinking(
                "Exit code 1 after two seconds means the process gives up during start-up, so the \
                 previous container's log should say why.",
            ),
    );
    d.answer(
        k8s,
        Llm::FinalAnalysis,
        Some(
            "The log is unambiguous: 2.14.0 refuses to start because PAYMENTS_API_URL is not set, \
             and it ignores PAYMENTS_BASE_URL. The pod was created by a rollout 15 minutes before \
             the alert, so something in that release changed the configuration contract.",
        ),
        CHECKOUT_INITIAL,
    );
    d.end_agent(k8s, ExecutionStatus::Completed, None);
    d.end_stage(st);

    let findings = format!("Findings of stage 'Initial Analysis':\n{CHECKOUT_INITIAL}");
    let deep_dive = Agents::Parallel(ParallelType::MultiAgent, SuccessPolicy::Any, 3);
    let st = d.stage(s, "Deep Dive", deep_dive);
    let k8s = d.agent(st, &KUBERNETES_AGENT);
    let argo = d.agent(st, &ARGOCD_AGENT);
    let prom = d.agent(st, &PROMETHEUS_AGENT);
    d.begin(
        k8s,
        &format!("{findings}\n\nTask: check which settings the checkout pods receive."),
    );
    d.begin(
        argo,
        &format!("{findings}\n\nTask: find out what Argo CD deployed to checkout and when."),
    );
    d.begin(
        prom,
        &format!("{findings}\n\nTask: quantify the impact on checkout traffic."),
    );
    // The agents run side by side, so their steps interleave on the session's timeline.
    let config_map = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "namespace": "shop",
        "name": "checkout-config",
    });
    d.tool_step(
        k8s,
        Step::call("kubernetes", "resources_get", config_map)
            .returns(CHECKOUT_CONFIG_MAP)
            .thinking(
                "The Deployment injects its settings with envFrom from checkout-config. If the \
                 key is missing there, the FATAL error is fully explained.",
            ),
    );
    let app = json!({ "applicationName": "checkout-prod" });
    d.tool_step(
        argo,
        Step::call("argocd", "get_application", app.clone())
            .returns(CHECKOUT_APP)
            .say("I'll start with the sync status and history of the checkout-prod application."),
    );
    let error_ratio = json!({
        "query": "sum(rate(http_requests_total{namespace=\"shop\",service=\"checkout\",code=~\"5..\"}[5m])) \
                  / sum(rate(http_requests_total{namespace=\"shop\",service=\"checkout\"}[5m]))",
    });
    d.tool_step(
        prom,
        Step::call("prometheus", "execute_query", error_ratio)
            .returns(CHECKOUT_ERROR_RATIO)
            .thinking(
                "The user-facing impact is the share of checkout requests that fail. Old pods \
                 may still serve, so I expect a partial outage rather than a full one.",
            ),
    );
    d.answer(
        k8s,
        Llm::FinalAnalysis,
        Some(
            "PAYMENTS_BASE_URL holds the payments endpoint; PAYMENTS_API_URL is gone. The two \
             pods of the previous ReplicaSet still run because envFrom is resolved when a \
             container starts.",
        ),
        CHECKOUT_CONFIG_FINDING,
    );
    d.end_agent(k8s, ExecutionStatus::Completed, None);
    d.broken_llm(
        prom,
        None,
        TimelineEventStatus::Failed,
        GEMINI_QUOTA_ERROR,
        2_350,
    );
    d.end_agent(
        prom,
        ExecutionStatus::Failed,
        Some("LLM call failed after 3 attempts: googleapi: Error 429: Resource has been exhausted"),
    );
    d.tool_step(
        argo,
        Step::call("argocd", "get_application_events", app)
            .returns(CHECKOUT_APP_EVENTS)
            .say("The current revision is a41c9e2. Let me see what that sync did and when."),
    );
    d.answer(argo, Llm::FinalAnalysis, None, CHECKOUT_ARGO_FINDING);
    d.end_agent(argo, ExecutionStatus::Completed, None);
    d.end_stage(st);

    let st = d.stage(s, "Recommendations", Agents::One);
    let fix = d.agent(st, &REMEDIATION_AGENT);
    d.begin(
        fix,
        &format!(
            "{findings}\n\nFindings of stage 'Deep Dive':\n\
             - KubernetesAgent: {CHECKOUT_CONFIG_FINDING}\n\
             - ArgoCDAgent: {CHECKOUT_ARGO_FINDING}\n\
             - PrometheusAgent: failed (LLM quota exhausted) after measuring a 4.1% 5xx ratio \
             on checkout.\n\n\
             Write the root cause and a remediation plan."
        ),
    );
    d.answer(
        fix,
        Llm::FinalAnalysis,
        Some(
            "Two facts must fit together: the 2.14.0 image reads PAYMENTS_API_URL, and the \
             ConfigMap now only has PAYMENTS_BASE_URL. Both came from the same commit. Rolling \
             back only the image would not help, since 2.13.4 reads the same old key. Restoring \
             the key through Git is fast and does not fight Argo CD's self-heal.",
        ),
        CHECKOUT_FINAL,
    );
    d.summarize(fix, CHECKOUT_SUMMARY);
    d.end_agent(fix, ExecutionStatus::Completed, None);
    d.end_stage(st);
    let outcome = Outcome {
        final_analysis: Some(CHECKOUT_FINAL),
        executive_summary: Some(CHECKOUT_SUMMARY),
        error: None,
    };
    d.settle(s, SessionStatus::Completed, outcome);
    // The outbox: Slack posted the summary and confirmed it; the email went out.
    d.notify(
        s,
        Notify {
            kind: NotificationType::Slack,
            destination: "#alerts-shop",
            data: json!({
                "channel": "#alerts-shop",
                "message_fingerprint": "KubePodCrashLooping/shop/checkout",
                "thread_ts": "1763631742.118204",
                "permalink": "https://example.slack.com/archives/C05SHOP/p1763631742118204",
            }),
            max_attempts: 5,
            delivery: Delivery::Delivered,
        },
    );
    d.notify(
        s,
        Notify {
            kind: NotificationType::Email,
            destination: "shop-oncall@example.com",
            data: json!({ "subject": "Resolved: checkout crash loop (payments URL missing)" }),
            max_attempts: 5,
            delivery: Delivery::Sent,
        },
    );

    // Later, someone asks a follow-up question about the finished investigation.
    d.wait(25 * 60_000);
    let chat = d.chat(
        s,
        "maria.k@example.com",
        "Can we roll checkout back to 2.13.4?",
    );
    let (st, bot) = d.chat_question(s, chat, "maria.k@example.com", CHECKOUT_QUESTION);
    d.begin(
        bot,
        &format!(
            "Investigation of KubePodCrashLooping on shop/checkout (completed).\n\
             Final analysis:\n{CHECKOUT_FINAL}\n\n\
             Question from maria.k@example.com:\n{CHECKOUT_QUESTION}"
        ),
    );
    let manifests = json!({ "applicationName": "checkout-prod", "revision": "9c1d2f0" });
    d.tool_step(
        bot,
        Step::call("argocd", "get_application_manifests", manifests)
            .returns(CHECKOUT_OLD_MANIFESTS)
            .thinking(
                "An Argo CD rollback re-applies a previous revision as a whole, so what matters \
                 is what revision 9c1d2f0 contains for both the image and the ConfigMap.",
            ),
    );
    d.answer(
        bot,
        Llm::ChatResponse,
        Some(
            "Revision 9c1d2f0 has checkout 2.13.4 and still sets PAYMENTS_API_URL, so a full \
             rollback starts healthy pods. Auto-sync is on, which blocks a rollback and would \
             undo it.",
        ),
        CHECKOUT_ANSWER,
    );
    d.end_agent(bot, ExecutionStatus::Completed, None);
    d.end_stage(st);
    // The answer goes to the alert's Slack thread, naming the question.
    d.notify_answer(
        st,
        Notify {
            kind: NotificationType::Slack,
            destination: "#alerts-shop",
            data: json!({
                "channel": "#alerts-shop",
                "thread_ts": "1763631742.118204",
                "permalink": "https://example.slack.com/archives/C05SHOP/p1763633301004511",
            }),
            max_attempts: 5,
            delivery: Delivery::Delivered,
        },
    );
}

const CHECKOUT_POD: &str = "\
apiVersion: v1
kind: Pod
metadata:
  name: checkout-7d9f8b6c5-x2k4q
  namespace: shop
  creationTimestamp: \"2026-11-20T07:41:12Z\"
  labels:
    app.kubernetes.io/name: checkout
    pod-template-hash: 7d9f8b6c5
  ownerReferences:
  - kind: ReplicaSet
    name: checkout-7d9f8b6c5
spec:
  nodeName: ip-10-0-12-41.eu-west-1.compute.internal
  containers:
  - name: checkout
    image: registry.example.com/shop/checkout:2.14.0
    envFrom:
    - configMapRef:
        name: checkout-config
    ports:
    - containerPort: 8080
    livenessProbe:
      httpGet: {path: /healthz, port: 8080}
      initialDelaySeconds: 10
    resources:
      requests: {cpu: 250m, memory: 384Mi}
      limits: {cpu: \"1\", memory: 768Mi}
status:
  phase: Running
  conditions:
  - type: Ready
    status: \"False\"
    reason: ContainersNotReady
  containerStatuses:
  - name: checkout
    ready: false
    restartCount: 14
    image: registry.example.com/shop/checkout:2.14.0
    state:
      waiting:
        reason: CrashLoopBackOff
        message: back-off 5m0s restarting failed container=checkout pod=checkout-7d9f8b6c5-x2k4q_shop
    lastState:
      terminated:
        exitCode: 1
        reason: Error
        startedAt: \"2026-11-20T07:57:03Z\"
        finishedAt: \"2026-11-20T07:57:05Z\"";

const CHECKOUT_LOG: &str = "\
2026-11-20T07:57:03.412Z INFO  checkout starting version=2.14.0 commit=5e0c1aa go=go1.23.4
2026-11-20T07:57:03.415Z INFO  loading configuration from environment
2026-11-20T07:57:03.416Z INFO  config: CART_SERVICE_URL=http://cart.shop.svc.cluster.local:8080
2026-11-20T07:57:03.416Z INFO  config: REDIS_ADDR=redis-master.shop.svc.cluster.local:6379
2026-11-20T07:57:03.417Z WARN  config: unknown setting PAYMENTS_BASE_URL ignored
2026-11-20T07:57:03.417Z FATAL config: required setting PAYMENTS_API_URL is not set
2026-11-20T07:57:03.418Z INFO  exiting with status 1";

const CHECKOUT_INITIAL: &str = "\
**Preliminary root cause:** checkout 2.14.0 exits during start-up with `FATAL config: required \
setting PAYMENTS_API_URL is not set`.

**Evidence**
- Container `checkout` exits with code 1 after ~2 s; 14 restarts, now in CrashLoopBackOff.
- The previous container's log ends with the FATAL config error and also warns that \
`PAYMENTS_BASE_URL` is an unknown setting.
- Image `registry.example.com/shop/checkout:2.14.0`; the pod was created at 07:41:12Z by a \
rollout 15 minutes before the alert.

**Next:** find out what changed in that release and in the `checkout-config` ConfigMap, and how \
much traffic fails.";

const CHECKOUT_CONFIG_MAP: &str = "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: checkout-config
  namespace: shop
  labels:
    app.kubernetes.io/instance: checkout-prod
  annotations:
    argocd.argoproj.io/tracking-id: checkout-prod:/ConfigMap:shop/checkout-config
data:
  CART_SERVICE_URL: http://cart.shop.svc.cluster.local:8080
  LOG_LEVEL: info
  PAYMENTS_BASE_URL: http://payments-api.payments.svc.cluster.local:8443
  REDIS_ADDR: redis-master.shop.svc.cluster.local:6379";

const CHECKOUT_CONFIG_FINDING: &str = "\
ConfigMap `shop/checkout-config` (tracked by Argo CD application `checkout-prod`) defines \
`PAYMENTS_BASE_URL` but no longer `PAYMENTS_API_URL`, which checkout 2.14.0 requires. Two pods \
of the previous ReplicaSet (2.13.4) keep running because a container's environment is read when \
it starts; every new pod crashes.";

const CHECKOUT_APP: &str = r#"{
  "metadata": {"name": "checkout-prod", "namespace": "argocd"},
  "spec": {
    "source": {"repoURL": "https://git.example.com/platform/gitops.git", "path": "apps/checkout/overlays/prod", "targetRevision": "main"},
    "destination": {"server": "https://kubernetes.default.svc", "namespace": "shop"},
    "syncPolicy": {"automated": {"prune": true, "selfHeal": true}}
  },
  "status": {
    "sync": {"status": "Synced", "revision": "a41c9e2"},
    "health": {"status": "Degraded", "message": "Deployment checkout: 2 of 4 updated replicas are unavailable"},
    "history": [
      {"id": 41, "revision": "9c1d2f0", "deployedAt": "2026-11-18T14:02:11Z"},
      {"id": 42, "revision": "a41c9e2", "deployedAt": "2026-11-20T07:41:05Z"}
    ]
  }
}"#;

const CHECKOUT_APP_EVENTS: &str = "\
2026-11-20T07:41:05Z  OperationStarted    Initiated automated sync to 'a41c9e2' (checkout: release 2.14.0, rename PAYMENTS_API_URL to PAYMENTS_BASE_URL)
2026-11-20T07:41:09Z  OperationCompleted  Sync operation to a41c9e2 succeeded
2026-11-20T07:41:12Z  ResourceUpdated     Updated health status: Healthy -> Progressing
2026-11-20T07:49:30Z  ResourceUpdated     Updated health status: Progressing -> Degraded";

const CHECKOUT_ARGO_FINDING: &str = "\
Argo CD application `checkout-prod` auto-synced revision `a41c9e2` at 07:41:05Z (commit \
\"checkout: release 2.14.0, rename PAYMENTS_API_URL to PAYMENTS_BASE_URL\"). The sync succeeded; \
health went Progressing → Degraded at 07:49:30Z. The previous revision `9c1d2f0` (history id 41, \
deployed 2026-11-18) ran 2.13.4. Self-heal is enabled, so a manual edit of the ConfigMap would \
be reverted: the fix has to go through Git, or auto-sync has to be disabled for a rollback.";

const CHECKOUT_ERROR_RATIO: &str =
    r#"{"resultType": "vector", "result": [{"metric": {}, "value": [1795161540.123, "0.0412"]}]}"#;

const GEMINI_QUOTA_ERROR: &str = "googleapi: Error 429: Resource has been exhausted (e.g. check \
    quota). Quota exceeded for aiplatform.googleapis.com/generate_content_requests_per_minute_per_\
    project_per_base_model with base model: gemini-2.5-flash.";

const CHECKOUT_FINAL: &str = "\
## Root cause
Commit `a41c9e2` in the gitops repository released checkout 2.14.0 **and** renamed \
`PAYMENTS_API_URL` to `PAYMENTS_BASE_URL` in `checkout-config`. Checkout 2.14.0 still reads \
`PAYMENTS_API_URL`, so every new pod exits at start-up (`FATAL config: required setting \
PAYMENTS_API_URL is not set`). Pods started before the sync keep their old environment and \
still serve, which limits the impact to about 4% failed checkout requests.

## Remediation
1. Add `PAYMENTS_API_URL` back to `apps/checkout/overlays/prod/configmap.yaml` (same value as \
`PAYMENTS_BASE_URL`) and merge; Argo CD applies it within 3 minutes.
2. Restart the crash-looping pods: `kubectl -n shop rollout restart deployment/checkout`.
3. Verify that `kube_pod_container_status_restarts_total` stays flat and the 5xx ratio drops \
below 0.1%.

## Follow-up
- Keep both keys until a checkout release reads only `PAYMENTS_BASE_URL`.
- Render the overlay in CI and run `checkout --check-config` against it before merging.";

const CHECKOUT_SUMMARY: &str = "\
checkout 2.14.0 crash-loops in prod-eu-west-1 because the same release renamed PAYMENTS_API_URL \
to PAYMENTS_BASE_URL in its ConfigMap while the code still reads the old key; about 4% of \
checkout requests fail. Restore the old key in the gitops overlay, then restart the deployment.";

const CHECKOUT_QUESTION: &str = "\
Can we just roll back checkout to 2.13.4 in Argo CD instead of editing the ConfigMap? We are in \
a change freeze and I'd rather not touch config by hand.";

const CHECKOUT_OLD_MANIFESTS: &str = "\
# checkout-prod at revision 9c1d2f0 (history id 41)
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: checkout-config
  namespace: shop
data:
  CART_SERVICE_URL: http://cart.shop.svc.cluster.local:8080
  LOG_LEVEL: info
  PAYMENTS_API_URL: http://payments-api.payments.svc.cluster.local:8443
  REDIS_ADDR: redis-master.shop.svc.cluster.local:6379
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: checkout
  namespace: shop
spec:
  replicas: 4
  template:
    spec:
      containers:
      - name: checkout
        image: registry.example.com/shop/checkout:2.13.4";

const CHECKOUT_ANSWER: &str = "\
Yes. A rollback of `checkout-prod` to history id 41 (revision `9c1d2f0`) is safe: that revision \
contains **both** checkout 2.13.4 and the old `PAYMENTS_API_URL` key, so new pods will start. Two \
caveats:
1. Auto-sync is enabled on `checkout-prod`. Argo CD refuses a rollback while it is on, and \
turning it back on would re-deploy `a41c9e2`. Disable it first and keep it off until the fix is \
merged.
2. Rolling back only the image (for example with `kubectl set image`) would **not** help: 2.13.4 \
reads `PAYMENTS_API_URL` too, and the current ConfigMap no longer has it.

`argocd app set checkout-prod --sync-policy none && argocd app rollback checkout-prod 41`";
