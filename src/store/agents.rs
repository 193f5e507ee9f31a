//! A session's agent tree as a flat list in tree order: each execution after its parent, siblings
//! by agent index, stages in order. Depth and parent are columns, so a client rebuilds the tree
//! from one list (a nested `subAgents` chain ten deep would hit the query depth limit).

use std::collections::HashMap;
use std::sync::Arc;

use uuid::Uuid;

use super::{ExecutionRow, Store};
use crate::error::Result;

/// The tree order: by stage, then the path of agent indexes from the root. Every join names
/// the session, so each stays within one session's rows.
const TREE: &str = "WITH RECURSIVE tree AS ( \
        SELECT a.id, a.session_id, ARRAY[s.stage_index, a.agent_index] AS path \
        FROM agent_executions a JOIN stages s ON s.id = a.stage_id AND s.session_id = a.session_id \
        WHERE a.session_id = ANY($1) AND a.parent_execution_id IS NULL \
        UNION ALL \
        SELECT c.id, c.session_id, t.path || c.agent_index \
        FROM tree t JOIN agent_executions c \
          ON c.parent_execution_id = t.id AND c.session_id = t.session_id) ";

impl Store {
    /// The agent trees of these sessions.
    pub async fn agents_by_session(
        &self,
        sessions: &[Uuid],
    ) -> Result<HashMap<Uuid, Vec<Arc<ExecutionRow>>>> {
        let rows: Vec<ExecutionRow> = sqlx::query_as(&format!(
            "{TREE} SELECT a.* FROM tree \
             JOIN agent_executions a ON a.id = tree.id AND a.session_id = tree.session_id \
             ORDER BY a.session_id, tree.path"
        ))
        .bind(sessions)
        .fetch_all(self.reader().await?.traced())
        .await?;
        Ok(super::group_by(sessions, rows, |r| r.session_id))
    }

    /// A session's agent tree as it was at `position` of its event order: the executions created
    /// at or before it.
    pub async fn agent_tree_at(&self, session: Uuid, position: i64) -> Result<Vec<ExecutionRow>> {
        Ok(sqlx::query_as(&format!(
            "{TREE} SELECT a.* FROM tree \
             JOIN agent_executions a ON a.id = tree.id AND a.session_id = tree.session_id \
             WHERE EXISTS (SELECT 1 FROM session_events e \
                           WHERE e.entity_id = a.id AND e.kind = 'execution' \
                             AND e.previous_status IS NULL AND e.session_id = a.session_id \
                             AND e.position <= $2) \
             ORDER BY tree.path"
        ))
        .bind([session])
        .bind(position)
        .fetch_all(self.reader().await?.traced())
        .await?)
    }
}
