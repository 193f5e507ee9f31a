//! The per-session event order (`session_events`, written by triggers in the writing
//! transaction; see `migrations/0008_session_events.sql`): every change in a session at its
//! position, 1, 2, 3, … without gaps, the same for every reader.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::{Arguments as _, Decode, FromRow, Postgres, Row as _, Type};
use uuid::Uuid;

use super::event_runs::{RUN_COLUMNS, Run, run_holding};
use super::{Key, Store};
use crate::error::Result;
use crate::model::{Status, TimelineEventStatus, TimelineEventType, Transition};

/// The text of an append, and what kind of timeline event it went to.
#[derive(Debug, Clone)]
pub struct AppendedText {
    /// `None` when it cannot be told any more (the event was finished with other content).
    pub text: Option<String>,
    pub event_type: TimelineEventType,
}

/// What a change is about: the `change_kind` type the triggers write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, sqlx::Type)]
#[sqlx(type_name = "change_kind", rename_all = "snake_case")]
pub enum ChangeKind {
    /// A session was created or updated.
    Session,
    /// A session was deleted (hidden from lists).
    SessionDeleted,
    /// A deleted session was restored.
    SessionRestored,
    /// A stage was created or updated.
    Stage,
    /// An agent execution was created or updated.
    Execution,
    /// A timeline event was created.
    EventCreated,
    /// Content was appended to a timeline event.
    EventAppended,
    /// A timeline event finished.
    EventFinished,
    Message,
    LlmInteraction,
    McpInteraction,
    Chat,
    ChatUserMessage,
    /// A notification was written, or a worker reported an outcome (not a claim).
    Notification,
    /// A chat was deleted (hidden from lists).
    ChatDeleted,
    /// A deleted chat was restored.
    ChatRestored,
}

impl ChangeKind {
    /// A timeline event's creation or end (they carry the event as read).
    pub fn is_event_bound(self) -> bool {
        matches!(self, ChangeKind::EventCreated | ChangeKind::EventFinished)
    }

    /// Any change to a timeline event.
    pub fn is_timeline(self) -> bool {
        self.is_event_bound() || self == ChangeKind::EventAppended
    }

    /// A change to the session row itself.
    pub fn is_session(self) -> bool {
        matches!(
            self,
            ChangeKind::Session | ChangeKind::SessionDeleted | ChangeKind::SessionRestored
        )
    }
}

/// One change in a session, at its position.
#[derive(Debug, Clone)]
pub struct SessionEventRow {
    pub session_id: Uuid,
    pub position: i64,
    pub kind: ChangeKind,
    /// The record it is about.
    pub entity_id: Uuid,
    pub stage_id: Option<Uuid>,
    pub execution_id: Option<Uuid>,
    /// For a timeline change: the event's sequence number.
    pub sequence_number: Option<i64>,
    /// For an append: the characters it covers; for a creation, those it was created with.
    pub start_offset: Option<i32>,
    pub end_offset: Option<i32>,
    /// For a session, stage or execution: its status after the change, and before it; for a
    /// timeline event's creation or end: its status then.
    pub status: Option<Status>,
    /// When it was recorded (by the writing transaction, just before its commit).
    pub created_at: DateTime<Utc>,
}

impl SessionEventRow {
    /// The key of the record it is about (the session's, for the session itself).
    pub fn key(&self) -> Key {
        Key::new(self.session_id, self.entity_id)
    }

    /// A row that stands for the session itself as of `position` (a subscription's first
    /// message, a topology snapshot), not a stored change.
    pub fn of_session(session: Uuid, position: i64, at: DateTime<Utc>) -> SessionEventRow {
        SessionEventRow {
            session_id: session,
            position,
            kind: ChangeKind::Session,
            entity_id: session,
            stage_id: None,
            execution_id: None,
            sequence_number: None,
            start_offset: None,
            end_offset: None,
            status: None,
            created_at: at,
        }
    }

    /// A change to the session row that changed its status (or created it), not only its other
    /// columns.
    pub fn changes_session_status(&self) -> bool {
        match self.status {
            Some(Status::Session(Transition { to, from })) => Some(to) != from,
            _ => false,
        }
    }

    /// A timeline event's creation while it streams (its content then is only what it was
    /// created with).
    pub fn creates_streaming_event(&self) -> bool {
        self.kind == ChangeKind::EventCreated
            && self.status == Some(Status::Event(TimelineEventStatus::Streaming))
    }
}

