//! Stages: created by the orchestrator; their status is aggregated from their executions.

use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{
    check_name, ensure_not_deleted, fetch, id_taken, is_finished_session, is_finished_stage,
    is_retry, lock_session, lock_stage, snake,
};
use crate::error::{Error, Result};
use crate::model::{ExecutionStatus, ParallelType, SessionStatus, StageStatus, SuccessPolicy};
use crate::store::audit::{self, Origin};
use crate::store::traced::traced;
use crate::store::{ExecutionRow, SessionRow, StageRow};

#[derive(Debug, Clone, Serialize)]
pub struct NewStage {
    pub id: Option<Uuid>,
    pub session_id: Uuid,
    pub stage_index: i32,
    pub name: String,
    pub expected_agent_count: i32,
    pub parallel_type: Option<ParallelType>,
    pub success_policy: Option<SuccessPolicy>,
    pub chat_id: Option<Uuid>,
    pub chat_user_message_id: Option<Uuid>,
}

/// Whether a session accepts new work of this kind: chain work while it runs, chat work once
/// it has finished.
pub(crate) fn ensure_accepts_work(session: &SessionRow, chat: bool, what: &str) -> Result<()> {
    ensure_not_deleted(session)?;
    let ok = if chat {
        is_finished_session(session.status)
    } else {
        matches!(
            session.status,
            SessionStatus::Pending | SessionStatus::InProgress
        )
    };
    if ok {
        return Ok(());
    }
    let rule = if chat {
        "chat work needs a finished session"
    } else {
        "it no longer accepts new work"
    };
    Err(Error::Conflict(format!(
        "cannot {what}: session {} is {} ({rule})",
        session.id,
        snake(session.status)
    )))
}

impl NewStage {
    pub(crate) fn check(&self) -> Result<()> {
        check_name("name", &self.name)?;
        if self.stage_index < 0 {
            return Err(Error::bad_input(format!(
                "`stageIndex` must be 0 or more, got {}",
                self.stage_index
            )));
        }
        match (
            self.expected_agent_count,
            self.parallel_type,
            self.success_policy,
        ) {
            (n, _, _) if n < 1 => {
                return Err(Error::bad_input(format!(
                    "`expectedAgentCount` must be at least 1, got {n}"
                )));
            }
            (1, None, None) | (2.., Some(_), Some(_)) => {}
            (1, _, _) => {
                return Err(Error::bad_input(
                    "a single-agent stage takes no `parallelType` or `successPolicy`",
                ));
            }
            _ => {
                return Err(Error::bad_input(
                    "a stage of several agents needs both `parallelType` and `successPolicy`",
                ));
            }
        }
        if self.chat_user_message_id.is_some() && self.chat_id.is_none() {
            return Err(Error::bad_input("`chatUserMessageId` needs `chatId`"));
        }
        Ok(())
    }
}

pub async fn create(conn: &mut PgConnection, new: &NewStage, origin: &Origin) -> Result<StageRow> {
    new.check()?;
    let session = lock_session(conn, new.session_id).await?;
    let id = new.id.unwrap_or_else(Uuid::now_v7);
    if is_retry(conn, new.id, session.id, ("createStage", "stages"), new).await? {
        return fetch::<StageRow>(conn, session.id, id).await;
    }
    ensure_accepts_work(&session, new.chat_id.is_some(), "create a stage")?;
    let stage = insert(conn, id, new).await?;
    audit::record(conn, origin, &audit::created(&stage)).await?;
    Ok(stage)
}

/// Inserts a stage after the caller checked the session (see [`check_place`]).
pub(crate) async fn insert(conn: &mut PgConnection, id: Uuid, new: &NewStage) -> Result<StageRow> {
    check_place(conn, new).await?;
    sqlx::query_as(
        "INSERT INTO stages (id, session_id, stage_name, stage_index, expected_agent_count, \
            parallel_type, success_policy, chat_id, chat_user_message_id) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING *",
    )
    .bind(id)
    .bind(new.session_id)
    .bind(&new.name)
    .bind(new.stage_index)
    .bind(new.expected_agent_count)
    .bind(new.parallel_type)
    .bind(new.success_policy)
    .bind(new.chat_id)
    .bind(new.chat_user_message_id)
    .fetch_one(traced(conn))
    .await
    .map_err(|e| id_taken(e, id))
}

