//! In progress: the first stage is done; the second stage's agent is still answering.

use serde_json::json;

use crate::demo::builder::{Agents, Alert, Demo, Step};
use crate::demo::catalog::{ARGOCD_AGENT, KUBERNETES_AGENT};
use crate::demo::chains::{ARGOCD_ROLLOUT, Chain};
use crate::model::{ExecutionStatus, LlmInteractionType as Llm, TimelineEventType as Kind};

pub(super) fn play(d: &mut Demo) {
    let s = d.session(
        305,
        Alert {
            key: "frontend-rollout-stuck",
            alert_type: "KubeDeploymentRolloutStuck",
            chain: Chain::Version(&ARGOCD_ROLLOUT),
            runbook_url: "https://runbooks.example.com/kubernetes/KubeDeploymentRolloutStuck",
            data: json!({
                "alertname": "KubeDeploymentRolloutStuck",
                "severity": "warning",
                "cluster": "prod-eu-west-1",
                "namespace": "web",
                "deployment": "frontend",
                "summary": "Deployment web/frontend rollout is not progressing.",
                "description": "Rollout of deployment web/frontend is not progressing for longer \
                                than 15 minutes (ProgressDeadlineExceeded).",
                "starts_at": "2026-11-20T13:03:10Z",
            }),
        },
    );
    d.start(s);
    let st = d.stage(s, "Initial Analysis", Agents::One);
    let k8s = d.agent(st, &KUBERNETES_AGENT);
    d.begin(
        k8s,
        "Alert KubeDeploymentRolloutStuck (warning) in cluster prod-eu-west-1:\n\
         The rollout of deployment web/frontend has not progressed for 15 minutes.\n\
         Find out what blocks it.",
    );
    let deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "namespace": "web",
        "name": "frontend",
    });
    d.tool_step(
        k8s,
        Step::call("kubernetes", "resources_get", deployment)
            .returns(FRONTEND_DEPLOYMENT)
            .thinking(
                "The Deployment's conditions and replica counts show where the rollout stopped.",
            ),
    );
    let events = json!({ "namespace": "web", "field_selector": "involvedObject.name=frontend-5d8c7b9f6-kk2wd" });
    d.tool_step(
        k8s,
        Step::call("kubernetes", "events_list", events)
            .returns(FRONTEND_EVENTS)
            .thinking("The one new pod is not ready; its events will say why."),
    );
    d.answer(k8s, Llm::FinalAnalysis, None, FRONTEND_INITIAL);
    d.end_agent(k8s, ExecutionStatus::Completed, None);
    d.end_stage(st);

    let st = d.stage(s, "Sync Analysis", Agents::One);
    let argo = d.agent(st, &ARGOCD_AGENT);
    d.begin(
        argo,
        &format!(
            "Findings of stage 'Initial Analysis':\n{FRONTEND_INITIAL}\n\n\
             Task: find out why Argo CD deployed an image tag that does not exist."
        ),
    );
    let app = json!({ "applicationName": "frontend-prod" });
    d.tool_step(
        argo,
        Step::call("argocd", "get_application", app)
            .returns(FRONTEND_APP)
            .say("Let me check which revision Argo CD synced and what it changed."),
    );
    d.streaming(
        argo,
        Kind::LlmResponse,
        "Argo CD synced revision 7be21a0 (\"frontend: bump to 5.3.0\"), which sets the image to \
         registry.example.com/web/frontend:5.3.0. The registry has no such tag, so the",
    );
}

const FRONTEND_DEPLOYMENT: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: frontend
  namespace: web
  generation: 31
spec:
  replicas: 4
  strategy:
    rollingUpdate: {maxSurge: 1, maxUnavailable: 0}
  template:
    spec:
      containers:
      - name: frontend
        image: registry.example.com/web/frontend:5.3.0
status:
  observedGeneration: 31
  replicas: 5
  updatedReplicas: 1
  readyReplicas: 4
  unavailableReplicas: 1
  conditions:
  - type: Available
    status: \"True\"
    reason: MinimumReplicasAvailable
  - type: Progressing
    status: \"False\"
    reason: ProgressDeadlineExceeded
    message: ReplicaSet \"frontend-5d8c7b9f6\" has timed out progressing.";

const FRONTEND_EVENTS: &str = "\
LAST SEEN   TYPE      REASON    OBJECT                         MESSAGE
19m         Normal    Pulling   pod/frontend-5d8c7b9f6-kk2wd   Pulling image \"registry.example.com/web/frontend:5.3.0\"
19m         Warning   Failed    pod/frontend-5d8c7b9f6-kk2wd   Failed to pull image \"registry.example.com/web/frontend:5.3.0\": rpc error: code = NotFound desc = failed to pull and unpack image: manifest unknown
2m          Normal    BackOff   pod/frontend-5d8c7b9f6-kk2wd   Back-off pulling image \"registry.example.com/web/frontend:5.3.0\"";

const FRONTEND_INITIAL: &str = "\
The rollout of `web/frontend` stopped after its first new pod: `frontend-5d8c7b9f6-kk2wd` is in \
ImagePullBackOff because `registry.example.com/web/frontend:5.3.0` does not exist (manifest \
unknown). With `maxUnavailable: 0` the 4 old pods keep serving, so users are not affected yet. \
Next: find out why the Deployment references a tag that was never pushed.";

const FRONTEND_APP: &str = r#"{
  "metadata": {"name": "frontend-prod", "namespace": "argocd"},
  "spec": {"source": {"repoURL": "https://git.example.com/platform/gitops.git", "path": "apps/frontend/overlays/prod", "targetRevision": "main"}},
  "status": {
    "sync": {"status": "Synced", "revision": "7be21a0"},
    "health": {"status": "Progressing", "message": "Waiting for rollout to finish: 1 out of 4 new replicas have been updated..."},
    "operationState": {"phase": "Succeeded", "message": "successfully synced (all tasks run)", "syncResult": {"revision": "7be21a0"}, "finishedAt": "2026-11-20T12:44:52Z"},
    "summary": {"images": ["registry.example.com/web/frontend:5.3.0"]}
  }
}"#;
