//! The timeline subscription's source (resumed by [`super::resume`]): updates to a view of a
//! session's timeline, relative to what was sent.
//!
//! The subscriber's position is what it has been sent: a watermark below which every event was
//! announced, and for the announced events whose end has not been sent yet, how many characters
//! of their content were. Everything is delivered relative to that position, so replayed and
//! live updates can overlap or arrive out of order without sending any character twice, and a
//! change that skips ahead is filled from the database. The cursor is that position, so it stays
//! as small as the number of events streaming at once.
//!
//! Within a session, events are created and finished under the session's lock, so sequence
//! order is commit order: a live creation never overtakes an earlier one.

use std::collections::HashMap;
use std::sync::Arc;

use uuid::Uuid;

use super::resume::{Resumable, StreamPosition, resume};
use super::{Change, Hub};
use crate::cursor::{EventTypes, Sent, TimelinePosition as Position};
use crate::error::Result;
use crate::model::TimelineEventStatus;
use crate::observe::metrics::LIVE_COALESCED_DELTAS;
use crate::store::session_events::ChangeKind;
use crate::store::{Key, Store, TimelineEventRow, TimelineReplay};

/// What one update says about an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, async_graphql::Enum)]
pub enum TimelineUpdateKind {
    /// The event was created (its content follows as `APPENDED` deltas).
    Created,
    /// Content was appended: `delta` at `offset`.
    Appended,
    /// The event finished; `event` holds its final state.
    Finished,
}

/// One update, and the position after it.
#[derive(Debug, Clone)]
pub struct Update {
    pub kind: TimelineUpdateKind,
    pub event_id: Uuid,
    pub sequence_number: i64,
    pub offset: Option<i64>,
    pub delta: Option<String>,
    /// For `Appended`: where the delta ends, in characters.
    end: i64,
    pub event: Option<Arc<TimelineEventRow>>,
    pub cursor: String,
}

/// What an update, once sent, changes of a position.
fn record(position: &mut Position, update: &Update) {
    let seq = update.sequence_number;
    match update.kind {
        TimelineUpdateKind::Created => position.announced(seq),
        TimelineUpdateKind::Appended => position.given_up_to(seq, update.end),
        TimelineUpdateKind::Finished => position.ended(seq),
    }
}

fn step(
    kind: TimelineUpdateKind,
    row: &Arc<TimelineEventRow>,
    offset: Option<i64>,
    delta: Option<String>,
    end: i64,
) -> Update {
    let event = (kind != TimelineUpdateKind::Appended).then(|| row.clone());
    Update {
        kind,
        event_id: row.id,
        sequence_number: row.sequence_number,
        offset,
        delta,
        end,
        event,
        cursor: String::new(),
    }
}

/// Turns what is known of an event into the updates the subscriber has not had yet.
fn catch_up(position: &mut Position, row: &Arc<TimelineEventRow>, out: &mut Vec<Update>) {
    let seq = row.sequence_number;
    if !position
        .view()
        .covers(Some(row.stage_id), Some(row.execution_id), row.event_type)
    {
        position.pass(seq);
        return;
    }
    let sent = match position.sent(seq) {
        Sent::Done => return,
        Sent::Streaming(sent) => sent,
        Sent::NotAnnounced => {
            let created = step(TimelineUpdateKind::Created, row, None, None, 0);
            record(position, &created);
            out.push(created);
            0
        }
    };
    let length = row.content.chars().count() as i64;
    // A writer may finish with different, shorter content; `FINISHED` carries it whole.
    if length > sent {
        let delta: String = row.content.chars().skip(sent as usize).collect();
        let appended = step(
            TimelineUpdateKind::Appended,
            row,
            Some(sent),
            Some(delta),
            length,
        );
        record(position, &appended);
        out.push(appended);
    }
    if row.status != TimelineEventStatus::Streaming {
        let finished = step(TimelineUpdateKind::Finished, row, None, None, 0);
        record(position, &finished);
        out.push(finished);
    }
}

/// Events read per replay query.
const REPLAY_PAGE: i64 = 200;

fn replay_of(position: &Position) -> TimelineReplay {
    let view = position.view();
    TimelineReplay {
        session: position.session,
        stage: view.stage,
        execution: view.execution,
        types: view.types.map(EventTypes::to_vec),
    }
}

