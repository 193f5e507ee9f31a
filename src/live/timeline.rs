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

use std::collections::{BTreeMap, HashMap};
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
use crate::observe::metrics::LIVE_COALESCED_DELTAS;
use crate::store::{Store, TimelineEventRow};

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

/// Which events a subscription follows: a stage's, an execution's (of that stage), or all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Scope {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<Uuid>,
}

impl Scope {
    fn covers(&self, stage: Option<Uuid>, execution: Option<Uuid>) -> bool {
        self.stage.is_none_or(|s| Some(s) == stage)
            && self.execution.is_none_or(|e| Some(e) == execution)
    }

    /// Whether this view includes every event of `narrower`.
    fn includes(&self, narrower: &Scope) -> bool {
        self.stage.is_none_or(|s| narrower.stage == Some(s))
            && self.execution.is_none_or(|e| narrower.execution == Some(e))
    }
}

/// The most events a cursor may list as still streaming.
const MAX_STREAMING: usize = 10_000;

/// What has been sent.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Position {
    session: Uuid,
    /// The view it was sent for: it resumes only views it includes.
    #[serde(default)]
    view: Scope,
    /// Every event up to this sequence number was announced (or is outside the view).
    seen: i64,
    /// Announced events whose end was not sent yet: sequence number → characters sent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    streaming: BTreeMap<i64, i64>,
}

/// How far an event has been sent.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Sent {
    NotAnnounced,
    Streaming(i64),
    Done,
}

impl Position {
    pub fn new(session: Uuid, view: Scope) -> Self {
        Self {
            session,
            view,
            seen: 0,
            streaming: BTreeMap::new(),
        }
    }

    /// Starts after an event of a timeline connection page: everything up to it was read, the
    /// still-streaming events of the page as far as `streaming` says (sequence → characters).
    /// Like a decoded cursor, it is checked when resumed for a view ([`Position::resumed_for`]).
    pub fn after_page(session: Uuid, view: Scope, seq: i64, streaming: BTreeMap<i64, i64>) -> Self {
        Self {
            session,
            view,
            seen: seq,
            streaming,
        }
    }

