//! Chain versions by name and version: the version a session ran (`Session.chain`), and
//! `Query.chain`.

use std::collections::HashMap;
use std::sync::Arc;

use uuid::Uuid;

use super::{Load, LoadError, Reach};
use crate::store::{ChainKey, ChainRow, Store};

loader!(
    /// Chain versions by name and version.
    ChainsByKey: ChainKey => Arc<ChainRow>, |store, keys| store.chains_by_key(keys)
);

/// A chain version belongs to no session: every session that ran it shows it.
impl Reach for ChainKey {
    fn within(&self, _: Uuid) -> bool {
        true
    }
}
