//! Session changes and the dashboard feed from a position on: replayed from their durable
//! orders, then live. Both orders are gapless and in commit order, so a stream keeps only the
//! last position it sent: a live change at or below it was replayed already, one past the next
//! was missed (read from the database), and after an interruption it replays from there.

use std::sync::Arc;

use uuid::Uuid;

use super::queue::Interrupted;
use super::{Change, Hub};
use crate::cursor::{EventsPosition, FeedPosition};
use crate::error::{Error, Result};
use crate::store::{SessionStatusChangeRow, Store};

/// Rows read per replay query.
const REPLAY_PAGE: i64 = 500;

/// Every change of `session` after position `after`, until the subscriber goes or falls too far
/// behind.
pub fn session_changes(
    store: Store,
    hub: Arc<Hub>,
    session: Uuid,
    after: i64,
) -> impl futures::Stream<Item = Result<Arc<Change>>> + Send {
    async_stream::try_stream! {
        let mut at = after;
        loop {
            // Subscribe before replaying: what commits meanwhile is also received live, and is
            // dropped there by its position.
            let mut live = hub.subscribe(session);
            loop {
                let rows = store.session_events_after(session, at, REPLAY_PAGE).await?;
                let Some(last) = rows.last() else { break };
                at = last.position;
                for row in rows {
                    yield Arc::new(Change::of_row(row));
                }
            }
            let ended = loop {
                let change = match live.recv().await {
                    Ok(change) => change,
                    Err(why) => break why,
                };
                let position = change.row.position;
                if position <= at {
                    continue;
                }
                if position > at + 1 {
                    for row in store.session_events_after(session, at, position - 1 - at).await? {
                        yield Arc::new(Change::of_row(row));
                    }
                }
                at = position;
                yield change;
            };
            match ended {
                Interrupted::Missed => continue,
                Interrupted::TooSlow => {
                    Err(Error::SubscriberTooSlow(format!(
                        "subscriber fell behind; subscribe again with after: \"{}\"",
                        EventsPosition { session, position: at }.encode()
                    )))?;
                }
                Interrupted::Closed => return,
            }
        }
    }
}

/// Every entry of the dashboard feed after position `after`, until the subscriber goes or falls
/// too far behind. The hub says when a session's status changed; the entries are read from the
/// feed itself.
pub fn feed(
    store: Store,
    hub: Arc<Hub>,
    after: i64,
) -> impl futures::Stream<Item = Result<Arc<SessionStatusChangeRow>>> + Send {
    async_stream::try_stream! {
        let mut at = after;
        loop {
            let mut live = hub.subscribe_feed();
            let ended = loop {
                loop {
                    let rows = store.feed_after(at, REPLAY_PAGE).await?;
                    let Some(last) = rows.last() else { break };
                    at = last.feed_position;
                    for row in rows {
                        yield Arc::new(row);
                    }
                }
                match live.recv().await {
                    Ok(change) => change.delivered(),
                    Err(why) => break why,
                }
            };
            match ended {
                Interrupted::Missed => continue,
                Interrupted::TooSlow => {
                    Err(Error::SubscriberTooSlow(format!(
                        "subscriber fell behind; subscribe again with after: \"{}\"",
                        FeedPosition { position: at }.encode()
                    )))?;
                }
                Interrupted::Closed => return,
            }
        }
    }
}
