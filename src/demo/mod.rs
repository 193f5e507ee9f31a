//! Demo data: eight investigation sessions, one in every status, that between them use every
//! table, status and type of the data model, with plausible Kubernetes / Argo CD / Prometheus
//! content (`casefile demo`, `casefile serve --demo`); and fourteen short ones over the week
//! before, for the analytics to group by day, alert type, chain, model and agent.
//!
//! A [`Demo`] first builds the rows in memory while it plays a clock forward, so timestamps,
//! durations, token counts, costs and stage outcomes follow from what the scenario does instead
//! of being typed in by hand. The store then restores them as finished history (checked, in
//! one transaction; see [`crate::store::write::restore`]). Ids are UUIDv7 built from that fixed
//! clock and a hash of a stable label, and a session already there keeps what it has, so
//! loading twice writes nothing the second time.
//!
//! Layout: `ids` (deterministic ids and time), `catalog` (models and their prices, agents,
//! tools), `chains` (the chain versions the sessions ran), `builder` (the `Demo` builder) and
//! `scenarios` (one file per session).

mod builder;
mod catalog;
mod chains;
mod ids;
mod scenarios;

use chrono::Utc;
use uuid::Uuid;

use crate::auth::tokens::{generate_share_secret, hash};
use crate::error::Result;
use crate::store::Store;
use crate::store::audit::Origin;
use crate::store::prices::{PriceSet, set_price};
use crate::store::share_links::{self, NewShareLink};
use crate::store::write::restore::{Records, Restored, restore};
use builder::Demo;

/// The demo sessions' records.
pub fn records() -> Records {
    let mut demo = Demo::default();
    scenarios::play_all(&mut demo);
    let mut records = demo.rows;
    records.chains = chains::records();
    records
}

/// Loads the demo's price list and sessions (idempotent) and says what it wrote.
pub async fn load(store: &Store) -> Result<String> {
    let mut tx = store.begin().await?;
    let mut prices = 0;
    // The price list's audit trail: the demo's first records of it.
    let origin = Origin {
        actor: Some("demo".to_owned()),
        action: "setModelPrice".to_owned(),
        ..Origin::default()
    };
    for price in catalog::price_list() {
        if matches!(
            set_price(&mut tx, &price, &origin).await?,
            PriceSet::Added(_)
        ) {
            prices += 1;
        }
    }
    tx.commit().await?;
    let records = records();
    // Each session and chain version it adds is audited as created by the demo.
    let restorer = Origin {
        actor: Some("demo".to_owned()),
        action: "restore".to_owned(),
        ..Origin::default()
    };
    let restored = restore(store, &records, &restorer).await?;
    Ok(format!(
        "{}; {prices} of {} prices new",
        summary(&records, restored),
        catalog::PRICES.len()
    ))
}

/// How long the link the demo prints at start-up works.
pub const SHARED_FOR: chrono::TimeDelta = chrono::TimeDelta::days(7);

/// Shares the demo's orchestrated session (a supervisor, two teams and their workers) with a
/// new link, created by `demo`: its session and secret.
pub async fn share_orchestrated(store: &Store) -> Result<(Uuid, String)> {
    let session = records()
        .sessions
        .iter()
        .find(|s| s.chain_id == chains::LATENCY_ORCHESTRATED.name)
        .expect("the demo has an orchestrated session")
        .id;
    let secret = generate_share_secret();
    let digest = hash(&secret);
    let origin = Origin {
        actor: Some("demo".to_owned()),
        action: "createShareLink".to_owned(),
        ..Origin::default()
    };
    let new = NewShareLink {
        session_id: session,
        secret_hash: &digest,
        expires_at: Utc::now() + SHARED_FOR,
        note: Some("printed by the demo at start-up"),
        created_by: origin.actor.as_deref(),
    };
    let mut tx = store.begin().await?;
    share_links::create(&mut tx, &new, &origin).await?;
    tx.commit().await?;
    Ok((session, secret))
}

fn summary(records: &Records, restored: Restored) -> String {
    let counts = [
        (records.chains.len(), "chain versions"),
        (records.sessions.len(), "sessions"),
        (records.chats.len(), "chats"),
        (records.chat_messages.len(), "chat messages"),
        (records.stages.len(), "stages"),
        (records.executions.len(), "agent executions"),
        (records.timeline_events.len(), "timeline events"),
        (records.messages.len(), "messages"),
        (restored.tool_calls, "tool calls"),
        (records.llm_interactions.len(), "LLM interactions"),
        (records.mcp_interactions.len(), "MCP interactions"),
        (records.notifications.len(), "notifications"),
    ];
    let total: usize = counts.iter().map(|(n, _)| n).sum();
    let parts: Vec<String> = counts
        .iter()
        .map(|&(n, what)| match what.strip_suffix('s') {
            Some(one) if n == 1 => format!("{n} {one}"),
            _ => format!("{n} {what}"),
        })
        .collect();
    format!(
        "demo data: {} ({} of {total} rows new)",
        parts.join(", "),
        restored.new
    )
}
