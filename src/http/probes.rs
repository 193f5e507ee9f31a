//! Probes for orchestrators: `/livez` (the process serves requests), `/healthz` (the same, its
//! older name) and `/readyz` (it can do its work: the database answers, its schema is this
//! binary's, and the live change log is being followed), which says what is wrong when not.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::AppState;
use crate::db::MIGRATOR;
use crate::store::SchemaState;

/// How long the database may take to answer a readiness check.
const DATABASE_WAIT: Duration = Duration::from_secs(2);
/// How long the change-log follower may go without a successful read (it reads at least once a
/// second) before subscribers would miss updates.
const FOLLOWER_STALE_AFTER: Duration = Duration::from_secs(10);

/// The process is up and serving.
pub async fn livez() -> &'static str {
    "ok"
}

/// Every check, by name, and whether all passed: 200 `{"status":"ready",…}` or 503
/// `{"status":"not ready",…}` with the reason under each failing check.
pub async fn readyz(State(state): State<AppState>) -> Response {
    let schema = tokio::time::timeout(DATABASE_WAIT, state.store.schema_state(&MIGRATOR)).await;
    let (database, migrations) = match schema {
        Err(_) => (
            fail(format!(
                "the database did not answer within {DATABASE_WAIT:?}"
            )),
            unknown(),
        ),
        // The details go to the log, not to whoever asks.
        Ok(Err(err)) => {
            tracing::warn!("readiness check failed: {err}");
            (fail("the database cannot be reached".to_owned()), unknown())
        }
        Ok(Ok(SchemaState::Current)) => (pass(), pass()),
        Ok(Ok(SchemaState::Behind(versions))) => (
            pass(),
            fail(format!(
                "migrations {versions:?} of this binary are not applied (or failed); \
                 run `casefile migrate`"
            )),
        ),
        // A newer casefile migrated the database (a rolling upgrade): this one still works.
        Ok(Ok(SchemaState::Ahead(versions))) => (
            pass(),
            json!({ "ok": true, "detail": format!("applied migrations {versions:?} are newer than this binary") }),
        ),
    };
    let follower = state.hub.follower();
    let change_log = if follower.since_last_read() <= FOLLOWER_STALE_AFTER {
        json!({ "ok": true, "backlog": follower.backlog, "reads": follower.reads })
    } else {
        fail(format!(
            "the live change log was last read {:.1} s ago (backlog {}): subscribers are not \
             being updated",
            follower.since_last_read().as_secs_f64(),
            follower.backlog
        ))
    };
    let ready = [&database, &migrations, &change_log]
        .iter()
        .all(|check| check["ok"] == true);
    let body = json!({
        "status": if ready { "ready" } else { "not ready" },
        "checks": { "database": database, "migrations": migrations, "change_log": change_log },
    });
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

fn pass() -> Value {
    json!({ "ok": true })
}

fn fail(reason: String) -> Value {
    json!({ "ok": false, "reason": reason })
}

fn unknown() -> Value {
    fail("not checked: the database did not answer".to_owned())
}