/// The statuses are decoded by the kind of record the change is about: a value that is not one
/// of that record's statuses is a decode error, so nothing downstream parses status text.
impl<'r> FromRow<'r, PgRow> for SessionEventRow {
    fn from_row(row: &'r PgRow) -> sqlx::Result<Self> {
        let kind: ChangeKind = row.try_get("kind")?;
        let status = match kind {
            ChangeKind::Session | ChangeKind::SessionDeleted | ChangeKind::SessionRestored => {
                transition(row)?.map(Status::Session)
            }
            ChangeKind::Stage => transition(row)?.map(Status::Stage),
            ChangeKind::Execution => transition(row)?.map(Status::Execution),
            ChangeKind::Notification => transition(row)?.map(Status::Notification),
            ChangeKind::EventCreated | ChangeKind::EventFinished => row
                .try_get::<Option<TimelineEventStatus>, _>("status")?
                .map(Status::Event),
            ChangeKind::EventAppended
            | ChangeKind::Message
            | ChangeKind::LlmInteraction
            | ChangeKind::McpInteraction
            | ChangeKind::Chat
            | ChangeKind::ChatUserMessage
            | ChangeKind::ChatDeleted
            | ChangeKind::ChatRestored => None,
        };
        Ok(SessionEventRow {
            session_id: row.try_get("session_id")?,
            position: row.try_get("position")?,
            kind,
            entity_id: row.try_get("entity_id")?,
            stage_id: row.try_get("stage_id")?,
            execution_id: row.try_get("execution_id")?,
            sequence_number: row.try_get("sequence_number")?,
            start_offset: row.try_get("start_offset")?,
            end_offset: row.try_get("end_offset")?,
            status,
            created_at: row.try_get("created_at")?,
        })
    }
}

/// A status change in one record's vocabulary.
fn transition<S>(row: &PgRow) -> sqlx::Result<Option<Transition<S>>>
where
    S: for<'r> Decode<'r, Postgres> + Type<Postgres>,
{
    let to: Option<S> = row.try_get("status")?;
    let from: Option<S> = row.try_get("previous_status")?;
    Ok(to.map(|to| Transition { to, from }))
}

/// The longest run a row of `session_events` holds (`migrations/0117`: a group's appends to one
/// session, at most a group's size, as its check says): the row holding a position is at most
/// this far above it. (Since `migrations/0123` a group writes such rows only for a session with
/// many appends in it.)
const LONGEST_RUN: i64 = 1_000;
// A group holds at most `limits::BATCH` appends (`write/append_groups.rs`), so no group writes a
// run the check refuses.
const _: () = assert!(super::write::limits::BATCH as i64 <= LONGEST_RUN);

/// The columns of a row of the log, as both tables that hold it give them (`first_held`: the
/// first position the row holds): a row of `session_events` (`s`)…
const EVENT_ROW: &str = "s.session_id, s.position, \
    s.position - coalesce(cardinality(s.run_events), 1) + 1 AS first_held, s.kind, s.entity_id, \
    s.stage_id, s.execution_id, s.sequence_number, s.start_offset, s.end_offset, s.status, \
    s.previous_status, s.created_at, s.run_events, s.run_stages, s.run_executions, \
    s.run_sequences, s.run_starts, s.run_ends, NULL::uuid[] AS log_events, \
    NULL::integer AS appends, NULL::bytea AS log";

/// … and a run of `session_event_runs` (`r`, `migrations/0123`), which holds only appends: its
/// log, newest first, each entry with its event, which says the stage, execution and sequence.
const RUN_ROW: &str = "r.session_id, r.first_position + r.appends - 1 AS position, \
    r.first_position AS first_held, \
    'event_appended'::change_kind AS kind, NULL::uuid AS entity_id, NULL::uuid AS stage_id, \
    NULL::uuid AS execution_id, NULL::bigint AS sequence_number, NULL::integer AS start_offset, \
    NULL::integer AS end_offset, NULL::text AS status, NULL::text AS previous_status, \
    r.created_at, NULL::uuid[] AS run_events, NULL::uuid[] AS run_stages, \
    NULL::uuid[] AS run_executions, NULL::bigint[] AS run_sequences, NULL::integer[] AS run_starts, \
    NULL::integer[] AS run_ends, r.events AS log_events, r.appends, r.log";

