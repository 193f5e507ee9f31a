//! How many sessions ran a chain version (`totalCount` of `Chain.sessionsConnection`), by chain
//! version.

use std::collections::HashMap;

use super::{Load, LoadError};
use crate::store::Store;
use crate::store::chains::ChainSessions;

loader!(
    /// Counts of the sessions that ran a chain version.
    SessionCountsByChain: ChainSessions => i64, |store, keys| store.session_counts_by_chain(keys)
);
