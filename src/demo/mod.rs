//! Demo data: eight investigation sessions, one in every status, that between them use every
//! table, status and type of the data model, with plausible Kubernetes / Argo CD / Prometheus
//! content (`casefile demo`, `casefile serve --demo`); and fourteen short ones over the week
//! before, for the analytics to group by day, alert type, chain, model and agent.
//!
//! A [`Demo`] first builds the rows in memory while it plays a clock forward, so timestamps,
//! durations, token counts, costs and stage outcomes follow from what the scenario does instead
//! of being typed in by hand. [`Demo::write`] then inserts them in one transaction. Ids are
//! UUIDv7 built from that fixed clock and a hash of a stable label, and every insert is
//! `ON CONFLICT (id) DO NOTHING`, so loading twice writes nothing the second time.
//!
//! Layout: `ids` (deterministic ids and time), `catalog` (models, agents, tools), `builder`
//! (the `Demo` builder), `write` (the insert) and `scenarios` (one file per session).

mod builder;
mod catalog;
mod ids;
mod scenarios;
mod write;

use crate::error::Result;
use crate::store::Store;
use builder::Demo;

/// Loads the demo sessions (idempotent) and says what it wrote.
pub async fn load(store: &Store) -> Result<String> {
    let mut demo = Demo::default();
    scenarios::play_all(&mut demo);
    demo.write(store).await
}
