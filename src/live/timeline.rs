//! A resumable timeline subscription: replay from the database after a cursor, then live, with
//! no gap and no duplicate at the switch.
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

use super::queue::{COALESCE, Interrupted};
use super::{Change, Hub};
use crate::cursor::{EventTypes, Sent, TimelinePosition as Position};
use crate::error::{Error, Result};
use crate::model::TimelineEventStatus;
use crate::observe::metrics::LIVE_COALESCED_DELTAS;
use crate::store::session_events::ChangeKind;
use crate::store::{Store, TimelineEventRow, TimelineReplay};

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

async fn event_now(store: &Store, id: Uuid) -> Result<Option<Arc<TimelineEventRow>>> {
    let rows: Vec<TimelineEventRow> = store.by_ids(&[id]).await?;
    Ok(rows.into_iter().next().map(Arc::new))
}

/// Announces, from the database, the events before `seq` that were not announced: a change
/// was missed (it only happens when the live feed lost one).
async fn fill_before(
    store: &Store,
    position: &mut Position,
    seq: i64,
    out: &mut Vec<Update>,
) -> Result<()> {
    while position.missed_before(seq) {
        let rows = events_between(store, position, position.seen, seq).await?;
        let Some(last) = rows.last() else {
            // Nothing there (yet): those sequence numbers are not visible; don't re-read.
            position.pass(seq - 1);
            break;
        };
        let last = last.sequence_number;
        for row in &rows {
            catch_up(position, row, out);
        }
        position.pass(last);
    }
    Ok(())
}

/// The updates of a live change, relative to what was sent. It reads the database only when
/// the change cannot be applied as it is (something before it was missed).
async fn apply(
    store: &Store,
    position: &mut Position,
    change: &Change,
    out: &mut Vec<Update>,
) -> Result<()> {
    let row = &change.row;
    let Some(seq) = row.sequence_number else {
        return Ok(());
    };
    if !row.kind.is_timeline() {
        return Ok(());
    }
    if position.missed_before(seq) {
        fill_before(store, position, seq, out).await?;
    }
    // The event's type comes with the change (with its event, or its appended text); read
    // the event when it does not.
    let event_type = change
        .event
        .as_ref()
        .filter(|_| row.kind.is_event_bound())
        .map(|event| event.event_type)
        .or(change.event_type);
    let Some(event_type) = event_type else {
        if let Some(event) = event_now(store, row.entity_id).await? {
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
    let sent = position.sent(seq);
    if sent == Sent::Done {
        // Already sent whole (by the replay, or from a later read of the event).
        return Ok(());
    }
    if row.kind == ChangeKind::EventAppended
        && let Sent::Streaming(sent) = sent
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
        _ => event_now(store, row.entity_id).await?,
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

/// The subscription: replay after `position`, then live updates, until the subscriber goes or
/// falls too far behind (then it is told to resume from its last cursor). When this process may
/// have missed changes, it replays again from what it sent, and goes on.
pub fn stream(
    store: Store,
    hub: Arc<Hub>,
    mut position: Position,
) -> impl futures::Stream<Item = Result<Update>> + Send {
    async_stream::try_stream! {
        let mut sent = position.clone();
        let mut out = Vec::new();
        loop {
            // Subscribe before replaying: whatever happens during the replay is also received
            // live, and the position drops what was already sent.
            let mut live = hub.subscribe(position.session);
            for row in streaming_events(&store, &position).await? {
                catch_up(&mut position, &row, &mut out);
            }
            let mut after = position.seen;
            loop {
                let rows = events_between(&store, &position, after, i64::MAX).await?;
                let Some(last) = rows.last() else { break };
                after = last.sequence_number;
                for row in &rows {
                    catch_up(&mut position, row, &mut out);
                }
                position.pass(after);
                for update in emit(&mut sent, std::mem::take(&mut out)) {
                    yield update;
                }
            }
            for update in emit(&mut sent, std::mem::take(&mut out)) {
                yield update;
            }
            let now = tokio::time::Instant::now();
            let mut last_sent = now.checked_sub(COALESCE).unwrap_or(now);
            let ended = loop {
                let received = live.recv_window(last_sent).await;
                let mut ended = None;
                let mut applied = Vec::with_capacity(received.len());
                for item in received {
                    match item {
                        Ok(change) => {
                            apply(&store, &mut position, &change, &mut out).await?;
                            applied.push(change);
                        }
                        Err(why) => {
                            ended = Some(why);
                            break;
                        }
                    }
                }
                // What was gathered goes out first, so the cursor in a too-slow error is exact.
                let updates = emit(&mut sent, std::mem::take(&mut out));
                if !updates.is_empty() {
                    last_sent = tokio::time::Instant::now();
                }
                for update in updates {
                    yield update;
                }
                applied.iter().for_each(|change| change.delivered());
                // Sent and known are the same now, up to events outside the view passed over.
                sent = position.clone();
                if let Some(why) = ended {
                    break why;
                }
            };
            match ended {
                Interrupted::Missed => continue,
                Interrupted::TooSlow => {
                    Err(Error::SubscriberTooSlow(format!(
                        "subscriber fell behind; subscribe again with after: \"{}\"",
                        sent.encode()
                    )))?;
                }
                Interrupted::Closed => return,
            }
        }
    }
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
