//! Agent executions: pending → active → completed / failed / timed_out / cancelled.

use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use super::lifecycle::{finish_locked, note_execution_finished, note_execution_started};
use super::locks::{Owners, Target};
use super::notifications::{self, NewNotification};
use super::stages::{ensure_accepts_work, refresh};
use super::{
    check_name, check_optional, check_required, fetch, id_taken, is_finished_execution,
    is_finished_stage, is_retry, limits, lock_execution, lock_session, lock_stage, snake,
};
use crate::error::{Error, Result};
use crate::model::{AgentType, ExecutionStatus};
use crate::store::audit::{self, Origin};
use crate::store::traced::traced;
use crate::store::{ExecutionRow, SessionRow, StageRow};

#[derive(Debug, Clone, Serialize)]
pub struct NewExecution {
    pub id: Option<Uuid>,
    pub stage_id: Uuid,
    pub agent_name: String,
    pub agent_index: i32,
    pub iteration_strategy: String,
    pub llm_provider: Option<String>,
    pub llm_model: Option<String>,
    pub parent_execution_id: Option<Uuid>,
    pub agent_type: Option<AgentType>,
    pub team_name: Option<String>,
    pub task: Option<String>,
}

/// How deep an agent tree may be (seed 003): a root is at depth 0.
pub const MAX_DEPTH: i32 = 10;

/// Where a new execution stands in its tree: its type, team and depth, from what the client
/// said and its parent (`None` for a top-level execution).
pub(crate) fn place(
    new: &NewExecution,
    parent: Option<&ExecutionRow>,
) -> Result<(AgentType, Option<String>, i32)> {
    let depth = parent.map_or(0, |p| p.depth + 1);
    if depth > MAX_DEPTH {
        return Err(Error::bad_input(format!(
            "agent trees are at most {MAX_DEPTH} deep: parent execution {} is at depth {}",
            parent.map(|p| p.id).unwrap_or_default(),
            depth - 1
        )));
    }
    let agent_type = new.agent_type.unwrap_or(if parent.is_some() {
        AgentType::Worker
    } else {
        AgentType::GlobalSupervisor
    });
    let team = match (agent_type, &new.team_name, parent) {
        (AgentType::GlobalSupervisor, Some(_), _) => {
            return Err(Error::bad_input(
                "a `GLOBAL_SUPERVISOR` has no team: leave out `teamName`",
            ));
        }
        (AgentType::GlobalSupervisor, None, Some(_)) => {
            return Err(Error::bad_input(
                "a `GLOBAL_SUPERVISOR` is the root of its tree: it has no parent execution",
            ));
        }
        (AgentType::GlobalSupervisor, None, None) => None,
        (_, Some(team), _) => Some(team.clone()),
        (_, None, Some(parent)) => Some(
            parent
                .team_name
                .clone()
                .unwrap_or_else(|| parent.agent_name.clone()),
        ),
        (_, None, None) => {
            return Err(Error::bad_input(
                "a `TEAM_SUPERVISOR` or `WORKER` needs a `teamName`",
            ));
        }
    };
    Ok((agent_type, team, depth))
}

impl NewExecution {
    pub(crate) fn check(&self) -> Result<()> {
        check_name("agentName", &self.agent_name)?;
        check_required(
            "iterationStrategy",
            &self.iteration_strategy,
            limits::STRATEGY,
        )?;
        check_optional("llmProvider", self.llm_provider.as_deref(), limits::NAME)?;
        check_optional("llmModel", self.llm_model.as_deref(), limits::NAME)?;
        if let Some(team) = &self.team_name {
            check_name("teamName", team)?;
        }
        check_optional("task", self.task.as_deref(), limits::TEXT)?;
        if self.agent_index < 1 {
            return Err(Error::bad_input(format!(
                "`agentIndex` must be at least 1, got {}",
                self.agent_index
            )));
        }
        Ok(())
    }
}

