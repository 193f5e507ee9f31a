//! A resumable timeline subscription: replay from the database after a cursor, then live, with
//! no gap and no duplicate at the switch.
//!
//! The subscriber's position is what it has been sent: for each event, how many characters of
//! its content and whether its end. Everything is delivered relative to that position, so
//! replayed and live updates can overlap or arrive out of order without sending any character
//! twice, and a missed change is filled from the database. The cursor is that position:
//! a watermark (every event up to it is finished and fully sent) plus the events after it.

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::error::RecvError;
use uuid::Uuid;

use super::Change;
use super::hub::Hub;
use crate::error::{Error, Result};
use crate::model::TimelineEventStatus;
use crate::store::{Store, TimelineEventRow};

/// What one update says about an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, async_graphql::Enum)]
pub enum TimelineUpdateKind {
    /// The event was created.
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
    pub event: Option<Arc<TimelineEventRow>>,
    pub cursor: String,
}

/// Which events a subscription follows.
#[derive(Debug, Clone, Copy, Default)]
pub struct Scope {
    pub stage: Option<Uuid>,
    pub execution: Option<Uuid>,
}

impl Scope {
    fn covers(&self, stage: Option<Uuid>, execution: Option<Uuid>) -> bool {
        self.stage.is_none_or(|s| Some(s) == stage)
            && self.execution.is_none_or(|e| Some(e) == execution)
    }
}

/// What has been sent.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Position {
    session: Uuid,
    /// Every event with a sequence number up to this one is finished and sent.
    done: i64,
    /// Events after `done` that were (partly) sent: sequence number → (characters sent, finished).
    open: BTreeMap<i64, (i64, bool)>,
}

impl Position {
    pub fn new(session: Uuid) -> Self {
        Self {
            session,
            done: 0,
            open: BTreeMap::new(),
        }
    }

    /// Starts after an event of a timeline connection page (all events up to it are known).
    pub fn after_sequence(session: Uuid, seq: i64) -> Self {
        Self {
            session,
            done: seq,
            open: BTreeMap::new(),
        }
    }

    pub fn encode(&self) -> String {
        let json =
            serde_json::to_vec(&serde_json::json!({ "live": self })).expect("position serializes");
        URL_SAFE_NO_PAD.encode(json)
    }

    /// A subscription cursor; `None` when `cursor` is not one (it may be a connection cursor).
    pub fn decode(cursor: &str, session: Uuid) -> Option<Result<Self>> {
        #[derive(Deserialize)]
        struct Wrapper {
            live: Position,
        }
        let bytes = URL_SAFE_NO_PAD.decode(cursor.trim()).ok()?;
        let Wrapper { live } = serde_json::from_slice(&bytes).ok()?;
        if live.session != session {
            return Some(Err(Error::bad_input(
                "cursor belongs to the timeline of another session",
            )));
        }
        Some(Ok(live))
    }

    fn sent(&self, seq: i64) -> Option<(i64, bool)> {
        if seq <= self.done {
            Some((i64::MAX, true))
        } else {
            self.open.get(&seq).copied()
        }
    }

    fn record(&mut self, seq: i64, sent: i64, finished: bool) {
        if seq <= self.done {
            return;
        }
        self.open.insert(seq, (sent, finished));
        while let Some((&next, &(_, true))) = self.open.iter().next() {
            if next != self.done + 1 {
                break;
            }
            self.open.remove(&next);
            self.done = next;
        }
    }
}

/// Turns what is known of an event into the updates the subscriber has not had yet.
fn catch_up(
    position: &mut Position,
    scope: Scope,
    row: &Arc<TimelineEventRow>,
    out: &mut Vec<Update>,
) {
    let seq = row.sequence_number;
    if !scope.covers(Some(row.stage_id), Some(row.execution_id)) {
        // Not followed: counts as sent, so the watermark can pass it.
        position.record(seq, 0, row.status != TimelineEventStatus::Streaming);
        return;
    }
    let (mut sent, finished) = match position.sent(seq) {
        Some(state) => state,
        None => {
            position.record(seq, 0, false);
            out.push(update(
                TimelineUpdateKind::Created,
                row,
                None,
                None,
                Some(row.clone()),
                position,
            ));
            (0, false)
        }
    };
    if finished {
        return;
    }
    let length = row.content.chars().count() as i64;
    if length > sent {
        let delta: String = row.content.chars().skip(sent as usize).collect();
        position.record(seq, length, false);
        out.push(update(
            TimelineUpdateKind::Appended,
            row,
            Some(sent),
            Some(delta),
            None,
            position,
        ));
        sent = length;
    }
    if row.status != TimelineEventStatus::Streaming {
        position.record(seq, sent, true);
        out.push(update(
            TimelineUpdateKind::Finished,
            row,
            None,
            None,
            Some(row.clone()),
            position,
        ));
    }
}

fn update(
    kind: TimelineUpdateKind,
    row: &TimelineEventRow,
    offset: Option<i64>,
    delta: Option<String>,
    event: Option<Arc<TimelineEventRow>>,
    position: &Position,
) -> Update {
    Update {
        kind,
        event_id: row.id,
        sequence_number: row.sequence_number,
        offset,
        delta,
        event,
        cursor: position.encode(),
    }
}

