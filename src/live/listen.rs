//! Wakes the hub when another process commits a change: every change's transaction sends one
//! NOTIFY (see `migrations/0004_live_reliability.sql`).

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgListener;
use tokio::sync::watch;

use super::Hub;

pub(super) async fn listen_for_changes(hub: Arc<Hub>, mut stop: watch::Receiver<bool>) {
    loop {
        if *stop.borrow() {
            return;
        }
        let mut listener = match PgListener::connect_with(hub.store.pool()).await {
            Ok(listener) => listener,
            Err(err) => {
                tracing::warn!("cannot LISTEN for live changes: {err}; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if let Err(err) = listener.listen("casefile_live").await {
            tracing::warn!("LISTEN failed: {err}; retrying");
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        loop {
            let received = tokio::select! {
                received = listener.try_recv() => received,
                _ = stop.changed() => return,
            };
            match received {
                Ok(Some(_)) => hub.poke(),
                // The connection dropped: catch up from the last change read, then listen again.
                Ok(None) => {
                    hub.poke();
                    break;
                }
                Err(err) => {
                    tracing::warn!("live change listener failed: {err}");
                    hub.poke();
                    break;
                }
            }
        }
    }
}
