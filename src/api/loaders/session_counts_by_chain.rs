//! How many sessions ran a chain version (`totalCount` of `Chain.sessionsConnection`), by chain
//! version.

use std::collections::HashMap;

use uuid::Uuid;

use super::{Load, LoadError, Reach};
use crate::store::Store;
use crate::store::chains::ChainSessions;

loader!(
    /// Counts of the sessions that ran a chain version.
    SessionCountsByChain: ChainSessions => i64, |store, keys| store.session_counts_by_chain(keys)
);

/// Every session that ran the chain version.
impl Reach for ChainSessions {
    fn within(&self, _: Uuid) -> bool {
        false
    }
}