/// Each row `s` of the log (with the columns of [`EVENT_ROW`] and [`RUN_ROW`]) as the changes it
/// records (`e`, with the columns a [`SessionEventRow`] reads): itself, or, for a row holding a
/// run of a group's appends to its session (`migrations/0117`, `0123`), one change per append, at
/// its position.
const EXPANDED: &str = "CROSS JOIN LATERAL ( \
        SELECT s.session_id, s.position, s.kind, s.entity_id, s.stage_id, s.execution_id, \
               s.sequence_number, s.start_offset, s.end_offset, s.status, s.previous_status, \
               s.created_at \
        WHERE s.run_events IS NULL AND s.log IS NULL \
        UNION ALL \
        SELECT s.session_id, s.position - cardinality(s.run_events) + r.i, s.kind, r.event, \
               r.stage_id, r.execution_id, r.sequence_number, r.start_offset, r.end_offset, \
               NULL, NULL, s.created_at \
        FROM unnest(s.run_events, s.run_stages, s.run_executions, s.run_sequences, \
                    s.run_starts, s.run_ends) WITH ORDINALITY \
             AS r (event, stage_id, execution_id, sequence_number, start_offset, end_offset, i) \
        WHERE s.run_events IS NOT NULL \
        UNION ALL \
        SELECT s.session_id, a.position, s.kind, a.event, t.stage_id, t.execution_id, \
               t.sequence_number, a.start_offset, a.end_offset, NULL, NULL, a.created_at \
        FROM run_appends(s.first_held, s.appends, s.created_at, s.log_events, s.log, \
                         s.appends) a \
        LEFT JOIN timeline_events t ON t.id = a.event AND t.session_id = s.session_id \
        WHERE s.log IS NOT NULL) e";

/// The row of `{session}`'s `session_events` that may hold `{position}`, found by one probe of
/// the key: the first row at or above it (a run of appends ends at its row's position), with
/// `at` the position and `k` its index in the row's run (1-based; not above 0 when the row holds
/// a single change).
fn row_holding(session: &str, position: &str) -> String {
    format!(
        "SELECT s.*, {position} AS at, cardinality(s.run_events) - (s.position - {position}) AS k \
         FROM session_events s \
         WHERE s.session_id = {session} AND s.position >= {position} \
         ORDER BY s.position LIMIT 1"
    )
}

/// The change at `{position}` of `{session}`'s `session_events` (`e`, with the columns a
/// [`SessionEventRow`] reads): the row holding it ([`row_holding`]), itself or one append of its
/// run, taken from the run by its index (expanding the run would read all of it for each of its
/// positions). A change that a run of `session_event_runs` holds is not here: see
/// `event_runs`.
pub(super) fn change_at(session: &str, position: &str) -> String {
    let of_run = |plain: &str, run: &str| {
        format!("CASE WHEN s.run_events IS NULL THEN s.{plain} ELSE s.{run}[s.k] END AS {plain}")
    };
    format!(
        "CROSS JOIN LATERAL ( \
             SELECT s.session_id, s.at AS position, s.kind, {entity}, {stage}, {execution}, \
                    {sequence}, {start}, {end}, s.status, s.previous_status, s.created_at \
             FROM ({row}) s \
             WHERE s.position = s.at OR s.k >= 1) e",
        row = row_holding(session, position),
        entity = of_run("entity_id", "run_events"),
        stage = of_run("stage_id", "run_stages"),
        execution = of_run("execution_id", "run_executions"),
        sequence = of_run("sequence_number", "run_sequences"),
        start = of_run("start_offset", "run_starts"),
        end = of_run("end_offset", "run_ends"),
    )
}

/// Which of a session's events a page of its event log reads: those strictly between `after`
/// and `before`, of these kinds, stages and executions (each: any when empty). The executions
/// are a superset of the events whose source they are: an execution's own changes always pass
/// (a dispatch's source is the parent, not the execution the change is about).
#[derive(Debug, Clone, Default)]
pub struct EventRange {
    pub session: Uuid,
    pub after: i64,
    pub before: Option<i64>,
    pub kinds: Vec<ChangeKind>,
    pub stages: Vec<Uuid>,
    pub executions: Vec<Uuid>,
}