/// Refuses a stage whose index its session already uses, and chat links that point elsewhere
/// (another session's chat, another chat's question, a question already answered).
pub(crate) async fn check_place(conn: &mut PgConnection, new: &NewStage) -> Result<()> {
    let taken: Option<String> = sqlx::query_scalar(
        "SELECT stage_name FROM stages WHERE session_id = $1 AND stage_index = $2",
    )
    .bind(new.session_id)
    .bind(new.stage_index)
    .fetch_optional(traced(&mut *conn))
    .await?;
    if let Some(name) = taken {
        return Err(Error::Conflict(format!(
            "session {} already has stage {} (\"{name}\")",
            new.session_id, new.stage_index
        )));
    }
    if let Some(chat_id) = new.chat_id {
        let in_session: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT FROM chats WHERE id = $1 AND session_id = $2)",
        )
        .bind(chat_id)
        .bind(new.session_id)
        .fetch_one(traced(&mut *conn))
        .await?;
        if !in_session {
            return Err(Error::bad_input(format!(
                "chat {chat_id} is not a chat of session {}",
                new.session_id
            )));
        }
    }
    if let Some(message_id) = new.chat_user_message_id {
        let (chat, answered): (Option<Uuid>, bool) = sqlx::query_as(
            "SELECT (SELECT chat_id FROM chat_user_messages WHERE id = $1 AND session_id = $2), \
                    EXISTS (SELECT 1 FROM stages \
                            WHERE chat_user_message_id = $1 AND session_id = $2)",
        )
        .bind(message_id)
        .bind(new.session_id)
        .fetch_one(traced(&mut *conn))
        .await?;
        if chat != new.chat_id {
            return Err(Error::bad_input(format!(
                "chat message {message_id} is not a message of the given chat"
            )));
        }
        if answered {
            return Err(Error::Conflict(format!(
                "chat message {message_id} already has its answering stage"
            )));
        }
    }
    Ok(())
}

/// What a stage's status is, given its top-level executions (sub-agents are represented by
/// their orchestrator).
///
/// - No execution started yet: `pending`. Any still pending or active, or fewer than expected
///   created: `active`.
/// - All finished: a single-agent stage takes its agent's status. Otherwise policy `all`
///   completes when every agent completed, policy `any` when one did; failing that, all timed
///   out → `timed_out`, all cancelled → `cancelled`, any other mix → `failed`, with an error
///   naming each agent that did not succeed.
pub fn aggregate<'a>(
    stage: &StageRow,
    executions: impl IntoIterator<Item = &'a ExecutionRow>,
) -> (StageStatus, Option<String>) {
    use ExecutionStatus as E;
    let top: Vec<&ExecutionRow> = executions
        .into_iter()
        .filter(|e| e.parent_execution_id.is_none())
        .collect();
    if top.iter().all(|e| e.status == E::Pending) {
        return (StageStatus::Pending, None);
    }
    let running = top
        .iter()
        .any(|e| matches!(e.status, E::Pending | E::Active));
    if running || (top.len() as i32) < stage.expected_agent_count {
        return (StageStatus::Active, None);
    }
    let all = |s: E| top.iter().all(|e| e.status == s);
    let completed = match (top.len(), stage.success_policy) {
        (1, _) => all(E::Completed),
        (_, Some(SuccessPolicy::Any)) => top.iter().any(|e| e.status == E::Completed),
        _ => all(E::Completed),
    };
    if completed {
        return (StageStatus::Completed, None);
    }
    let status = if all(E::TimedOut) {
        StageStatus::TimedOut
    } else if all(E::Cancelled) {
        StageStatus::Cancelled
    } else {
        StageStatus::Failed
    };
    let failures: Vec<String> = top
        .iter()
        .filter(|e| e.status != E::Completed)
        .map(|e| match &e.error_message {
            Some(error) => format!("{} {}: {error}", e.agent_name, snake(e.status)),
            None => format!("{} {}", e.agent_name, snake(e.status)),
        })
        .collect();
    (
        status,
        Some(format!(
            "agents that did not succeed: {}",
            failures.join("; ")
        )),
    )
}

/// Recomputes a stage's status and timing from its executions (the stage is locked).
pub(crate) async fn refresh(
    conn: &mut PgConnection,
    session_id: Uuid,
    stage_id: Uuid,
) -> Result<StageRow> {
    let stage = lock_stage(conn, session_id, stage_id).await?;
    let executions: Vec<ExecutionRow> = sqlx::query_as(
        "SELECT * FROM agent_executions WHERE stage_id = $1 AND session_id = $2 \
         ORDER BY agent_index",
    )
    .bind(stage_id)
    .bind(session_id)
    .fetch_all(traced(&mut *conn))
    .await?;
    let (status, error_message) = aggregate(&stage, &executions);
    if status == stage.status && error_message == stage.error_message {
        return Ok(stage);
    }
    let finished = is_finished_stage(status);
    let stage: StageRow = sqlx::query_as(
        "UPDATE stages SET status = $2, error_message = $3, \
            started_at = CASE WHEN $2 = 'pending' THEN NULL ELSE coalesce(started_at, \
                (SELECT min(started_at) FROM agent_executions \
                 WHERE stage_id = $1 AND session_id = $5), now()) END, \
            completed_at = CASE WHEN $4 THEN now() ELSE NULL END, \
            duration_ms = CASE WHEN $4 THEN (EXTRACT(EPOCH FROM (now() - coalesce(started_at, now()))) * 1000)::bigint END, \
            updated_at = now() \
         WHERE id = $1 AND session_id = $5 RETURNING *",
    )
    .bind(stage_id)
    .bind(status)
    .bind(error_message)
    .bind(finished)
    .bind(session_id)
    .fetch_one(traced(&mut *conn))
    .await?;
    // An answer that ends is a chat's latest activity, as the question that started it was.
    if let (true, Some(chat_id)) = (finished, stage.chat_id) {
        sqlx::query("UPDATE chats SET updated_at = now() WHERE id = $1 AND session_id = $2")
            .bind(chat_id)
            .bind(session_id)
            .execute(traced(conn))
            .await?;
    }
    Ok(stage)
}
