//! A session's event log as pages (`Session.eventsConnection`): the `events` subscription's
//! envelopes, one per position (appends are not merged, so a page's size is what it was asked
//! for), at positions its cursors share with the subscription's.

use super::envelope::{Envelope, EventCategory};
use super::events::{EventFilter, envelopes};
use crate::error::Result;
use crate::store::Store;
use crate::store::page::{Page, Slice};
use crate::store::session_events::{ChangeKind, EventRange};
use uuid::Uuid;

/// Rows read per statement once a filtered page needs more than its first read found.
const MORE: i64 = 500;

/// The kinds of change whose envelopes may fall in `category` (its envelope decides).
fn kinds_of(category: EventCategory) -> &'static [ChangeKind] {
    use ChangeKind as K;
    match category {
        EventCategory::Lifecycle => &[
            K::Session,
            K::SessionDeleted,
            K::SessionRestored,
            K::Execution,
        ],
        EventCategory::Stage => &[K::Stage],
        EventCategory::Dispatch => &[K::Execution],
        EventCategory::Llm => &[K::EventCreated, K::EventFinished, K::EventAppended],
        EventCategory::Timeline | EventCategory::System => &[K::EventCreated, K::EventFinished],
        EventCategory::Message => &[K::Message],
        EventCategory::Interaction => &[K::LlmInteraction, K::McpInteraction],
        EventCategory::Chat => &[K::Chat, K::ChatUserMessage, K::ChatDeleted, K::ChatRestored],
        EventCategory::Notification => &[K::Notification],
    }
}

/// The page `slice` (of positions) of the envelopes of `session` that `filter` admits. The
/// statement narrows by kind, stage and execution along the primary key; the envelope decides
/// (as the subscription's does), reading on until the page is full or the log ends.
pub async fn page(
    store: &Store,
    session: Uuid,
    filter: &EventFilter,
    slice: &Slice<i64>,
) -> Result<Page<Envelope>> {
    let mut kinds: Vec<ChangeKind> = filter
        .categories
        .iter()
        .flat_map(|c| kinds_of(*c).iter().copied())
        .collect();
    kinds.sort_by_key(|k| *k as u8);
    kinds.dedup();
    let mut range = EventRange {
        session,
        after: slice.after.unwrap_or(0),
        before: slice.before,
        kinds,
        stages: filter.stages.iter().copied().collect(),
        // The orchestrator's events have no execution: naming it narrows nothing here.
        executions: if filter.sources.contains(&session) {
            Vec::new()
        } else {
            filter.sources.iter().copied().collect()
        },
    };
    let wanted = slice.size.max(0) as usize + 1;
    let mut found: Vec<Envelope> = Vec::new();
    let mut read = wanted as i64;
    while found.len() < wanted {
        let rows = store
            .session_events_in(&range, slice.from_end, read)
            .await?;
        let Some(last) = rows.last().map(|r| r.position) else {
            break;
        };
        let full = rows.len() as i64 == read;
        if slice.from_end {
            range.before = Some(last);
        } else {
            range.after = last;
        }
        found.extend(
            envelopes(store, rows)
                .await?
                .into_iter()
                .filter(|e| filter.admits(e)),
        );
        if !full {
            break;
        }
        read = MORE;
    }
    let more = found.len() > slice.size.max(0) as usize;
    found.truncate(slice.size.max(0) as usize);
    if slice.from_end {
        found.reverse();
    }
    // Beyond the bounds: every position exists (the order has no gaps), so unfiltered, events
    // lie at or before a given `after` and at or after a given `before`; filtered, that is not
    // known without reading, and the Relay spec lets it be false.
    let unfiltered = filter.is_empty();
    let earlier = unfiltered && slice.after.is_some_and(|a| a >= 1);
    let later = unfiltered && slice.before.is_some_and(|b| b >= 1);
    Ok(Page {
        rows: found,
        has_previous: earlier || (more && slice.from_end),
        has_next: later || (more && !slice.from_end),
    })
}
