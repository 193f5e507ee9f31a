//! Every execution of a session, read once for the fields that list executions by stage and
//! by parent (and find one by key), which then find them loaded.

use std::collections::HashMap;

use uuid::Uuid;

use super::{ByKey, ExecutionsByStage, Load, LoadError, Loader, SubAgentsByParent};
use crate::store::{ExecutionRow, InSession as _, Store};

/// Reads ahead the executions of sessions, and primes the loaders of executions by key, by
/// stage and by parent with them.
pub struct ExecutionsOfSessions {
    store: Store,
    by_key: Loader<ByKey<ExecutionRow>>,
    by_stage: Loader<ExecutionsByStage>,
    by_parent: Loader<SubAgentsByParent>,
}

impl ExecutionsOfSessions {
    pub fn new(
        store: &Store,
        by_key: &Loader<ByKey<ExecutionRow>>,
        by_stage: &Loader<ExecutionsByStage>,
        by_parent: &Loader<SubAgentsByParent>,
    ) -> Self {
        ExecutionsOfSessions {
            store: store.clone(),
            by_key: by_key.clone(),
            by_stage: by_stage.clone(),
            by_parent: by_parent.clone(),
        }
    }
}

impl Load for ExecutionsOfSessions {
    type Key = Uuid;
    type Value = ();

    async fn load(&self, sessions: &[Uuid]) -> Result<HashMap<Uuid, ()>, LoadError> {
        let read = self.store.executions_of_sessions(sessions).await?;
        self.by_key.prime(
            read.by_stage
                .values()
                .flatten()
                .map(|execution| (execution.key(), execution.clone())),
        );
        self.by_stage.prime(read.by_stage);
        self.by_parent.prime(read.by_parent);
        Ok(sessions.iter().map(|session| (*session, ())).collect())
    }

    fn within(session: &Uuid, _: &(), bound: Uuid) -> bool {
        *session == bound
    }
}