/// Events `after < sequence number < before` of the position's session (one page).
async fn events_between(
    store: &Store,
    position: &Position,
    after: i64,
    before: i64,
) -> Result<Vec<Arc<TimelineEventRow>>> {
    store
        .replay_timeline(replay_of(position), after, before, REPLAY_PAGE)
        .await
}

/// The still-streaming events of a resumed position, as stored now.
async fn streaming_events(
    store: &Store,
    position: &Position,
) -> Result<Vec<Arc<TimelineEventRow>>> {
    let seqs: Vec<i64> = position.streaming.keys().copied().collect();
    store
        .replay_timeline_events(replay_of(position), &seqs)
        .await
}

async fn event_now(store: &Store, event: Key) -> Result<Option<Arc<TimelineEventRow>>> {
    let rows: Vec<TimelineEventRow> = store.by_keys(&[event]).await?;
    Ok(rows.into_iter().next().map(Arc::new))
}

/// The updates of the live change of event `seq`, relative to what was sent. It reads the
/// database only when the change cannot be applied as it is.
async fn apply(
    store: &Store,
    position: &mut Position,
    seq: i64,
    change: &Change,
    out: &mut Vec<Update>,
) -> Result<()> {
    let row = &change.row;
    // The event's type comes with the change (with its event, or its appended text); read
    // the event when it does not.
    let event_type = change
        .event
        .as_ref()
        .filter(|_| row.kind.is_event_bound())
        .map(|event| event.event_type)
        .or(change.event_type);
    let Some(event_type) = event_type else {
        if let Some(event) = event_now(store, row.key()).await? {
            catch_up(position, &event, out);
        }
        return Ok(());
    };
    if !position
        .view()
        .covers(row.stage_id, row.execution_id, event_type)
    {
        position.pass(seq);
        return Ok(());
    }
    if row.kind == ChangeKind::EventAppended
        && let Sent::Streaming(sent) = position.sent(seq)
        && let (Some(start), Some(end)) = (row.start_offset, row.end_offset)
    {
        let (start, end) = (i64::from(start), i64::from(end));
        if end <= sent {
            return Ok(());
        }
        // A delta read after the event was finished with other content is not the append's.
        if start <= sent
            && let Some(delta) = &change.delta
            && delta.chars().count() as i64 == end - start
        {
            let fresh: String = delta.chars().skip((sent - start) as usize).collect();
            let appended = Update {
                kind: TimelineUpdateKind::Appended,
                event_id: row.entity_id,
                sequence_number: seq,
                offset: Some(sent),
                delta: Some(fresh),
                end,
                event: None,
                cursor: String::new(),
            };
            record(position, &appended);
            out.push(appended);
            return Ok(());
        }
    }
    let event = match &change.event {
        Some(event) if row.kind.is_event_bound() => Some(event.clone()),
        _ => event_now(store, row.key()).await?,
    };
    if let Some(event) = event {
        catch_up(position, &event, out);
    }
    Ok(())
}

/// Merges the appends to each event gathered in one window into one update (placed where its
/// first append was; text of one event stays in order, events stay independent) and gives each
/// update the cursor of the position right after it, as sent.
fn emit(sent: &mut Position, updates: Vec<Update>) -> Vec<Update> {
    let mut merged: Vec<Update> = Vec::with_capacity(updates.len());
    let mut appending: HashMap<Uuid, usize> = HashMap::new();
    for update in updates {
        match update.kind {
            TimelineUpdateKind::Appended => {
                if let Some(&at) = appending.get(&update.event_id) {
                    let into = &mut merged[at];
                    if into.end == update.offset.unwrap_or(-1)
                        && let (Some(text), Some(more)) = (into.delta.as_mut(), &update.delta)
                    {
                        text.push_str(more);
                        into.end = update.end;
                        metrics::counter!(LIVE_COALESCED_DELTAS).increment(1);
                        continue;
                    }
                }
                appending.insert(update.event_id, merged.len());
            }
            TimelineUpdateKind::Finished => {
                appending.remove(&update.event_id);
            }
            TimelineUpdateKind::Created => {}
        }
        merged.push(update);
    }
    for update in &mut merged {
        record(sent, update);
        update.cursor = sent.encode();
    }
    merged
}

