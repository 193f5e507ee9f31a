//! A place in a session's timeline: what a reader has been given of it. Both a timeline page's
//! edges and a timeline subscription's updates hand it out, so either resumes the other.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::model::TimelineEventType;

/// Which events a timeline view shows: a stage's, an execution's (of that stage), or all of the
/// session's; of those, only some types when `types` says so.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct View {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub types: Option<EventTypes>,
}

impl View {
    /// Whether an event of this stage, execution and type is in the view.
    pub fn covers(
        &self,
        stage: Option<Uuid>,
        execution: Option<Uuid>,
        event_type: TimelineEventType,
    ) -> bool {
        self.stage.is_none_or(|s| Some(s) == stage)
            && self.execution.is_none_or(|e| Some(e) == execution)
            && self.types.is_none_or(|t| t.contains(event_type))
    }

    /// Whether this view includes every event of `narrower`.
    pub fn includes(&self, narrower: &View) -> bool {
        self.stage.is_none_or(|s| narrower.stage == Some(s))
            && self.execution.is_none_or(|e| narrower.execution == Some(e))
            && self
                .types
                .is_none_or(|t| narrower.types.is_some_and(|n| t.includes(n)))
    }
}

/// A set of event types, as bits in the order `TimelineEventType` declares them (so new types
/// go at its end).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EventTypes(u16);

impl EventTypes {
    pub fn of(types: &[TimelineEventType]) -> Self {
        EventTypes(types.iter().fold(0u16, |bits, &t| bits | 1 << t as u16))
    }

    pub fn contains(self, event_type: TimelineEventType) -> bool {
        self.0 & (1 << event_type as u16) != 0
    }

    fn includes(self, other: EventTypes) -> bool {
        other.0 & !self.0 == 0
    }

    pub fn to_vec(self) -> Vec<TimelineEventType> {
        TimelineEventType::ALL
            .into_iter()
            .filter(|&t| self.contains(t))
            .collect()
    }
}

/// The most events a position may list as still streaming.
const MAX_STREAMING: usize = 10_000;

/// What a reader has been given of a session's timeline: every event up to sequence number
/// `seen` (or outside its view), and of those still streaming, how many characters. Timelines of
/// a session, its stages and executions share the session's sequence numbers, so a position in
/// any of them pages on, or resumes a subscription, from `seen`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimelinePosition {
    pub session: Uuid,
    #[serde(rename = "seq")]
    pub seen: i64,
    /// Events up to `seen` whose end was not given yet: sequence number → characters given.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub streaming: BTreeMap<i64, i64>,
    /// The view it was given for: it resumes only views it includes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stage: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    execution: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    types: Option<EventTypes>,
    /// Given by a page filtered by status: events of other statuses were passed over, and may
    /// still stream, so it pages on but resumes no subscription.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    by_status: bool,
}

/// How far an event has been given.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sent {
    NotAnnounced,
    Streaming(i64),
    Done,
}

impl TimelinePosition {
    /// The start of a view's timeline.
    pub fn new(session: Uuid, view: View) -> Self {
        Self {
            session,
            seen: 0,
            streaming: BTreeMap::new(),
            stage: view.stage,
            execution: view.execution,
            types: view.types,
            by_status: false,
        }
    }

    /// The start of a page filtered by status (see `by_status`).
    pub fn filtered_by_status(mut self) -> Self {
        self.by_status = true;
        self
    }

    pub fn view(&self) -> View {
        View {
            stage: self.stage,
            execution: self.execution,
            types: self.types,
        }
    }

    /// The same position for a view it includes (a narrower position would skip events).
    pub fn resumed_for(mut self, view: View) -> Result<Self> {
        if self.by_status {
            return Err(Error::bad_input(
                "cursor was issued by a timeline page filtered by status, which passed over \
                 events of other statuses; resume from a cursor of an unfiltered page",
            ));
        }
        if !self.view().includes(&view) {
            return Err(Error::bad_input(
                "cursor was issued for a narrower view of the timeline; resume with the same \
                 stageId, executionId and eventTypes (or fewer types)",
            ));
        }
        self.stage = view.stage;
        self.execution = view.execution;
        self.types = view.types;
        Ok(self)
    }

    /// Itself when consistent (`cursor` is what it was decoded from, for the error).
    pub(super) fn validated(self, cursor: &str) -> Result<Self> {
        let valid = self.seen >= 0
            && self.streaming.len() <= MAX_STREAMING
            && self
                .streaming
                .iter()
                .all(|(&seq, &sent)| seq > 0 && seq <= self.seen && sent >= 0);
        if valid {
            Ok(self)
        } else {
            Err(Error::bad_input(format!(
                "\"{cursor}\" is not a valid cursor"
            )))
        }
    }

    pub fn sent(&self, seq: i64) -> Sent {
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
    pub fn missed_before(&self, seq: i64) -> bool {
        self.seen.saturating_add(1) < seq
    }

    /// Passes over an event (outside the view, or given whole).
    pub fn pass(&mut self, seq: i64) {
        self.seen = self.seen.max(seq);
    }

    /// An event was announced.
    pub fn announced(&mut self, seq: i64) {
        self.seen = self.seen.max(seq);
        self.streaming.insert(seq, 0);
    }

    /// An announced event's content was given up to `end` characters.
    pub fn given_up_to(&mut self, seq: i64, end: i64) {
        self.streaming.insert(seq, end);
    }

    /// An announced event's end was given.
    pub fn ended(&mut self, seq: i64) {
        self.streaming.remove(&seq);
    }
}

/// The format of timeline subscription cursors before they shared [`TimelinePosition`]'s.
#[derive(Debug, Deserialize)]
pub struct LegacyLivePosition {
    session: Uuid,
    #[serde(default)]
    view: View,
    seen: i64,
    #[serde(default)]
    streaming: BTreeMap<i64, i64>,
}

impl From<LegacyLivePosition> for TimelinePosition {
    fn from(legacy: LegacyLivePosition) -> Self {
        TimelinePosition {
            session: legacy.session,
            seen: legacy.seen,
            streaming: legacy.streaming,
            stage: legacy.view.stage,
            execution: legacy.view.execution,
            types: None,
            by_status: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_checked() {
        let session = Uuid::now_v7();
        let stage = View {
            stage: Some(Uuid::now_v7()),
            ..View::default()
        };
        let narrow = TimelinePosition::new(session, stage);
        let err = narrow.clone().resumed_for(View::default()).unwrap_err();
        assert!(err.to_string().contains("narrower"), "{err}");
        assert!(narrow.resumed_for(stage).is_ok());
        let wide = TimelinePosition::new(session, View::default());
        assert!(wide.resumed_for(stage).is_ok());

        let mut bad = TimelinePosition::new(session, View::default());
        bad.streaming.insert(5, 3);
        let err = TimelinePosition::decode(&bad.encode(), session).unwrap_err();
        assert!(err.to_string().contains("not a valid cursor"), "{err}");
        let mut negative = TimelinePosition::new(session, View::default());
        negative.seen = -1;
        assert!(TimelinePosition::decode(&negative.encode(), session).is_err());
    }
}
