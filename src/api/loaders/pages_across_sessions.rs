//! Pages under every stage or execution of a session, read in one statement for many sessions
//! and handed to the loader of those pages, whose fields then find them loaded.

use std::collections::HashMap;
use std::future::Future;

use super::{
    LlmInteractionPages, Load, LoadError, Loader, McpInteractionPages, MessagePages, Reach,
    TimelinePages,
};
use crate::store::Parents;

/// A loader of pages that can also read, for a key whose parent is its session, that page of
/// every parent of its scope in the session, each keyed as the loader keys it.
pub trait ReadAcross: Load<Key: Reach> {
    fn load_across(
        &self,
        keys: &[Self::Key],
    ) -> impl Future<Output = Result<HashMap<Self::Key, Self::Value>, LoadError>> + Send;
}

/// Reads ahead through `L` (one page of every parent of a scope, per key) and primes `pages`
/// with what it read.
pub struct PagesAcrossSessions<L: Load> {
    read: L,
    pages: Loader<L>,
}

impl<L: Load> PagesAcrossSessions<L> {
    pub fn new(read: L, pages: &Loader<L>) -> Self {
        PagesAcrossSessions {
            read,
            pages: pages.clone(),
        }
    }
}

impl<L: ReadAcross> Load for PagesAcrossSessions<L> {
    type Key = L::Key;
    type Value = ();

    async fn load(&self, keys: &[L::Key]) -> Result<HashMap<L::Key, ()>, LoadError> {
        self.pages.prime(self.read.load_across(keys).await?);
        Ok(keys.iter().map(|key| (key.clone(), ())).collect())
    }

    fn within(key: &L::Key, _: &(), session: uuid::Uuid) -> bool {
        key.within(session)
    }
}

/// Implements [`ReadAcross`] for a per-scope loader by the store query it loads with.
macro_rules! read_across {
    ($loader:ident, $query:ident) => {
        impl ReadAcross for $loader {
            async fn load_across(
                &self,
                keys: &[Self::Key],
            ) -> Result<HashMap<Self::Key, Self::Value>, LoadError> {
                let parents = Parents::AcrossSession(self.scope);
                Ok(self.store.$query(self.scope, parents, keys).await?)
            }
        }
    };
}

read_across!(TimelinePages, timeline_pages);
read_across!(MessagePages, message_pages);
read_across!(LlmInteractionPages, llm_interaction_pages);
read_across!(McpInteractionPages, mcp_interaction_pages);