pub async fn create(
    conn: &mut PgConnection,
    owners: &mut Owners,
    new: &NewExecution,
    origin: &Origin,
) -> Result<ExecutionRow> {
    new.check()?;
    let session_id = owners.session_of(conn, Target::Stage(new.stage_id)).await?;
    let session = lock_session(conn, session_id).await?;
    let id = new.id.unwrap_or_else(Uuid::now_v7);
    if is_retry(
        conn,
        new.id,
        session_id,
        ("createAgentExecution", "agent_executions"),
        new,
    )
    .await?
    {
        return fetch::<ExecutionRow>(conn, session_id, id).await;
    }
    let stage = lock_stage(conn, session_id, new.stage_id).await?;
    ensure_accepts_work(
        &session,
        stage.chat_id.is_some(),
        "create an agent execution",
    )?;
    if is_finished_stage(stage.status) {
        return Err(Error::Conflict(format!(
            "cannot add an agent execution: stage {} is already {}",
            stage.id,
            snake(stage.status)
        )));
    }
    let parent = check_place(conn, &stage, new).await?;
    if let Some(parent) = &parent
        && is_finished_execution(parent.status)
    {
        return Err(Error::Conflict(format!(
            "cannot spawn a sub-agent: parent execution {} is already {}",
            parent.id,
            snake(parent.status)
        )));
    }
    let (agent_type, team_name, depth) = place(new, parent.as_ref())?;
    let execution: ExecutionRow = sqlx::query_as(
        "INSERT INTO agent_executions (id, stage_id, session_id, parent_execution_id, agent_name, \
            agent_index, iteration_strategy, llm_provider, llm_model, agent_type, team_name, \
            task, depth) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING *",
    )
    .bind(id)
    .bind(stage.id)
    .bind(session_id)
    .bind(new.parent_execution_id)
    .bind(&new.agent_name)
    .bind(new.agent_index)
    .bind(&new.iteration_strategy)
    .bind(&new.llm_provider)
    .bind(&new.llm_model)
    .bind(agent_type)
    .bind(&team_name)
    .bind(&new.task)
    .bind(depth)
    .fetch_one(traced(&mut *conn))
    .await
    .map_err(|e| id_taken(e, id))?;
    refresh(conn, session_id, stage.id).await?;
    audit::record(conn, origin, &audit::created(&execution)).await?;
    Ok(execution)
}

/// Refuses an execution whose index its stage already uses, a top-level one past the stage's
/// expected agents, and a sub-agent of an execution in another stage (or session); returns the
/// parent, locked.
pub(crate) async fn check_place(
    conn: &mut PgConnection,
    stage: &StageRow,
    new: &NewExecution,
) -> Result<Option<ExecutionRow>> {
    let (same_index, top_level): (Option<String>, i64) = sqlx::query_as(
        "SELECT (SELECT agent_name FROM agent_executions \
                 WHERE stage_id = $1 AND agent_index = $2 AND session_id = $3), \
                (SELECT count(*) FROM agent_executions \
                 WHERE stage_id = $1 AND session_id = $3 AND parent_execution_id IS NULL)",
    )
    .bind(stage.id)
    .bind(new.agent_index)
    .bind(stage.session_id)
    .fetch_one(traced(&mut *conn))
    .await?;
    if let Some(name) = same_index {
        return Err(Error::Conflict(format!(
            "stage {} already has agent {} ({name})",
            stage.id, new.agent_index
        )));
    }
    match new.parent_execution_id {
        None if top_level >= i64::from(stage.expected_agent_count) => {
            Err(Error::Conflict(format!(
                "stage {} expects {} agent(s) and already has them",
                stage.id, stage.expected_agent_count
            )))
        }
        None => Ok(None),
        Some(parent_id) => {
            let elsewhere = || {
                Error::bad_input(format!(
                    "parent execution {parent_id} runs in another stage; a sub-agent runs in its parent's stage"
                ))
            };
            let parent = match lock_execution(conn, stage.session_id, parent_id).await {
                Err(Error::NotFound(missing)) => {
                    // Refused either way: whether it is another session's says why (by id
                    // alone, on this path only).
                    let exists: bool = sqlx::query_scalar(
                        "SELECT EXISTS (SELECT FROM agent_executions WHERE id = $1)",
                    )
                    .bind(parent_id)
                    .fetch_one(traced(&mut *conn))
                    .await?;
                    return Err(if exists {
                        elsewhere()
                    } else {
                        Error::NotFound(missing)
                    });
                }
                found => found?,
            };
            if parent.stage_id != stage.id {
                return Err(elsewhere());
            }
            Ok(Some(parent))
        }
    }
}

/// pending → active.
pub async fn start(
    conn: &mut PgConnection,
    owners: &mut Owners,
    id: Uuid,
    origin: &Origin,
) -> Result<ExecutionRow> {
    let session_id = owners.session_of(conn, Target::Execution(id)).await?;
    let session = lock_session(conn, session_id).await?;
    let execution = lock_execution(conn, session_id, id).await?;
    match execution.status {
        ExecutionStatus::Pending => {
            let started = start_locked(conn, &session, execution.clone()).await?;
            audit::record(conn, origin, &audit::changed(Some(&execution), &started)).await?;
            Ok(started)
        }
        ExecutionStatus::Active => Ok(execution),
        status => Err(Error::Conflict(format!(
            "cannot start agent execution {id}: it is already {}",
            snake(status)
        ))),
    }
}

