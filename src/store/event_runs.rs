//! The runs of a session's appends that `session_event_runs` holds (`migrations/0123`), as the
//! readers of single changes read them: the run holding a position found by one probe of its
//! key, and its log decoded here. Walking a log in SQL (a recursive query) costs microseconds an
//! entry and a setup per run; the change log's follower reads one to three new appends of each of
//! hundreds of runs at a time, so it took half its statement's time (`docs/append-journal.md`).

use chrono::{DateTime, Duration, Utc};
use sqlx::Row as _;
use sqlx::postgres::PgRow;
use uuid::Uuid;

use super::session_events::{ChangeKind, SessionEventRow};

/// The run of `{session}`'s `session_event_runs` holding `{position}`, if one does (`r`): the last
/// starting at or before it (one probe of the key, the limit keeping it one whatever the plan),
/// when it reaches that far.
pub(super) fn run_holding(session: &str, position: &str) -> String {
    format!(
        "SELECT r.* FROM (SELECT r.* FROM session_event_runs r \
                          WHERE r.session_id = {session} AND r.first_position <= {position} \
                          ORDER BY r.first_position DESC LIMIT 1) r \
         WHERE r.first_position + r.appends > {position}"
    )
}

/// The columns a statement gives for the run `r` holding its change ([`run_holding`]; all null
/// when none does), which [`Run::from_row`] reads.
pub(super) const RUN_COLUMNS: &str = "r.first_position AS run_first_position, \
    r.appends AS run_appends, r.created_at AS run_created_at, r.events AS run_held_events, \
    r.log AS run_log";

/// [`RUN_COLUMNS`] when no run holds the change.
pub(super) const NO_RUN_COLUMNS: &str = "NULL::bigint AS run_first_position, \
    NULL::integer AS run_appends, NULL::timestamptz AS run_created_at, \
    NULL::uuid[] AS run_held_events, NULL::bytea AS run_log";

/// Where each of run `r`'s events is (`ev`: its stage, execution and sequence number, in the
/// order of `r.events`), each looked up by its key: what a change read from the run says.
pub(super) const RUN_EVENT_PLACES: &str = "CROSS JOIN LATERAL ( \
        SELECT array_agg(t.stage_id ORDER BY u.i) AS stages, \
               array_agg(t.execution_id ORDER BY u.i) AS executions, \
               array_agg(t.sequence_number ORDER BY u.i) AS sequences \
        FROM unnest(r.events) WITH ORDINALITY AS u (id, i) \
        LEFT JOIN LATERAL (SELECT t.stage_id, t.execution_id, t.sequence_number \
                           FROM timeline_events t \
                           WHERE t.id = u.id AND t.session_id = r.session_id LIMIT 1) t \
          ON true) ev";

/// The columns of [`RUN_EVENT_PLACES`] a statement gives, and those when no run holds the change.
pub(super) const RUN_PLACE_COLUMNS: &str = "ev.stages AS run_stages_held, \
    ev.executions AS run_executions_held, ev.sequences AS run_sequences_held";
pub(super) const NO_RUN_PLACE_COLUMNS: &str = "NULL::uuid[] AS run_stages_held, \
    NULL::uuid[] AS run_executions_held, NULL::bigint[] AS run_sequences_held";

/// One append as its run records it.
#[derive(Debug)]
pub(super) struct RunAppend {
    pub event: Uuid,
    /// Its event's index in the run's `events`.
    pub event_index: usize,
    pub start_offset: i32,
    pub end_offset: i32,
    pub delta: String,
    pub created_at: DateTime<Utc>,
}

/// A run of a session's appends: positions `first_position` to `first_position + appends - 1`,
/// its log newest first (each entry: the length of its text in bytes and the index of its
/// event in `events`, each one byte below 128 or four with the top bit set, big-endian; where
/// its text starts, in characters, and microseconds since `created_at`, each an int4; its text).
#[derive(Debug, Clone)]
pub(super) struct Run {
    pub first_position: i64,
    pub appends: i32,
    pub created_at: DateTime<Utc>,
    pub events: Vec<Uuid>,
    pub log: Vec<u8>,
}