impl StreamPosition for Position {
    /// The sequence number of a change's event.
    type Key = i64;

    fn key(change: &Change) -> Option<i64> {
        let row = &change.row;
        row.sequence_number.filter(|_| row.kind.is_timeline())
    }

    fn has(&self, &seq: &i64) -> bool {
        self.sent(seq) == Sent::Done
    }

    fn misses_before(&self, &seq: &i64) -> bool {
        self.missed_before(seq)
    }

    fn cursor(&self) -> String {
        self.encode()
    }
}

/// A view of the timeline, as updates relative to what was sent.
struct Timeline {
    store: Store,
}

impl Resumable for Timeline {
    type Position = Position;
    type Item = Update;
    type Out = Update;

    /// The rest of the events a resumed position left streaming, as stored now.
    async fn partly_sent(&mut self, at: &mut Position) -> Result<Vec<Update>> {
        let mut out = Vec::new();
        for row in streaming_events(&self.store, at).await? {
            catch_up(at, &row, &mut out);
        }
        Ok(out)
    }

    async fn page(
        &mut self,
        at: &mut Position,
        until: Option<&i64>,
    ) -> Result<Option<Vec<Update>>> {
        let before = until.copied().unwrap_or(i64::MAX);
        let rows = events_between(&self.store, at, at.seen, before).await?;
        let Some(last) = rows.last() else {
            if let Some(until) = until {
                // Nothing there (yet): those sequence numbers are not visible; don't re-read.
                at.pass(until - 1);
            }
            return Ok(None);
        };
        let last = last.sequence_number;
        let mut out = Vec::new();
        for row in &rows {
            catch_up(at, row, &mut out);
        }
        at.pass(last);
        Ok(Some(out))
    }

    async fn live(
        &mut self,
        at: &mut Position,
        &seq: &i64,
        change: &Arc<Change>,
    ) -> Result<Vec<Update>> {
        let mut out = Vec::new();
        apply(&self.store, at, seq, change, &mut out).await?;
        Ok(out)
    }

    fn emit(&mut self, sent: &mut Position, updates: Vec<Update>) -> Vec<Update> {
        emit(sent, updates)
    }

    /// Every update holds the appends that follow: they are merged per event.
    fn opens_window(&self, _: &Update) -> bool {
        true
    }
}

/// The subscription: replay after `position`, then live updates, until the subscriber goes or
/// falls too far behind (then it is told to resume from its last cursor).
pub fn stream(
    store: Store,
    hub: Arc<Hub>,
    position: Position,
) -> impl futures::Stream<Item = Result<Update>> + Send {
    let session = position.session;
    resume(Timeline { store }, move || hub.subscribe(session), position)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cursor::View;

    fn appended(event: Uuid, seq: i64, offset: i64, delta: &str) -> Update {
        Update {
            kind: TimelineUpdateKind::Appended,
            event_id: event,
            sequence_number: seq,
            offset: Some(offset),
            delta: Some(delta.to_owned()),
            end: offset + delta.chars().count() as i64,
            event: None,
            cursor: String::new(),
        }
    }

    #[test]
    fn interleaved_streams_are_merged_per_event_with_cursors_as_sent() {
        let session = Uuid::now_v7();
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let mut sent = Position::new(session, View::default());
        sent.announced(1);
        sent.announced(2);
        let window = vec![
            appended(a, 1, 0, "hé"),
            appended(b, 2, 0, "x"),
            appended(a, 1, 2, "llo"),
            appended(b, 2, 1, "y"),
            appended(a, 1, 5, " ✓"),
        ];
        let out = emit(&mut sent, window);
        let texts: Vec<_> = out.iter().map(|u| u.delta.clone().unwrap()).collect();
        assert_eq!(texts, ["héllo ✓", "xy"]);
        let first = Position::decode(&out[0].cursor, session).unwrap();
        assert_eq!(first.sent(1), Sent::Streaming(7));
        assert_eq!(first.sent(2), Sent::Streaming(0), "b not sent yet");
        assert_eq!(sent.sent(2), Sent::Streaming(2));
    }
}