/// Starts a pending execution whose session is locked: sets started_at, re-aggregates its
/// stage, and moves a pending session to in_progress.
pub(crate) async fn start_locked(
    conn: &mut PgConnection,
    session: &SessionRow,
    execution: ExecutionRow,
) -> Result<ExecutionRow> {
    let stage = lock_stage(conn, session.id, execution.stage_id).await?;
    ensure_accepts_work(session, stage.chat_id.is_some(), "start an agent execution")?;
    let started: ExecutionRow = sqlx::query_as(
        "UPDATE agent_executions SET status = 'active', started_at = now(), updated_at = now() \
         WHERE id = $1 AND session_id = $2 RETURNING *",
    )
    .bind(execution.id)
    .bind(session.id)
    .fetch_one(traced(&mut *conn))
    .await?;
    refresh(conn, session.id, stage.id).await?;
    if stage.chat_id.is_none() {
        note_execution_started(conn, session).await?;
    }
    Ok(started)
}

/// How an execution ends.
#[derive(Debug, Clone, Serialize)]
pub struct Finish {
    pub id: Uuid,
    pub status: ExecutionStatus,
    pub error_message: Option<String>,
    /// What it returns to its parent (seed 003's result summary).
    pub result_summary: Option<String>,
    /// Notifications about the answer, when it answers a chat question.
    pub notify: Vec<NewNotification>,
}

impl Finish {
    pub(crate) fn check(&self) -> Result<()> {
        if !is_finished_execution(self.status) {
            return Err(Error::bad_input(format!(
                "`{}` is not a final status",
                snake(self.status)
            )));
        }
        if self.status == ExecutionStatus::Completed && self.error_message.is_some() {
            return Err(Error::bad_input(
                "a completed execution takes no `errorMessage`",
            ));
        }
        check_optional("errorMessage", self.error_message.as_deref(), limits::TEXT)?;
        check_optional(
            "resultSummary",
            self.result_summary.as_deref(),
            limits::TEXT,
        )
    }
}

/// pending / active → a final status. Finishing again with the same status and error is a
/// harmless retry; any other change to a finished execution is a conflict. `notify` is written
/// with it when the execution answers a chat question (its stage is the question's answer; the
/// notifications name the question), so the answer and its notifications commit together; a
/// retry writes none again, and `notify` on an execution that answers no question is refused
/// (a session's own go with `completeSession`/`failSession`).
pub async fn finish(
    conn: &mut PgConnection,
    owners: &mut Owners,
    finish: &Finish,
    origin: &Origin,
) -> Result<ExecutionRow> {
    finish.check()?;
    let notify = &finish.notify;
    notifications::check(notify)?;
    let (id, status) = (finish.id, finish.status);
    let error_message = finish.error_message.as_deref();
    let session_id = owners.session_of(conn, Target::Execution(id)).await?;
    let session = lock_session(conn, session_id).await?;
    let before = lock_execution(conn, session_id, id).await?;
    let mut execution = before.clone();
    if execution.status == ExecutionStatus::Pending && status == ExecutionStatus::Completed {
        // Completing work means it ran: start it first, so its stage and session do too.
        execution = start_locked(conn, &session, execution).await?;
    }
    if is_finished_execution(execution.status) {
        if execution.status == status && execution.error_message.as_deref() == error_message {
            return Ok(execution);
        }
        return Err(Error::Conflict(format!(
            "cannot finish agent execution {id} as {}: it is already {}",
            snake(status),
            snake(execution.status)
        )));
    }
    let question = match notify.as_slice() {
        [] => None,
        _ => {
            let stage: StageRow = fetch(conn, session_id, execution.stage_id).await?;
            Some(stage.chat_user_message_id.ok_or_else(|| {
                Error::bad_input(format!(
                    "agent execution {id} answers no chat question, so it takes no `notify` \
                     (a session's notifications go with `completeSession` or `failSession`)"
                ))
            })?)
        }
    };
    let mut finished = finish_locked(conn, session_id, id, status, error_message).await?;
    notifications::create(conn, session_id, question, notify).await?;
    if let Some(summary) = &finish.result_summary {
        finished = sqlx::query_as(
            "UPDATE agent_executions SET result_summary = $3 \
             WHERE id = $1 AND session_id = $2 RETURNING *",
        )
        .bind(id)
        .bind(session_id)
        .bind(summary)
        .fetch_one(traced(&mut *conn))
        .await?;
    }
    note_execution_finished(conn, session_id).await?;
    audit::record(conn, origin, &audit::changed(Some(&before), &finished)).await?;
    Ok(finished)
}