impl Run {
    /// The run a row gives in [`RUN_COLUMNS`]; `None` when no run holds its change.
    pub fn from_row(row: &PgRow) -> sqlx::Result<Option<Run>> {
        let Some(log) = row.try_get::<Option<Vec<u8>>, _>("run_log")? else {
            return Ok(None);
        };
        Ok(Some(Run {
            first_position: row.try_get("run_first_position")?,
            appends: row.try_get("run_appends")?,
            created_at: row.try_get("run_created_at")?,
            events: row.try_get("run_held_events")?,
            log,
        }))
    }

    /// The append at `position`, the log walked from its newest entry (a run's log is under a
    /// kilobyte, `run_extension_limit()`, so this is at most a few dozen entries).
    pub fn append_at(&self, position: i64) -> sqlx::Result<RunAppend> {
        let last = self.first_position + i64::from(self.appends) - 1;
        if position < self.first_position || position > last {
            return Err(malformed(format!(
                "position {position} is not in the run of positions {}..={last}",
                self.first_position
            )));
        }
        let mut at = 0;
        for _ in position..last {
            let entry = self.entry(at)?;
            at = entry.next;
        }
        let entry = self.entry(at)?;
        let delta = std::str::from_utf8(&self.log[entry.text.clone()])
            .map_err(|e| malformed(format!("an append's text is not UTF-8: {e}")))?
            .to_owned();
        let event = *self
            .events
            .get(entry.event)
            .ok_or_else(|| malformed(format!("no event {} in the run", entry.event)))?;
        let characters = i32::try_from(delta.chars().count())
            .map_err(|_| malformed("an append's text is too long".to_owned()))?;
        Ok(RunAppend {
            event,
            event_index: entry.event,
            start_offset: entry.start_offset,
            end_offset: entry.start_offset + characters,
            delta,
            created_at: self.created_at + Duration::microseconds(i64::from(entry.since_us)),
        })
    }

    /// The entry starting at byte `at` of the log.
    fn entry(&self, at: usize) -> sqlx::Result<Entry> {
        let (length, length_width) = self.varint(at)?;
        let (event, event_width) = self.varint(at + length_width)?;
        let fixed = at + length_width + event_width;
        let text = fixed + 8..fixed + 8 + length;
        if text.end > self.log.len() {
            return Err(malformed(format!(
                "an entry at byte {at} runs past the log"
            )));
        }
        Ok(Entry {
            event,
            start_offset: self.int4(fixed),
            since_us: self.int4(fixed + 4),
            next: text.end,
            text,
        })
    }

    /// A length or an index: one byte below 128, else four (big-endian, the top bit set).
    fn varint(&self, at: usize) -> sqlx::Result<(usize, usize)> {
        let first = *self
            .log
            .get(at)
            .ok_or_else(|| malformed(format!("the log ends at byte {at}, inside an entry")))?;
        if first < 128 {
            return Ok((usize::from(first), 1));
        }
        let bytes = self
            .log
            .get(at..at + 4)
            .ok_or_else(|| malformed(format!("the log ends at byte {at}, inside an entry")))?;
        let value = u32::from_be_bytes([bytes[0] & 127, bytes[1], bytes[2], bytes[3]]);
        Ok((value as usize, 4))
    }

    /// An int4 the entry's checked length covers.
    fn int4(&self, at: usize) -> i32 {
        i32::from_be_bytes([
            self.log[at],
            self.log[at + 1],
            self.log[at + 2],
            self.log[at + 3],
        ])
    }
}

/// An entry of a run's log: its event's index, its fields, where its text is and where the next
/// entry starts.
struct Entry {
    event: usize,
    start_offset: i32,
    since_us: i32,
    text: std::ops::Range<usize>,
    next: usize,
}

