//! The dashboard feed (every session's status changes, in one order the same on every server)
//! from a position on. The hub says when a session's status changed, not where its entry is in
//! the feed: the entries are read from the feed itself.

use std::sync::Arc;

use super::resume::{Resumable, StreamPosition, resume};
use super::{Change, Hub};
use crate::cursor::FeedPosition;
use crate::error::Result;
use crate::store::{SessionStatusChangeRow, Store};

/// Entries read per replay query.
const REPLAY_PAGE: i64 = 500;

impl StreamPosition for FeedPosition {
    /// A change says only that the feed moved on: everything after what was sent is read.
    type Key = ();

    fn key(_: &Change) -> Option<()> {
        Some(())
    }

    fn has(&self, (): &()) -> bool {
        false
    }

    fn misses_before(&self, (): &()) -> bool {
        true
    }

    fn cursor(&self) -> String {
        self.encode()
    }
}

struct Feed {
    store: Store,
}

impl Resumable for Feed {
    type Position = FeedPosition;
    type Item = Arc<SessionStatusChangeRow>;
    type Out = Arc<SessionStatusChangeRow>;

    async fn page(
        &mut self,
        at: &mut FeedPosition,
        _: Option<&()>,
    ) -> Result<Option<Vec<Arc<SessionStatusChangeRow>>>> {
        let rows = self.store.feed_after(at.position, REPLAY_PAGE).await?;
        let Some(last) = rows.last() else {
            return Ok(None);
        };
        at.position = last.feed_position;
        Ok(Some(rows.into_iter().map(Arc::new).collect()))
    }

    /// The entries were read as the gap before the change.
    async fn live(
        &mut self,
        _: &mut FeedPosition,
        (): &(),
        _: &Arc<Change>,
    ) -> Result<Vec<Arc<SessionStatusChangeRow>>> {
        Ok(Vec::new())
    }

    fn emit(
        &mut self,
        _: &mut FeedPosition,
        entries: Vec<Arc<SessionStatusChangeRow>>,
    ) -> Vec<Arc<SessionStatusChangeRow>> {
        entries
    }
}

/// Every entry of the dashboard feed after position `after`, until the subscriber goes or falls
/// too far behind.
pub fn stream(
    store: Store,
    hub: Arc<Hub>,
    after: i64,
) -> impl futures::Stream<Item = Result<Arc<SessionStatusChangeRow>>> + Send {
    let at = FeedPosition { position: after };
    resume(Feed { store }, move || hub.subscribe_feed(), at)
}
