//! Chain versions by name and version: the version a session ran (`Session.chain`), and
//! `Query.chain`.

use std::collections::HashMap;
use std::sync::Arc;

use super::{Load, LoadError};
use crate::store::{ChainKey, ChainRow, Store};

loader!(
    /// Chain versions by name and version.
    ChainsByKey: ChainKey => Arc<ChainRow>, |store, keys| store.chains_by_key(keys)
);