fn malformed(message: String) -> sqlx::Error {
    sqlx::Error::Decode(format!("a run of session_event_runs: {message}").into())
}

/// The change a row of the follower's read gives when a run holds it ([`RUN_COLUMNS`] and
/// [`RUN_PLACE_COLUMNS`], with `session_id` and `position`); `None` when none does.
pub(super) fn change_in_run(row: &PgRow) -> sqlx::Result<Option<SessionEventRow>> {
    let Some(run) = Run::from_row(row)? else {
        return Ok(None);
    };
    let position: i64 = row.try_get("position")?;
    let append = run.append_at(position)?;
    let index = append.event_index;
    let place = |column: &str| -> sqlx::Result<Option<Vec<Option<Uuid>>>> { row.try_get(column) };
    let stages = place("run_stages_held")?.unwrap_or_default();
    let executions = place("run_executions_held")?.unwrap_or_default();
    let sequences: Vec<Option<i64>> = row
        .try_get::<Option<Vec<Option<i64>>>, _>("run_sequences_held")?
        .unwrap_or_default();
    Ok(Some(SessionEventRow {
        session_id: row.try_get("session_id")?,
        position,
        kind: ChangeKind::EventAppended,
        entity_id: append.event,
        stage_id: stages.get(index).copied().flatten(),
        execution_id: executions.get(index).copied().flatten(),
        sequence_number: sequences.get(index).copied().flatten(),
        start_offset: Some(append.start_offset),
        end_offset: Some(append.end_offset),
        status: None,
        created_at: append.created_at,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry as `run_entry` (`migrations/0123`) writes it.
    fn entry(event: u8, start: i32, since_us: i32, text: &str) -> Vec<u8> {
        let mut bytes = Vec::new();
        let length = text.len();
        if length < 128 {
            bytes.push(length as u8);
        } else {
            bytes.extend_from_slice(&((length as u32) | (1 << 31)).to_be_bytes());
        }
        bytes.push(event);
        bytes.extend_from_slice(&start.to_be_bytes());
        bytes.extend_from_slice(&since_us.to_be_bytes());
        bytes.extend_from_slice(text.as_bytes());
        bytes
    }

    fn run() -> Run {
        let long = "é".repeat(100);
        let log = [
            entry(1, 3, 900, "ü!"),
            entry(0, 1, 500, &long),
            entry(0, 0, 0, "a"),
        ]
        .concat();
        Run {
            first_position: 10,
            appends: 3,
            created_at: DateTime::from_timestamp(1_000, 0).unwrap(),
            events: vec![Uuid::from_u128(1), Uuid::from_u128(2)],
            log,
        }
    }

    #[test]
    fn each_position_reads_its_entry_newest_first() {
        let run = run();
        let newest = run.append_at(12).unwrap();
        assert_eq!(
            (newest.event, newest.start_offset, newest.end_offset),
            (Uuid::from_u128(2), 3, 5)
        );
        assert_eq!(newest.delta, "ü!");
        assert_eq!(
            newest.created_at,
            DateTime::from_timestamp(1_000, 900_000).unwrap()
        );
        // 200 bytes of text: a four-byte length.
        let long = run.append_at(11).unwrap();
        assert_eq!((long.start_offset, long.end_offset), (1, 101));
        assert_eq!(long.delta.len(), 200);
        let oldest = run.append_at(10).unwrap();
        assert_eq!(
            (oldest.event, oldest.delta.as_str()),
            (Uuid::from_u128(1), "a")
        );
    }

    #[test]
    fn positions_outside_the_run_and_broken_logs_are_errors() {
        let run = run();
        assert!(run.append_at(9).is_err());
        assert!(run.append_at(13).is_err());
        let mut cut = run.clone();
        cut.log.truncate(cut.log.len() - 1);
        assert!(cut.append_at(10).is_err());
        let mut unknown_event = run.clone();
        unknown_event.log[1] = 7;
        assert!(unknown_event.append_at(12).is_err());
    }
}
