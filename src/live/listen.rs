//! The processes sharing a database tell one another of their commits: each announces its own
//! (one NOTIFY after its commits, never inside them: see
//! `migrations/0116_changes_announced_after_commit.sql`) and wakes its hub on the others'.
//! Both go through the one LISTEN connection, so announcing takes no pooled connection.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgListener;
use tokio::sync::watch;

use super::Hub;
use crate::store::change_log::{CHANGES_CHANNEL, announce_changes};

enum Next {
    Heard(Result<Option<sqlx::postgres::PgNotification>, sqlx::Error>),
    Announce,
    Stop,
}

pub(super) async fn listen_for_changes(hub: Arc<Hub>, mut stop: watch::Receiver<bool>) {
    let me = hub.reader.to_string();
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
        if let Err(err) = listener.listen(CHANGES_CHANNEL).await {
            tracing::warn!("LISTEN failed: {err}; retrying");
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        loop {
            // Both waits are cancel-safe: a notification half read stays buffered, and a
            // permit to announce is kept until taken.
            let next = tokio::select! {
                received = listener.try_recv() => Next::Heard(received),
                () = hub.announcements.notified() => Next::Announce,
                _ = stop.changed() => Next::Stop,
            };
            match next {
                Next::Stop => return,
                // Commits made while this one is sent leave a permit: they go in the next.
                Next::Announce => {
                    if let Err(err) = announce_changes(&mut listener, &me).await {
                        tracing::warn!("announcing live changes failed: {err}");
                        hub.announcements.notify_one();
                        hub.poke();
                        break;
                    }
                }
                Next::Heard(Ok(Some(heard))) if heard.payload() == me => {}
                Next::Heard(Ok(Some(_))) => hub.poke(),
                // The connection dropped: catch up from the last change read, then listen again.
                Next::Heard(Ok(None)) => {
                    hub.poke();
                    break;
                }
                Next::Heard(Err(err)) => {
                    tracing::warn!("live change listener failed: {err}");
                    hub.poke();
                    break;
                }
            }
        }
    }
}
