//! Children of many parents at once, in their natural order.

use std::collections::HashMap;
use std::sync::Arc;

use sqlx::Executor as _;
use uuid::Uuid;

use super::page::Joined;
use super::{
    ExecutionRow, InSession as _, Key, SessionStatusChangeRow, StageRow, Store, group_by,
    group_by_key, key_columns,
};
use crate::error::Result;

impl Store {
    /// Status history of each session, oldest first.
    pub async fn status_changes_by_session(
        &self,
        ids: &[Uuid],
    ) -> Result<HashMap<Uuid, Vec<Arc<SessionStatusChangeRow>>>> {
        let rows: Vec<SessionStatusChangeRow> = sqlx::query_as(
            "SELECT * FROM session_status_changes WHERE session_id = ANY($1) \
             ORDER BY session_id, id",
        )
        .bind(ids)
        .fetch_all(self.reader().await?.traced())
        .await?;
        Ok(group_by(ids, rows, |r| r.session_id))
    }

    /// Stages of each session, by stage_index.
    pub async fn stages_by_session(
        &self,
        ids: &[Uuid],
    ) -> Result<HashMap<Uuid, Vec<Arc<StageRow>>>> {
        let rows: Vec<StageRow> = sqlx::query_as(STAGES_BY_SESSION)
            .bind(ids)
            .fetch_all(self.reader().await?.traced())
            .await?;
        Ok(group_by(ids, rows, |r| r.session_id))
    }

    /// Executions of each stage (by key), by agent_index.
    pub async fn executions_by_stage(
        &self,
        stages: &[Key],
    ) -> Result<HashMap<Key, Vec<Arc<ExecutionRow>>>> {
        let (ids, sessions) = key_columns(stages);
        let rows: Vec<ExecutionRow> = sqlx::query_as(EXECUTIONS_BY_STAGE)
            .bind(ids)
            .bind(sessions)
            .fetch_all(self.reader().await?.traced())
            .await?;
        Ok(group_by_key(stages, rows, |r| r.stage_id))
    }

    /// Sub-agents spawned by each execution (by key), by agent_index.
    pub async fn executions_by_parent(
        &self,
        parents: &[Key],
    ) -> Result<HashMap<Key, Vec<Arc<ExecutionRow>>>> {
        let (ids, sessions) = key_columns(parents);
        let rows: Vec<ExecutionRow> = sqlx::query_as(concat!(
            "SELECT e.* FROM ",
            keys_relation!(),
            " JOIN agent_executions e ON e.parent_execution_id = k.id AND e.session_id = k.session_id \
             ORDER BY e.session_id, e.parent_execution_id, e.agent_index"
        ))
        .bind(ids)
        .bind(sessions)
        .fetch_all(self.reader().await?.traced())
        .await?;
        Ok(group_by_key(parents, rows, |r| {
            r.parent_execution_id.unwrap_or_default()
        }))
    }

    /// Every execution of each session, with every stage (those without executions too): in
    /// one statement, what [`Store::executions_by_stage`] reads for each of the sessions'
    /// stages and [`Store::executions_by_parent`] for each of their executions.
    pub async fn executions_of_sessions(&self, sessions: &[Uuid]) -> Result<SessionExecutions> {
        #[derive(sqlx::FromRow)]
        struct Row {
            stage_key: Uuid,
            stage_session: Uuid,
            #[sqlx(flatten)]
            execution: Joined<ExecutionRow>,
        }
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT s.id AS stage_key, s.session_id AS stage_session, e.* \
             FROM stages s LEFT JOIN agent_executions e \
               ON e.stage_id = s.id AND e.session_id = s.session_id \
             WHERE s.session_id = ANY($1) \
             ORDER BY s.session_id, s.id, e.agent_index",
        )
        .bind(sessions)
        .fetch_all(self.reader().await?.traced())
        .await?;
        let mut read = SessionExecutions::default();
        let mut all = Vec::new();
        for row in rows {
            let stage = read
                .by_stage
                .entry(Key::new(row.stage_session, row.stage_key))
                .or_default();
            if let Some(execution) = row.execution.0 {
                let execution = Arc::new(execution);
                stage.push(execution.clone());
                all.push(execution);
            }
        }
        for execution in &all {
            read.by_parent.entry(execution.key()).or_default();
        }
        for execution in all {
            if let Some(parent) = execution.parent_execution_id {
                let parent = Key::new(execution.session_id, parent);
                read.by_parent.entry(parent).or_default().push(execution);
            }
        }
        // In agent-index order, as the statements by stage and by parent read them.
        for children in read.by_parent.values_mut() {
            children.sort_by_key(|e| e.agent_index);
        }
        Ok(read)
    }
}

/// The executions of sessions ([`Store::executions_of_sessions`]).
#[derive(Default)]
pub struct SessionExecutions {
    /// Each stage's, by agent index.
    pub by_stage: HashMap<Key, Vec<Arc<ExecutionRow>>>,
    /// Each execution's sub-agents, by agent index.
    pub by_parent: HashMap<Key, Vec<Arc<ExecutionRow>>>,
}

/// The statements of the loaders under a list of sessions: its stages, and their agents.
const STAGES_BY_SESSION: &str =
    "SELECT * FROM stages WHERE session_id = ANY($1) ORDER BY session_id, stage_index";
const EXECUTIONS_BY_STAGE: &str = concat!(
    "SELECT e.* FROM ",
    keys_relation!(),
    " JOIN agent_executions e ON e.stage_id = k.id AND e.session_id = k.session_id \
     ORDER BY e.session_id, e.stage_id, e.agent_index"
);

impl Store {
    /// How a connection runs the statements that load a session list's stages (for `sessions`)
    /// and their agents (for `stages`): `EXPLAIN (VERBOSE) EXECUTE` of each as a prepared
    /// statement, as it runs on its tenth execution as much as on its first.
    pub async fn explain_list_loaders(
        &self,
        sessions: &[Uuid],
        stages: &[Key],
    ) -> Result<[String; 2]> {
        let mut conn = self.connection().await?;
        let mut explain = async |sql: &str, lists: &[Vec<Uuid>]| -> Result<String> {
            let types = vec!["uuid[]"; lists.len()].join(", ");
            let arrays: Vec<String> = lists
                .iter()
                .map(|ids| {
                    let ids: Vec<String> = ids.iter().map(Uuid::to_string).collect();
                    format!("'{{{}}}'", ids.join(","))
                })
                .collect();
            conn.execute(format!("PREPARE casefile_explained ({types}) AS {sql}").as_str())
                .await?;
            let lines: Vec<String> = sqlx::query_scalar(&format!(
                "EXPLAIN (VERBOSE) EXECUTE casefile_explained({})",
                arrays.join(", ")
            ))
            .fetch_all(&mut *conn)
            .await?;
            conn.execute("DEALLOCATE casefile_explained").await?;
            Ok(lines.join("\n"))
        };
        let (stage_ids, stage_sessions) = key_columns(stages);
        let plans = async {
            Ok([
                explain(STAGES_BY_SESSION, &[sessions.to_vec()]).await?,
                explain(EXECUTIONS_BY_STAGE, &[stage_ids, stage_sessions]).await?,
            ])
        }
        .await;
        if plans.is_err() {
            // It may still hold the prepared statement; no later borrower should find it.
            conn.close_on_drop();
        }
        plans
    }
}
