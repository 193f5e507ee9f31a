//! Cancelled: someone stops the session while the second stage's agent waits for a tool.

use serde_json::json;

use crate::demo::builder::{Agents, Alert, Demo, Outcome, Step};
use crate::demo::catalog::KUBERNETES_AGENT;
use crate::demo::chains::{Chain, QUICK_LOOK};
use crate::model::{ExecutionStatus, LlmInteractionType as Llm, SessionStatus};

pub(super) fn play(d: &mut Demo) {
    let s = d.session(
        160,
        Alert {
            key: "nightly-backup-failed",
            alert_type: "KubeJobFailed",
            chain: Chain::Version(&QUICK_LOOK),
            runbook_url: "https://runbooks.example.com/kubernetes/KubeJobFailed",
            data: json!({
                "alertname": "KubeJobFailed",
                "severity": "warning",
                "cluster": "prod-eu-west-1",
                "namespace": "db",
                "job_name": "nightly-backup-29384160",
                "summary": "Job db/nightly-backup-29384160 failed to complete.",
                "description": "Job db/nightly-backup-29384160 of CronJob nightly-backup failed \
                                (BackoffLimitExceeded).",
                "starts_at": "2026-11-20T10:37:15Z",
            }),
        },
    );
    d.start(s);
    let st = d.stage(s, "Initial Analysis", Agents::One);
    let k8s = d.agent(st, &KUBERNETES_AGENT);
    d.begin(
        k8s,
        "Alert KubeJobFailed (warning) in cluster prod-eu-west-1:\n\
         Job db/nightly-backup-29384160 (CronJob nightly-backup) failed with \
         BackoffLimitExceeded.\n\
         Find out why the backup fails.",
    );
    let job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "namespace": "db",
        "name": "nightly-backup-29384160",
    });
    d.tool_step(
        k8s,
        Step::call("kubernetes", "resources_get", job)
            .returns(BACKUP_JOB)
            .thinking("Check how the job failed and which pods it left behind.")
            .summary(
                "Job nightly-backup-29384160 failed: 4 failed pods (backoffLimit 3), \
                 BackoffLimitExceeded at 10:36:58, 7 minutes after it started. It runs pg_dump \
                 against postgres-primary.db.svc with credentials from Secret \
                 backup-credentials.",
            ),
    );
    d.answer(k8s, Llm::FinalAnalysis, None, BACKUP_INITIAL);
    d.end_agent(k8s, ExecutionStatus::Completed, None);
    d.end_stage(st);

    let st = d.stage(s, "Root Cause", Agents::One);
    let k8s = d.agent(st, &KUBERNETES_AGENT);
    d.begin(
        k8s,
        &format!(
            "Findings of stage 'Initial Analysis':\n{BACKUP_INITIAL}\n\n\
             Task: find out why pg_dump cannot connect."
        ),
    );
    let logs = json!({ "namespace": "db", "name": "nightly-backup-29384160-7kq2n", "tail": 20 });
    d.tool_step(
        k8s,
        Step::call("kubernetes", "pods_log", logs)
            .returns(BACKUP_LOG)
            .thinking("The last attempt's log should show what pg_dump complained about."),
    );
    let secret = json!({
        "apiVersion": "external-secrets.io/v1beta1",
        "kind": "ExternalSecret",
        "namespace": "db",
        "name": "backup-credentials",
    });
    // This call never returns: dana.r@example.com cancels the session while it runs.
    d.tool_step(
        k8s,
        Step::call("kubernetes", "resources_get", secret).thinking(
            "Password authentication fails, so the password in backup-credentials no longer \
             matches the database. The ExternalSecret's last refresh tells when it changed.",
        ),
    );
    let by = "cancelled by dana.r@example.com";
    d.end_agent(k8s, ExecutionStatus::Cancelled, Some(by));
    d.end_stage(st);
    let outcome = Outcome {
        error: Some(format!(
            "{by}: known issue, backup credentials are being rotated (CHG-20412)"
        )),
        ..Outcome::default()
    };
    d.settle(s, SessionStatus::Cancelled, outcome);
}

const BACKUP_JOB: &str = "\
apiVersion: batch/v1
kind: Job
metadata:
  name: nightly-backup-29384160
  namespace: db
  ownerReferences:
  - kind: CronJob
    name: nightly-backup
spec:
  backoffLimit: 3
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: pg-dump
        image: registry.example.com/db/pg-backup:16.4-2
        command: [\"/bin/sh\", \"-c\", \"pg_dump -Fc -h postgres-primary.db.svc -U backup orders | aws s3 cp - s3://example-db-backups/orders/$(date +%F).dump\"]
        envFrom:
        - secretRef:
            name: backup-credentials
status:
  failed: 4
  startTime: \"2026-11-20T10:30:00Z\"
  conditions:
  - type: Failed
    status: \"True\"
    reason: BackoffLimitExceeded
    message: Job has reached the specified backoff limit
    lastTransitionTime: \"2026-11-20T10:36:58Z\"";

const BACKUP_INITIAL: &str = "\
The nightly backup job failed all 4 attempts (backoffLimit 3) within 7 minutes, so pg_dump \
fails right away rather than running out of time. Next: read the last attempt's log and check \
the credentials it uses (Secret `db/backup-credentials`).";

const BACKUP_LOG: &str = "\
pg_dump: error: connection to server at \"postgres-primary.db.svc\" (10.96.44.12), port 5432 \
failed: FATAL:  password authentication failed for user \"backup\"
upload failed: - to s3://example-db-backups/orders/2026-11-20.dump An error occurred \
(InvalidRequest) when calling the PutObject operation: empty stream";