    /// Resumes a subscription cursor for `view`; `None` when `cursor` is not one (it may be a
    /// connection cursor).
    pub fn decode(cursor: &str, session: Uuid, view: Scope) -> Option<Result<Self>> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
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
        Some(live.resumed_for(view))
    }

    pub fn encode(&self) -> String {
        let json =
            serde_json::to_vec(&serde_json::json!({ "live": self })).expect("position serializes");
        URL_SAFE_NO_PAD.encode(json)
    }

    /// The same position for a view it includes (a narrower cursor would skip events).
    pub fn resumed_for(mut self, view: Scope) -> Result<Self> {
        if !self.view.includes(&view) {
            return Err(Error::bad_input(
                "cursor was issued for a narrower view of the timeline; resume with the same \
                 stageId and executionId",
            ));
        }
        self.view = view;
        self.validated()
    }

    fn validated(self) -> Result<Self> {
        let valid = self.seen >= 0
            && self.streaming.len() <= MAX_STREAMING
            && self
                .streaming
                .iter()
                .all(|(&seq, &sent)| seq > 0 && seq <= self.seen && sent >= 0);
        if valid {
            Ok(self)
        } else {
            Err(Error::bad_input("not a valid timeline cursor"))
        }
    }

    fn sent(&self, seq: i64) -> Sent {
        if seq > self.seen {
            Sent::NotAnnounced
        } else {
            self.streaming
                .get(&seq)
                .map_or(Sent::Done, |&n| Sent::Streaming(n))
        }
    }

    /// Whether events between the watermark and `seq` were never announced. Saturating: a
    /// forged cursor may put the watermark at the largest sequence number there is.
    fn missed_before(&self, seq: i64) -> bool {
        self.seen.saturating_add(1) < seq
    }

    /// Passes over an event outside the view.
    fn pass(&mut self, seq: i64) {
        self.seen = self.seen.max(seq);
    }

    /// What an update, once sent, changes.
    fn record(&mut self, update: &Update) {
        let seq = update.sequence_number;
        match update.kind {
            TimelineUpdateKind::Created => {
                self.seen = self.seen.max(seq);
                self.streaming.insert(seq, 0);
            }
            TimelineUpdateKind::Appended => {
                self.streaming.insert(seq, update.end);
            }
            TimelineUpdateKind::Finished => {
                self.streaming.remove(&seq);
            }
        }
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
        .view
        .covers(Some(row.stage_id), Some(row.execution_id))
    {
        position.pass(seq);
        return;
    }
    let sent = match position.sent(seq) {
        Sent::Done => return,
        Sent::Streaming(sent) => sent,
        Sent::NotAnnounced => {
            let created = step(TimelineUpdateKind::Created, row, None, None, 0);
            position.record(&created);
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
        position.record(&appended);
        out.push(appended);
    }
    if row.status != TimelineEventStatus::Streaming {
        let finished = step(TimelineUpdateKind::Finished, row, None, None, 0);
        position.record(&finished);
        out.push(finished);
    }
}

/// Events read per replay query.
const REPLAY_PAGE: i64 = 200;

/// Columns of `timeline_events_live`, with content and metadata left out (not even computed)
/// for events outside the view.
const REPLAY_COLUMNS: &str = "id, session_id, stage_id, execution_id, sequence_number, \
    event_type, status, \
    CASE WHEN ($2::uuid IS NULL OR stage_id = $2) AND ($3::uuid IS NULL OR execution_id = $3) \
         THEN content ELSE '' END AS content, \
    CASE WHEN ($2::uuid IS NULL OR stage_id = $2) AND ($3::uuid IS NULL OR execution_id = $3) \
         THEN metadata ELSE '{}'::jsonb END AS metadata, \
    llm_interaction_id, mcp_interaction_id, created_at, updated_at";

/// Events `after < sequence number < before` of the position's session (one page).
async fn events_between(
    store: &Store,
    position: &Position,
    after: i64,
    before: i64,
) -> Result<Vec<Arc<TimelineEventRow>>> {
    let sql = format!(
        "SELECT {REPLAY_COLUMNS} FROM timeline_events_live \
         WHERE session_id = $1 AND sequence_number > $4 AND sequence_number < $5 \
         ORDER BY sequence_number LIMIT $6"
    );
    let rows: Vec<TimelineEventRow> = sqlx::query_as(&sql)
        .bind(position.session)
        .bind(position.view.stage)
        .bind(position.view.execution)
        .bind(after)
        .bind(before)
        .bind(REPLAY_PAGE)
        .fetch_all(store.pool())
        .await?;
    Ok(rows.into_iter().map(Arc::new).collect())
}

/// The still-streaming events of a resumed position, as stored now.
async fn streaming_events(
    store: &Store,
    position: &Position,
) -> Result<Vec<Arc<TimelineEventRow>>> {
    if position.streaming.is_empty() {
        return Ok(Vec::new());
    }
    let seqs: Vec<i64> = position.streaming.keys().copied().collect();
    let sql = format!(
        "SELECT {REPLAY_COLUMNS} FROM timeline_events_live \
         WHERE session_id = $1 AND sequence_number = ANY($4) ORDER BY sequence_number"
    );
    let rows: Vec<TimelineEventRow> = sqlx::query_as(&sql)
        .bind(position.session)
        .bind(position.view.stage)
        .bind(position.view.execution)
        .bind(&seqs)
        .fetch_all(store.pool())
        .await?;
    Ok(rows.into_iter().map(Arc::new).collect())
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
    if !row.kind.starts_with("event_") {
        return Ok(());
    }
    if position.missed_before(seq) {
        fill_before(store, position, seq, out).await?;
    }
    if !position.view.covers(row.stage_id, row.execution_id) {
        position.pass(seq);
        return Ok(());
    }
    let sent = position.sent(seq);
    if sent == Sent::Done {
        // Already sent whole (by the replay, or from a later read of the event).
        return Ok(());
    }
    if row.kind == "event_appended"
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
            position.record(&appended);
            out.push(appended);
            return Ok(());
        }
    }
    let event = match (&change.event, row.kind.as_str()) {
        (Some(event), "event_created" | "event_finished") => Some(event.clone()),
        _ => event_now(store, row.entity_id).await?,
    };
    if let Some(event) = event {
        catch_up(position, &event, out);
    }
    Ok(())
}

