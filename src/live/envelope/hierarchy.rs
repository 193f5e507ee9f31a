//! The agent tree as `system.topology` carries it: seed 004's `hierarchy`, a record. Each agent
//! is keyed by its id and says what its `source` would (`agent_id`, `agent_type`, `agent_name`,
//! `team_name`), its `status`, and its `children`, a record of the same shape.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::model::db_name;
use crate::store::ExecutionRow;

/// The tree of `agents` (each after its parent), its ids spelled by `id` (a transport's own:
/// a UUID, a global ID). An agent whose parent is not among them is a root.
pub fn hierarchy(agents: &[Arc<ExecutionRow>], id: impl Fn(Uuid) -> String) -> Value {
    let known: HashMap<Uuid, &ExecutionRow> = agents.iter().map(|a| (a.id, a.as_ref())).collect();
    let mut children: HashMap<Option<Uuid>, Vec<&ExecutionRow>> = HashMap::new();
    for agent in agents {
        let parent = agent.parent_execution_id.filter(|p| known.contains_key(p));
        children.entry(parent).or_default().push(agent);
    }
    Value::Object(level(None, &children, &id))
}

/// The record of the agents under `parent` (the roots under `None`), at most ten deep.
fn level(
    parent: Option<Uuid>,
    children: &HashMap<Option<Uuid>, Vec<&ExecutionRow>>,
    id: &impl Fn(Uuid) -> String,
) -> Map<String, Value> {
    let agents = children.get(&parent).map(Vec::as_slice).unwrap_or_default();
    agents
        .iter()
        .map(|agent| {
            let node = json!({
                "agent_id": id(agent.id),
                "agent_type": db_name(agent.agent_type),
                "agent_name": agent.agent_name,
                "team_name": agent.team_name,
                "status": db_name(agent.status),
                "children": level(Some(agent.id), children, id),
            });
            (id(agent.id), node)
        })
        .collect()
}
