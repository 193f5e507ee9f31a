//! Pages of the sessions that ran a chain version (`Chain.sessionsConnection`), by chain
//! version and page.

use std::collections::HashMap;
use std::sync::Arc;

use uuid::Uuid;

use super::{Load, LoadError, Reach};
use crate::store::chains::ChainSessionsPageKey;
use crate::store::page::Page;
use crate::store::{SessionRow, Store};

loader!(
    /// Pages of the sessions that ran a chain version, newest first.
    SessionPagesByChain: ChainSessionsPageKey => Page<Arc<SessionRow>>,
    |store, keys| store.session_pages_by_chain(keys)
);

/// Every session that ran the chain version.
impl Reach for ChainSessionsPageKey {
    fn within(&self, _: Uuid) -> bool {
        false
    }
}