/// The events of a session after the position's watermark, as stored now.
async fn replay(store: &Store, position: &Position) -> Result<Vec<Arc<TimelineEventRow>>> {
    let rows: Vec<TimelineEventRow> = sqlx::query_as(
        "SELECT * FROM timeline_events_live WHERE session_id = $1 AND sequence_number > $2 \
         ORDER BY sequence_number",
    )
    .bind(position.session)
    .bind(position.done)
    .fetch_all(store.pool())
    .await?;
    Ok(rows.into_iter().map(Arc::new).collect())
}

async fn event_now(store: &Store, id: Uuid) -> Result<Option<Arc<TimelineEventRow>>> {
    let rows: Vec<TimelineEventRow> = store.by_ids(&[id]).await?;
    Ok(rows.into_iter().next().map(Arc::new))
}

/// The updates of a live change, relative to what was sent; reads the database only when the
/// change cannot be applied as it is (it skipped ahead of what was sent).
async fn apply(
    store: &Store,
    position: &mut Position,
    scope: Scope,
    change: &Change,
    out: &mut Vec<Update>,
) -> Result<()> {
    let row = &change.row;
    let Some(seq) = row.sequence_number else {
        return Ok(());
    };
    if !row.kind.starts_with("event_") {
        return Ok(());
    }
    if !scope.covers(row.stage_id, row.execution_id) {
        let finished = row.kind == "event_finished";
        if position.sent(seq).is_none() || finished {
            position.record(seq, 0, finished);
        }
        return Ok(());
    }
    if row.kind == "event_appended"
        && let (Some(start), Some(end), Some(delta)) =
            (row.start_offset, row.end_offset, &change.delta)
        && let Some((sent, false)) = position.sent(seq)
        && i64::from(start) <= sent
    {
        let (start, end) = (i64::from(start), i64::from(end));
        if end > sent {
            let fresh: String = delta.chars().skip((sent - start) as usize).collect();
            position.record(seq, end, false);
            out.push(Update {
                kind: TimelineUpdateKind::Appended,
                event_id: row.entity_id,
                sequence_number: seq,
                offset: Some(sent),
                delta: Some(fresh),
                event: None,
                cursor: position.encode(),
            });
        }
        return Ok(());
    }
    let event = match &change.event {
        Some(event) => Some(event.clone()),
        None => event_now(store, row.entity_id).await?,
    };
    if let Some(event) = event {
        catch_up(position, scope, &event, out);
    }
    Ok(())
}

/// How long appends are gathered before they go out.
const COALESCE: std::time::Duration = std::time::Duration::from_millis(50);

/// Merges consecutive appends to the same event into one update (the later cursor covers both).
fn coalesce(updates: impl Iterator<Item = Update>) -> Vec<Update> {
    let mut merged: Vec<Update> = Vec::new();
    for update in updates {
        if let Some(last) = merged.last_mut()
            && last.kind == TimelineUpdateKind::Appended
            && update.kind == TimelineUpdateKind::Appended
            && last.event_id == update.event_id
            && let (Some(offset), Some(delta), Some(next_offset), Some(next_delta)) = (
                last.offset,
                last.delta.as_mut(),
                update.offset,
                update.delta.as_ref(),
            )
            && offset + delta.chars().count() as i64 == next_offset
        {
            delta.push_str(next_delta);
            last.cursor = update.cursor;
            continue;
        }
        merged.push(update);
    }
    merged
}

/// The subscription: replay after `position`, then live updates, until the subscriber goes or
/// falls too far behind (then it is told to resume from its last cursor).
pub fn stream(
    store: Store,
    hub: Arc<Hub>,
    mut position: Position,
    scope: Scope,
) -> impl futures::Stream<Item = Result<Update>> + Send {
    async_stream::try_stream! {
        // Subscribe before replaying: whatever happens during the replay is also received live,
        // and the position drops what was already sent.
        let mut live = hub.subscribe(position.session);
        let mut out = Vec::new();
        for row in replay(&store, &position).await? {
            catch_up(&mut position, scope, &row, &mut out);
        }
        for update in out.drain(..) {
            yield update;
        }
        loop {
            let mut received = vec![live.recv().await];
            // An append opens a short window: the deltas that arrive in it go out merged, so a
            // token-rate stream reaches clients as a few larger pieces, in order, none lost.
            if matches!(&received[0], Ok(change) if change.row.kind == "event_appended") {
                let deadline = tokio::time::Instant::now() + COALESCE;
                loop {
                    tokio::select! {
                        next = live.recv() => {
                            let done = next.is_err();
                            received.push(next);
                            if done {
                                break;
                            }
                        }
                        () = tokio::time::sleep_until(deadline) => break,
                    }
                }
            }
            for item in received {
                match item {
                    Ok(change) => apply(&store, &mut position, scope, &change, &mut out).await?,
                    Err(RecvError::Lagged(_)) => {
                        Err(Error::SubscriberTooSlow(format!(
                            "subscriber fell behind; subscribe again with after: \"{}\"",
                            position.encode()
                        )))?;
                    }
                    Err(RecvError::Closed) => return,
                }
            }
            for update in coalesce(out.drain(..)) {
                yield update;
            }
        }
    }
}