impl EventRange {
    /// The parameters of [`range_statement`]: the range, and at most `limit` rows.
    fn arguments(&self, limit: i64) -> Result<PgArguments> {
        let mut arguments = PgArguments::default();
        let bound = (|| {
            arguments.add(self.session)?;
            arguments.add(self.after)?;
            arguments.add(self.before.unwrap_or(i64::MAX))?;
            arguments.add(&self.kinds)?;
            arguments.add(&self.stages)?;
            arguments.add(&self.executions)?;
            arguments.add(limit)?;
            // The rows to read: a run holding positions below `before` may end above it.
            arguments.add(
                self.before
                    .map_or(i64::MAX, |before| before.saturating_add(LONGEST_RUN)),
            )
        })();
        bound.map_err(sqlx::Error::Encode)?;
        Ok(arguments)
    }
}

/// The statement of a page of the event log, read along the primary key from either end.
///
/// A row of the log may hold a run of appends (`migrations/0117`), so the page is read in two
/// steps. First the rows that record at least one of its changes (a run, when one of its appends
/// is in range and passes the filters; `$8` bounds the rows a run below `before` may end at), in
/// key order, at most `limit`: the page's changes are within them. Then the changes of those
/// rows, in order; unfiltered, only of the rows needed to fill the page (the changes each row
/// records in range are known from its bounds), so a page of runs expands about `limit` changes,
/// not `limit` runs.
fn range_statement(prefix: &str, backward: bool) -> String {
    let order = if backward { "DESC" } else { "ASC" };
    // Whether a change (or a plain row) `of` passes the stage and execution filters.
    let passes = |of: &str| {
        format!(
            "(cardinality($5::uuid[]) = 0 OR {of}.stage_id = ANY($5)) \
             AND (cardinality($6::uuid[]) = 0 OR {of}.execution_id = ANY($6) \
                  OR {of}.kind = 'execution')"
        )
    };
    let (row_passes, change_passes) = (passes("s"), passes("e"));
    // Of one table's rows in range (`rows`), those holding one of the page's changes, in the
    // order of the table's key (`key`: a run's first or last position, the same order since a
    // session's rows hold disjoint positions), at most `limit`.
    let holding = |rows: String, key: &str| {
        format!(
            "(SELECT s.* FROM ({rows}) s \
              WHERE (cardinality($4::change_kind[]) = 0 OR s.kind = ANY($4)) \
                AND ((cardinality($5::uuid[]) = 0 AND cardinality($6::uuid[]) = 0) \
                     OR CASE WHEN s.run_events IS NULL AND s.log IS NULL THEN {row_passes} \
                             ELSE EXISTS (SELECT FROM (VALUES (1)) AS one {EXPANDED} \
                                          WHERE e.position > $2 AND e.position < $3 \
                                            AND {change_passes}) END) \
              ORDER BY s.{key} {order} LIMIT $7)"
        )
    };
    let events = holding(
        format!(
            "SELECT {EVENT_ROW} FROM session_events s \
             WHERE s.session_id = $1 AND s.position > $2 AND s.position < $8 \
               AND (s.position < $3 \
                    OR (s.run_events IS NOT NULL \
                        AND s.position - cardinality(s.run_events) + 1 < $3))"
        ),
        "position",
    );
    // The runs from the last starting at or before the first position read (one probe).
    let runs = holding(
        format!(
            "SELECT {RUN_ROW} FROM session_event_runs r \
             WHERE r.session_id = $1 AND r.first_position < $3 \
               AND r.first_position + r.appends - 1 > $2 \
               AND r.first_position >= coalesce( \
                       (SELECT max(q.first_position) FROM session_event_runs q \
                        WHERE q.session_id = $1 AND q.first_position <= $2 + 1), 0)"
        ),
        "first_held",
    );
    format!(
        "{prefix}SELECT e.* FROM ( \
             SELECT s.*, coalesce(sum(least(s.position, $3 - 1) - greatest(s.first_held, $2 + 1) \
                                      + 1) \
                                  OVER (ORDER BY s.position {order} \
                                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) \
                        AS changes_before \
             FROM (SELECT s.* FROM ({events} UNION ALL {runs}) s \
                   ORDER BY s.position {order} LIMIT $7) s) s \
         {EXPANDED} \
         WHERE (s.changes_before < $7 OR cardinality($5::uuid[]) > 0 \
                OR cardinality($6::uuid[]) > 0) \
           AND e.position > $2 AND e.position < $3 AND {change_passes} \
         ORDER BY e.position {order} LIMIT $7"
    )
}

impl Store {
    /// Up to `limit` of the events of `range`, from its start, or from its end (`backward`,
    /// then in descending order).
    pub async fn session_events_in(
        &self,
        range: &EventRange,
        backward: bool,
        limit: i64,
    ) -> Result<Vec<SessionEventRow>> {
        Ok(
            sqlx::query_as_with(&range_statement("", backward), range.arguments(limit)?)
                .fetch_all(self.reader().await?.traced())
                .await?,
        )
    }

