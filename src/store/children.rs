//! Children of many parents at once, in their natural order.

use std::collections::HashMap;
use std::sync::Arc;

use uuid::Uuid;

use super::{
    ExecutionRow, Key, SessionStatusChangeRow, StageRow, Store, group_by, group_by_key,
    key_columns, one_session,
};
use crate::error::Result;

impl Store {
    /// Status history of each session, oldest first.
    pub async fn status_changes_by_session(
        &self,
        ids: &[Uuid],
    ) -> Result<HashMap<Uuid, Vec<Arc<SessionStatusChangeRow>>>> {
        let rows: Vec<SessionStatusChangeRow> = sqlx::query_as(concat!(
            "SELECT c.* FROM ",
            per_session!("SELECT * FROM session_status_changes WHERE session_id = k.session_id"),
            " c ORDER BY c.session_id, c.id"
        ))
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
        let query = match ids {
            // One session, a parameter: pruned as the statement starts (see `per_key_in_session!`).
            [id] => sqlx::query_as(STAGES_OF_ONE_SESSION).bind(*id),
            _ => sqlx::query_as(STAGES_BY_SESSION).bind(ids),
        };
        let rows: Vec<StageRow> = query.fetch_all(self.reader().await?.traced()).await?;
        Ok(group_by(ids, rows, |r| r.session_id))
    }

    /// Executions of each stage (by key), by agent_index.
    pub async fn executions_by_stage(
        &self,
        stages: &[Key],
    ) -> Result<HashMap<Key, Vec<Arc<ExecutionRow>>>> {
        let (ids, sessions) = key_columns(stages);
        let query = match one_session(stages) {
            Some(session) => sqlx::query_as(EXECUTIONS_BY_STAGE_IN_SESSION)
                .bind(ids)
                .bind(session),
            None => sqlx::query_as(EXECUTIONS_BY_STAGE).bind(ids).bind(sessions),
        };
        let rows: Vec<ExecutionRow> = query.fetch_all(self.reader().await?.traced()).await?;
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
            per_key!(
                "SELECT * FROM agent_executions \
                 WHERE parent_execution_id = k.id AND session_id = k.session_id"
            ),
            " e ORDER BY e.session_id, e.parent_execution_id, e.agent_index"
        ))
        .bind(ids)
        .bind(sessions)
        .fetch_all(self.reader().await?.traced())
        .await?;
        Ok(group_by_key(parents, rows, |r| {
            r.parent_execution_id.unwrap_or_default()
        }))
    }
}

/// The statements of the loaders under a list of sessions: its stages, and their agents.
const STAGES_BY_SESSION: &str = concat!(
    "SELECT s.* FROM ",
    per_session!("SELECT * FROM stages WHERE session_id = k.session_id"),
    " s ORDER BY s.session_id, s.stage_index"
);
const STAGES_OF_ONE_SESSION: &str =
    "SELECT * FROM stages WHERE session_id = $1 ORDER BY stage_index";
const EXECUTIONS_BY_STAGE_IN_SESSION: &str = concat!(
    "SELECT e.* FROM ",
    per_key_in_session!("SELECT * FROM agent_executions WHERE stage_id = k.id AND session_id = $2"),
    " e ORDER BY e.stage_id, e.agent_index"
);
const EXECUTIONS_BY_STAGE: &str = concat!(
    "SELECT e.* FROM ",
    per_key!("SELECT * FROM agent_executions WHERE stage_id = k.id AND session_id = k.session_id"),
    " e ORDER BY e.session_id, e.stage_id, e.agent_index"
);

impl Store {
    /// How a connection runs the statements that load a session list's stages (for `sessions`)
    /// and their agents (for `stages`), on the plan it keeps for each ([`Store::explain_generic`]).
    pub async fn explain_list_loaders(
        &self,
        sessions: &[Uuid],
        stages: &[Key],
    ) -> Result<[String; 2]> {
        let array = |ids: &[Uuid]| {
            let ids: Vec<String> = ids.iter().map(Uuid::to_string).collect();
            format!("{{{}}}", ids.join(","))
        };
        let (stage_ids, stage_sessions) = key_columns(stages);
        self.explain_generic([
            (STAGES_BY_SESSION, vec![array(sessions)]),
            (
                EXECUTIONS_BY_STAGE,
                vec![array(&stage_ids), array(&stage_sessions)],
            ),
        ])
        .await
    }
}