/// The shortest time between two deliveries of appends to one subscriber.
const COALESCE: std::time::Duration = std::time::Duration::from_millis(50);

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
        sent.record(update);
        update.cursor = sent.encode();
    }
    merged
}

/// The subscription: replay after `position`, then live updates, until the subscriber goes or
/// falls too far behind (then it is told to resume from its last cursor).
pub fn stream(
    store: Store,
    hub: Arc<Hub>,
    mut position: Position,
) -> impl futures::Stream<Item = Result<Update>> + Send {
    async_stream::try_stream! {
        // Subscribe before replaying: whatever happens during the replay is also received live,
        // and the position drops what was already sent.
        let mut live = hub.subscribe(position.session);
        let mut sent = position.clone();
        let mut out = Vec::new();
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
        loop {
            let mut received = vec![live.recv().await];
            // Appends go out at most once per window: the first at once, those that follow
            // it within the window merged at its end, so a token-rate stream reaches clients as
            // a few larger pieces, in order, none lost, and a slow one without delay.
            if matches!(&received[0], Ok(change) if change.row.kind == "event_appended") {
                let deadline = last_sent + COALESCE;
                loop {
                    tokio::select! {
                        // What is already queued is taken even when the window has passed.
                        biased;
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
            let mut ended = None;
            let mut applied = Vec::with_capacity(received.len());
            for item in received {
                match item {
                    Ok(change) => {
                        apply(&store, &mut position, &change, &mut out).await?;
                        applied.push(change);
                    }
                    Err(error) => {
                        ended = Some(error);
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
            match ended {
                None => {}
                Some(RecvError::Lagged(_)) => {
                    Err(Error::SubscriberTooSlow(format!(
                        "subscriber fell behind; subscribe again with after: \"{}\"",
                        sent.encode()
                    )))?;
                }
                Some(RecvError::Closed) => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut sent = Position::new(session, Scope::default());
        sent.seen = 2;
        sent.streaming.insert(1, 0);
        sent.streaming.insert(2, 0);
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
        let first = Position::decode(&out[0].cursor, session, Scope::default())
            .unwrap()
            .unwrap();
        assert_eq!(first.sent(1), Sent::Streaming(7));
        assert_eq!(first.sent(2), Sent::Streaming(0), "b not sent yet");
        assert_eq!(sent.sent(2), Sent::Streaming(2));
    }

    #[test]
    fn cursors_are_checked() {
        let session = Uuid::now_v7();
        let stage = Scope {
            stage: Some(Uuid::now_v7()),
            execution: None,
        };
        let narrow = Position::new(session, stage).encode();
        let err = Position::decode(&narrow, session, Scope::default())
            .unwrap()
            .unwrap_err();
        assert!(err.to_string().contains("narrower"), "{err}");
        assert!(Position::decode(&narrow, session, stage).unwrap().is_ok());
        let wide = Position::new(session, Scope::default()).encode();
        assert!(Position::decode(&wide, session, stage).unwrap().is_ok());
        assert!(
            Position::decode(&wide, Uuid::now_v7(), stage)
                .unwrap()
                .is_err()
        );

        let mut bad = Position::new(session, Scope::default());
        bad.streaming.insert(5, 3);
        assert!(
            Position::decode(&bad.encode(), session, Scope::default())
                .unwrap()
                .is_err(),
            "a streaming event past the watermark"
        );
        assert!(Position::decode("bm90IGpzb24", session, Scope::default()).is_none());
    }
}