    /// How PostgreSQL reads that page (for the test that checks the primary key serves it).
    pub async fn explain_session_events_in(
        &self,
        range: &EventRange,
        backward: bool,
        limit: i64,
    ) -> Result<String> {
        let statement = range_statement("EXPLAIN ", backward);
        let lines: Vec<String> = sqlx::query_scalar_with(&statement, range.arguments(limit)?)
            .fetch_all(self.reader().await?.traced())
            .await?;
        Ok(lines.join("\n"))
    }

    /// Up to `limit` of a session's events after `after`, in order.
    pub async fn session_events_after(
        &self,
        session: Uuid,
        after: i64,
        limit: i64,
    ) -> Result<Vec<SessionEventRow>> {
        let range = EventRange {
            session,
            after,
            ..EventRange::default()
        };
        self.session_events_in(&range, false, limit).await
    }

    /// The position of a session's latest event (0 when it has none).
    pub async fn last_session_event(&self, session: Uuid) -> Result<i64> {
        Ok(sqlx::query_scalar("SELECT session_last_position($1)")
            .bind(session)
            .fetch_one(self.reader().await?.traced())
            .await?)
    }

    /// The text of each append (by session and position), read once: from the log row or run that
    /// records it (`migrations/0119`, `0123`: a grouped append's text is kept there; a run's log
    /// decoded here), else from its chunk (by key: the cost does not grow with the stream), or
    /// from the folded event when the event finished in the meantime.
    pub async fn appended_texts(
        &self,
        appends: &[&SessionEventRow],
    ) -> Result<HashMap<(Uuid, i64), AppendedText>> {
        if appends.is_empty() {
            return Ok(HashMap::new());
        }
        let sessions: Vec<Uuid> = appends.iter().map(|r| r.session_id).collect();
        let positions: Vec<i64> = appends.iter().map(|r| r.position).collect();
        let events: Vec<Uuid> = appends.iter().map(|r| r.entity_id).collect();
        let starts: Vec<i32> = appends
            .iter()
            .map(|r| r.start_offset.unwrap_or(0))
            .collect();
        let ends: Vec<i32> = appends.iter().map(|r| r.end_offset.unwrap_or(0)).collect();
        let statement = format!(
            "SELECT a.session_id, a.position, e.event_type, coalesce(l.delta, c.content, \
                    CASE WHEN e.status <> 'streaming' \
                         THEN substr(e.content, a.start_offset + 1, a.end_offset - a.start_offset) END) \
                    AS text, {RUN_COLUMNS} \
             FROM unnest($1::uuid[], $2::bigint[], $3::uuid[], $4::int[], $5::int[]) \
                  AS a(session_id, position, event_id, start_offset, end_offset) \
             JOIN timeline_events e ON e.id = a.event_id AND e.session_id = a.session_id \
             LEFT JOIN LATERAL ( \
                 SELECT CASE WHEN s.run_events IS NULL THEN s.delta ELSE s.run_deltas[s.k] END \
                        AS delta \
                 FROM ({row}) s WHERE s.position = s.at OR s.k >= 1) l ON true \
             LEFT JOIN LATERAL ({run}) r ON true \
             LEFT JOIN timeline_event_chunks c ON l.delta IS NULL AND r.log IS NULL \
                    AND c.event_id = a.event_id AND c.start_offset = a.start_offset \
                    AND c.session_id = a.session_id",
            row = row_holding("a.session_id", "a.position"),
            run = run_holding("a.session_id", "a.position"),
        );
        let found: Vec<PgRow> = sqlx::query(&statement)
            .bind(&sessions)
            .bind(&positions)
            .bind(&events)
            .bind(&starts)
            .bind(&ends)
            .fetch_all(self.reader().await?.traced())
            .await?;
        let mut texts = HashMap::with_capacity(found.len());
        for row in &found {
            let key = (row.try_get("session_id")?, row.try_get("position")?);
            // A run's text, decoded here; else the row's, the chunk's or the finished event's.
            let text = match Run::from_row(row)? {
                Some(run) => Some(run.append_at(key.1)?.delta),
                None => row.try_get("text")?,
            };
            let event_type = row.try_get("event_type")?;
            texts.insert(key, AppendedText { text, event_type });
        }
        Ok(texts)
    }
}
