//! A session's changes in its durable order (gapless, in commit order) from a position on: the
//! `session` subscription's source, and the reading the events stream shares.

use std::sync::Arc;

use uuid::Uuid;

use super::resume::{Resumable, StreamPosition, resume};
use super::{Change, Hub};
use crate::cursor::EventsPosition;
use crate::error::{Error, Result};
use crate::store::Store;
use crate::store::session_events::SessionEventRow;

/// Rows read per replay query.
const REPLAY_PAGE: i64 = 500;

impl StreamPosition for EventsPosition {
    /// A change's position in the session's order.
    type Key = i64;

    fn key(change: &Change) -> Option<i64> {
        Some(change.row.position)
    }

    fn has(&self, position: &i64) -> bool {
        *position <= self.position
    }

    fn misses_before(&self, position: &i64) -> bool {
        *position > self.position.saturating_add(1)
    }

    fn cursor(&self) -> String {
        self.encode()
    }
}

/// The session's changes after `at` (and before `until`), a page at most. The order has no
/// gaps, so a gap that cannot be read whole is an error.
pub(super) async fn page(
    store: &Store,
    at: &mut EventsPosition,
    until: Option<&i64>,
) -> Result<Option<Vec<SessionEventRow>>> {
    let wanted = until.map_or(REPLAY_PAGE, |until| {
        (until - 1 - at.position).min(REPLAY_PAGE)
    });
    let rows = store
        .session_events_after(at.session, at.position, wanted)
        .await?;
    if let Some(last) = rows.last() {
        at.position = last.position;
    }
    if let Some(until) = until
        && (rows.len() as i64) < wanted
    {
        return Err(Error::Internal(format!(
            "session {}: position {} was not found before {until}",
            at.session,
            at.position + 1
        )));
    }
    Ok((!rows.is_empty()).then_some(rows))
}

/// The changes themselves: a replayed one is read from its row, a live one is sent as the hub
/// read it.
struct SessionChanges {
    store: Store,
}

impl Resumable for SessionChanges {
    type Position = EventsPosition;
    type Item = Arc<Change>;
    type Out = Arc<Change>;

    async fn page(
        &mut self,
        at: &mut EventsPosition,
        until: Option<&i64>,
    ) -> Result<Option<Vec<Arc<Change>>>> {
        let rows = page(&self.store, at, until).await?;
        Ok(rows.map(|rows| {
            rows.into_iter()
                .map(|row| Arc::new(Change::of_row(row)))
                .collect()
        }))
    }

    async fn live(
        &mut self,
        at: &mut EventsPosition,
        &position: &i64,
        change: &Arc<Change>,
    ) -> Result<Vec<Arc<Change>>> {
        at.position = position;
        Ok(vec![change.clone()])
    }

    fn emit(&mut self, _: &mut EventsPosition, changes: Vec<Arc<Change>>) -> Vec<Arc<Change>> {
        changes
    }
}

/// Every change of `session` after position `after`, until the subscriber goes or falls too far
/// behind.
pub fn stream(
    store: Store,
    hub: Arc<Hub>,
    session: Uuid,
    after: i64,
) -> impl futures::Stream<Item = Result<Arc<Change>>> + Send {
    let at = EventsPosition {
        session,
        position: after,
    };
    resume(SessionChanges { store }, move || hub.subscribe(session), at)
}
