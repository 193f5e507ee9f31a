//! Timeline events: created when streaming starts, appended to while they stream, finished once.
//!
//! Streaming content is stored without write amplification: each append inserts immutable rows
//! instead of rewriting the event row, whose growing text PostgreSQL would copy whole on every
//! UPDATE (quadratic I/O over a long stream). An append decided here inserts a chunk row
//! `(event_id, start_offset, content)`; a grouped one (`append_groups.rs`) keeps its text in the
//! session event log row that records it (migration 0119). Readers see the event through the
//! live timeline (`store::live_timeline`), which concatenates the pieces so far. Finishing folds
//! them into the event row once and deletes the chunks, so the write cost of an event stays
//! linear in its length.
//!
//! Appends carry their offset (in characters) and are exactly-once: a chunk already applied
//! (a retry) is acknowledged without writing, an overlapping one applies only its new part
//! after checking the overlap matches, and a gap is refused.
//!
//! Creating and finishing an event are one statement each in the common case (a running
//! execution, a streaming event), which a mutation sends alone: it commits at once, holding its
//! session's lock only while it runs, where a transaction of several statements held it across
//! round trips while the session's other agents queued. The statement declines anything else,
//! which is then decided step by step in a transaction that writes through the same statement.

use serde::Serialize;
use serde_json::Value as Json;
use sqlx::PgConnection;
use uuid::Uuid;

use super::locks::{Owners, Target, lock_stream, lock_streams_of};
use super::receipts::request_hash;
use super::{
    check_json, check_text, fetch, id_taken, is_retry, limits, lock_running_execution,
    lock_session, snake,
};
use crate::error::{Error, Result};
use crate::model::{ExecutionStatus, TimelineEventStatus, TimelineEventType};
use crate::store::records::timeline_event_columns;
use crate::store::traced::traced;
use crate::store::{Record as _, TimelineEventRow};

#[derive(Debug, Clone, Serialize)]
pub struct NewEvent {
    pub id: Option<Uuid>,
    pub execution_id: Uuid,
    pub event_type: TimelineEventType,
    /// `Streaming`, or `Completed` for an instant event.
    pub status: TimelineEventStatus,
    pub content: String,
    pub metadata: Json,
}

impl NewEvent {
    /// Checks its content and metadata (whatever its status).
    pub(crate) fn check(&self) -> Result<()> {
        check_text("content", &self.content, limits::TEXT)?;
        check_json("metadata", &self.metadata, limits::SMALL_JSON)
    }
}

/// The operation a client-chosen event id is claimed for (`recordSystemNotice` creates events
/// the same way).
const CREATE: &str = "createTimelineEvent";

/// Creates an event (in a batch, whose locks are taken): in one statement when it can, else
/// step by step ([`create_decided`]).
pub async fn create(
    conn: &mut PgConnection,
    owners: &mut Owners,
    new: &NewEvent,
) -> Result<TimelineEventRow> {
    check_new(new)?;
    let session_id = owners
        .session_of(conn, Target::Execution(new.execution_id))
        .await?;
    let id = new.id.unwrap_or_else(Uuid::now_v7);
    match insert_if_running(conn, Some(session_id), id, new, receipt(new)?).await? {
        Some(event) => Ok(event),
        None => create_decided(conn, owners, new).await,
    }
}

/// Refuses an event no execution could take.
fn check_new(new: &NewEvent) -> Result<()> {
    if !matches!(
        new.status,
        TimelineEventStatus::Streaming | TimelineEventStatus::Completed
    ) {
        return Err(Error::bad_input(
            "a timeline event is created `STREAMING`, or `COMPLETED` when it is instant",
        ));
    }
    new.check()
}

/// What a create claims a client-chosen id with: the operation and the request's hash.
fn receipt(new: &NewEvent) -> Result<Option<(&'static str, Vec<u8>)>> {
    new.id
        .map(|_| request_hash(new).map(|hash| (CREATE, hash)))
        .transpose()
}

/// Creates the event in one statement, sent alone so it commits at once: when its execution
/// is running and the id, if the client chose it, is new. `None`, having written nothing, for
/// anything else.
pub async fn create_at_once(
    conn: &mut PgConnection,
    new: &NewEvent,
) -> Result<Option<TimelineEventRow>> {
    check_new(new)?;
    let id = new.id.unwrap_or_else(Uuid::now_v7);
    insert_if_running(conn, None, id, new, receipt(new)?).await
}

/// Creates the event step by step, in the transaction `conn` holds: a retry answered with the
/// event it made, a pending execution started, a finished one or a reused id refused.
pub async fn create_decided(
    conn: &mut PgConnection,
    owners: &mut Owners,
    new: &NewEvent,
) -> Result<TimelineEventRow> {
    check_new(new)?;
    let session_id = owners
        .session_of(conn, Target::Execution(new.execution_id))
        .await?;
    let id = new.id.unwrap_or_else(Uuid::now_v7);
    // Session first, as everywhere: the receipt is claimed under the session lock.
    lock_session(conn, session_id).await?;
    if is_retry(conn, new.id, session_id, (CREATE, "timeline_events"), new).await? {
        return fetch::<TimelineEventRow>(conn, session_id, id).await;
    }
    lock_running_execution(conn, session_id, new.execution_id, "a timeline event").await?;
    insert_if_running(conn, Some(session_id), id, new, None)
        .await?
        .ok_or_else(|| Error::Internal(format!("event {id} not created under held locks")))
}

/// Inserts an event with its session's next sequence number (`insert_timeline_event`,
/// migration 0115), under a session the caller has locked: a chat's question, recorded under
/// the execution that will answer it before it runs.
pub(crate) async fn insert(
    conn: &mut PgConnection,
    id: Uuid,
    session_id: Uuid,
    stage_id: Uuid,
    execution_id: Uuid,
    new: &NewEvent,
) -> Result<TimelineEventRow> {
    sqlx::query_as(concat!(
        "SELECT ",
        timeline_event_columns!(),
        " FROM insert_timeline_event($1, $2, $3, $4, $5, $6, $7, $8)"
    ))
    .bind(session_id)
    .bind(stage_id)
    .bind(execution_id)
    .bind(id)
    .bind(new.event_type)
    .bind(new.status)
    .bind(&new.content)
    .bind(&new.metadata)
    .fetch_one(traced(conn))
    .await
    .map_err(|e| id_taken(e, id))
}

/// Creates an event under its execution's session, found by the execution's id.
const CREATE_FINDING_SESSION: &str = concat!(
    "SELECT ",
    timeline_event_columns!(),
    " FROM create_timeline_event((SELECT session_id FROM agent_executions WHERE id = $1), \
        $1, $2, $3, $4, $5, $6, $7, $8)"
);

/// Creates an event under its execution's session, given (`$9`).
const CREATE_IN_SESSION: &str = concat!(
    "SELECT ",
    timeline_event_columns!(),
    " FROM create_timeline_event($9, $1, $2, $3, $4, $5, $6, $7, $8)"
);

/// Inserts the event with its session's next sequence number (`create_timeline_event`,
/// migration 0115), when its execution is running (and claims its id for `receipt`); `None`,
/// having written nothing, otherwise. The statement locks the session's row first, as
/// numbering needs.
async fn insert_if_running(
    conn: &mut PgConnection,
    session_id: Option<Uuid>,
    id: Uuid,
    new: &NewEvent,
    receipt: Option<(&str, Vec<u8>)>,
) -> Result<Option<TimelineEventRow>> {
    let (operation, hash) = receipt.unzip();
    let statement = match session_id {
        Some(_) => CREATE_IN_SESSION,
        None => CREATE_FINDING_SESSION,
    };
    let query = sqlx::query_as(statement)
        .bind(new.execution_id)
        .bind(id)
        .bind(operation)
        .bind(hash)
        .bind(new.event_type)
        .bind(new.status)
        .bind(&new.content)
        .bind(&new.metadata);
    let query = match session_id {
        Some(session_id) => query.bind(session_id),
        None => query,
    };
    query
        .fetch_optional(traced(conn))
        .await
        .map_err(|e| id_taken(e, id))
}

/// One piece of streamed content.
#[derive(Debug, Clone, Serialize)]
pub struct Append {
    pub event_id: Uuid,
    /// Where `delta` starts, in characters from the start of the event's content.
    pub offset: i64,
    pub delta: String,
}

/// What an append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// The offset just past this chunk (characters): where the next append starts.
    pub end: i64,
    /// Characters newly stored by this append (0 for a retry).
    pub stored: i64,
    /// Their size in bytes (UTF-8).
    pub stored_bytes: usize,
}

/// Refuses an append that no state of its event could take; its length in characters.
pub(super) fn check_append(append: &Append) -> Result<i64> {
    let delta_len = append.delta.chars().count() as i64;
    if delta_len == 0 {
        return Err(Error::bad_input("`delta` must not be empty"));
    }
    check_text("delta", &append.delta, limits::DELTA)?;
    if append.offset < 0 {
        return Err(Error::bad_input(format!(
            "`offset` must be 0 or more, got {}",
            append.offset
        )));
    }
    Ok(delta_len)
}

impl Appended {
    /// The whole of `append` (of `delta_len` characters) was stored.
    pub(super) fn whole(append: &Append, delta_len: i64) -> Appended {
        Appended {
            end: append.offset + delta_len,
            stored: delta_len,
            stored_bytes: append.delta.len(),
        }
    }
}

/// What `append_timeline_chunk` found (`migrations/0119_appended_text_in_the_event_log.sql`):
/// the event's status, where its text ended, and whether the chunk was stored.
type AtEnd = (TimelineEventStatus, i64, bool);

/// Locks the event's stream and stores the chunk when it lands where the stored text ends, in
/// one statement; `None` when the event does not exist. The API names the event by id alone,
/// and so does this statement: it is the append's look-up by id (it finds the event's session,
/// and stores the chunk with it).
async fn append_if_at_end(conn: &mut PgConnection, append: &Append) -> Result<Option<AtEnd>> {
    Ok(
        sqlx::query_as("SELECT status, length, stored FROM append_timeline_chunk($1, $2, $3, $4)")
            .bind(append.event_id)
            .bind(append.offset)
            .bind(&append.delta)
            .bind(limits::TEXT as i64)
            .fetch_optional(traced(conn))
            .await?,
    )
}

/// Decides an append alone, in the transaction `conn` holds: stores it where its event's
/// text ends, acknowledges a resent chunk, applies the new part of an overlap, and refuses a
/// gap, a finished or missing event, or text past the limit. (Most appends are stored in
/// groups instead, see [`super::append_groups`]; those a group did not store come here.)
pub async fn append(
    conn: &mut PgConnection,
    owners: &mut Owners,
    append: &Append,
) -> Result<Appended> {
    let delta_len = check_append(append)?;
    // Only this event's stream is locked (until the transaction ends): appends to different
    // events never wait for each other.
    let (status, length, stored) = append_if_at_end(conn, append).await?.ok_or_else(|| {
        Error::not_found(format!("timeline event {} does not exist", append.event_id))
    })?;
    if stored {
        return Ok(Appended::whole(append, delta_len));
    }
    if status != TimelineEventStatus::Streaming {
        return Err(Error::Conflict(format!(
            "cannot append to timeline event {}: it is {} (a finished event never changes)",
            append.event_id,
            snake(status)
        )));
    }
    if append.offset > length {
        return Err(Error::Conflict(format!(
            "gap in timeline event {}: it has {length} characters, the append starts at {}",
            append.event_id, append.offset
        )));
    }
    let overlap = (length - append.offset).min(delta_len);
    if overlap == 0 {
        // Not stored, yet where the text ends: only past the event's size limit.
        return Err(too_long(append.event_id));
    }
    // A retry (or a partly applied chunk): what is stored must be what is sent again.
    let session_id = owners
        .session_of(conn, Target::Event(append.event_id))
        .await?;
    let stored: String = sqlx::query_scalar(&format!(
        "SELECT substr(content, $3::int + 1, $4::int) FROM {} t WHERE id = $1",
        TimelineEventRow::source(Some("$2"))
    ))
    .bind(append.event_id)
    .bind(session_id)
    .bind(append.offset)
    .bind(overlap)
    .fetch_one(traced(&mut *conn))
    .await?;
    let sent: String = append.delta.chars().take(overlap as usize).collect();
    if stored != sent {
        return Err(Error::Conflict(format!(
            "timeline event {} already holds different content at offset {}",
            append.event_id, append.offset
        )));
    }
    let new_part: String = append.delta.chars().skip(overlap as usize).collect();
    if new_part.is_empty() {
        return Ok(Appended {
            end: append.offset + delta_len,
            stored: 0,
            stored_bytes: 0,
        });
    }
    let stored = delta_len - overlap;
    if length + stored > limits::TEXT as i64 {
        return Err(too_long(append.event_id));
    }
    sqlx::query(
        "INSERT INTO timeline_event_chunks (event_id, start_offset, content, session_id) \
         VALUES ($1, $2, $3, $4)",
    )
    .bind(append.event_id)
    .bind(length as i32)
    .bind(&new_part)
    .bind(session_id)
    .execute(traced(conn))
    .await?;
    Ok(Appended {
        end: append.offset + delta_len,
        stored,
        stored_bytes: new_part.len(),
    })
}

/// An append refused because its event would grow past [`limits::TEXT`].
fn too_long(event_id: Uuid) -> Error {
    Error::bad_input(format!(
        "timeline event {event_id} would exceed {} characters",
        limits::TEXT
    ))
}

/// How a streaming event ends.
#[derive(Debug, Clone, Serialize)]
pub struct Finish {
    pub event_id: Uuid,
    pub status: TimelineEventStatus,
    /// The final content; when absent, the content streamed so far.
    pub content: Option<String>,
    /// Replaces the metadata when given.
    pub metadata: Option<Json>,
    pub llm_interaction_id: Option<Uuid>,
    pub mcp_interaction_id: Option<Uuid>,
}

/// Finishes an event (in a batch, whose locks are taken): in one statement when it can, else
/// step by step ([`finish_decided`]).
pub async fn finish(
    conn: &mut PgConnection,
    owners: &mut Owners,
    finish: &Finish,
) -> Result<TimelineEventRow> {
    check_finish(finish)?;
    let session_id = owners
        .session_of(conn, Target::Event(finish.event_id))
        .await?;
    match fold(conn, Some(session_id), finish).await? {
        Some(event) => Ok(event),
        None => finish_decided(conn, owners, finish).await,
    }
}

/// Refuses an ending no event could take.
fn check_finish(finish: &Finish) -> Result<()> {
    if finish.status == TimelineEventStatus::Streaming {
        return Err(Error::bad_input("`STREAMING` is not a final status"));
    }
    if let Some(content) = &finish.content {
        check_text("content", content, limits::TEXT)?;
    }
    if let Some(metadata) = &finish.metadata {
        check_json("metadata", metadata, limits::SMALL_JSON)?;
    }
    Ok(())
}

/// Finishes the event in one statement, sent alone so it commits at once: when it is streaming
/// and its links name interactions of its session. `None`, having written nothing, for
/// anything else.
pub async fn finish_at_once(
    conn: &mut PgConnection,
    finish: &Finish,
) -> Result<Option<TimelineEventRow>> {
    check_finish(finish)?;
    fold(conn, None, finish).await
}

/// Finishes the event step by step, in the transaction `conn` holds: a repeated finish
/// answered with the event, a finished event or a bad link refused.
pub async fn finish_decided(
    conn: &mut PgConnection,
    owners: &mut Owners,
    finish: &Finish,
) -> Result<TimelineEventRow> {
    check_finish(finish)?;
    let session_id = owners
        .session_of(conn, Target::Event(finish.event_id))
        .await?;
    lock_session(conn, session_id).await?;
    // Lock before reading, so no append lands between what we read and what we fold.
    lock_stream(conn, finish.event_id).await?;
    let current = fetch::<TimelineEventRow>(conn, session_id, finish.event_id).await?;
    if current.status != TimelineEventStatus::Streaming {
        let same = current.status == finish.status
            && finish
                .content
                .as_ref()
                .is_none_or(|c| *c == current.content)
            && finish.metadata.as_ref().is_none_or(|m| {
                serde_json::from_str::<serde_json::Value>(current.metadata.get())
                    .is_ok_and(|c| c == *m)
            })
            && finish
                .llm_interaction_id
                .is_none_or(|l| Some(l) == current.llm_interaction_id)
            && finish
                .mcp_interaction_id
                .is_none_or(|m| Some(m) == current.mcp_interaction_id);
        if same {
            return Ok(current);
        }
        return Err(Error::Conflict(format!(
            "cannot finish timeline event {}: it is already {} (a finished event never changes)",
            finish.event_id,
            snake(current.status)
        )));
    }
    check_links(
        conn,
        session_id,
        finish.llm_interaction_id,
        finish.mcp_interaction_id,
    )
    .await?;
    fold(conn, Some(session_id), finish).await?.ok_or_else(|| {
        Error::Internal(format!(
            "event {} not finished under held locks",
            finish.event_id
        ))
    })
}

/// Refuses links to LLM and MCP interactions that do not exist or belong to another session.
pub(crate) async fn check_links(
    conn: &mut PgConnection,
    session_id: Uuid,
    llm: Option<Uuid>,
    mcp: Option<Uuid>,
) -> Result<()> {
    check_link(conn, "llm_interactions", "LLM interaction", llm, session_id).await?;
    check_link(conn, "mcp_interactions", "MCP interaction", mcp, session_id).await
}

async fn check_link(
    conn: &mut PgConnection,
    table: &str,
    what: &str,
    id: Option<Uuid>,
    session_id: Uuid,
) -> Result<()> {
    let Some(id) = id else { return Ok(()) };
    let linked: bool = sqlx::query_scalar(&format!(
        "SELECT EXISTS (SELECT FROM {table} WHERE id = $1 AND session_id = $2)"
    ))
    .bind(id)
    .bind(session_id)
    .fetch_one(traced(&mut *conn))
    .await?;
    if linked {
        return Ok(());
    }
    // Refused: whether it is another session's says why (by id alone, on this path only).
    let owner: Option<Uuid> = sqlx::query_scalar(&format!(
        "SELECT session_id FROM {table} WHERE id = $1 LIMIT 1"
    ))
    .bind(id)
    .fetch_optional(traced(conn))
    .await?;
    match owner {
        None => Err(Error::bad_input(format!("{what} {id} does not exist"))),
        Some(owner) if owner != session_id => Err(Error::bad_input(format!(
            "{what} {id} belongs to another session"
        ))),
        Some(_) => Ok(()),
    }
}

/// Finishes an event of the session found by the event's id.
const FINISH_FINDING_SESSION: &str = concat!(
    "SELECT ",
    timeline_event_columns!(),
    " FROM finish_timeline_event((SELECT session_id FROM timeline_events WHERE id = $1), \
        $1, $2, $3, $4, $5, $6)"
);

/// Finishes an event of the session given (`$7`).
const FINISH_IN_SESSION: &str = concat!(
    "SELECT ",
    timeline_event_columns!(),
    " FROM finish_timeline_event($7, $1, $2, $3, $4, $5, $6)"
);

/// Writes the final content (the streamed text when `finish` gives none) into the event row,
/// one row write for the whole stream, and drops its chunks (`finish_timeline_event`,
/// migration 0115), when the event is streaming and its links are good; `None`, having
/// written nothing, otherwise.
async fn fold(
    conn: &mut PgConnection,
    session_id: Option<Uuid>,
    finish: &Finish,
) -> Result<Option<TimelineEventRow>> {
    let statement = match session_id {
        Some(_) => FINISH_IN_SESSION,
        None => FINISH_FINDING_SESSION,
    };
    let query = sqlx::query_as(statement)
        .bind(finish.event_id)
        .bind(finish.status)
        .bind(&finish.content)
        .bind(&finish.metadata)
        .bind(finish.llm_interaction_id)
        .bind(finish.mcp_interaction_id);
    let query = match session_id {
        Some(session_id) => query.bind(session_id),
        None => query,
    };
    Ok(query.fetch_optional(traced(conn)).await?)
}

/// Closes the still-streaming events of a finishing execution of this session with the same
/// outcome, keeping the content streamed so far.
pub(crate) async fn close_streaming_events(
    conn: &mut PgConnection,
    session_id: Uuid,
    execution_id: Uuid,
    outcome: ExecutionStatus,
) -> Result<()> {
    let status = match outcome {
        ExecutionStatus::Failed => TimelineEventStatus::Failed,
        ExecutionStatus::TimedOut => TimelineEventStatus::TimedOut,
        ExecutionStatus::Cancelled => TimelineEventStatus::Cancelled,
        _ => TimelineEventStatus::Completed,
    };
    for event_id in lock_streams_of(conn, session_id, &[execution_id]).await? {
        let finish = Finish {
            event_id,
            status,
            content: None,
            metadata: None,
            llm_interaction_id: None,
            mcp_interaction_id: None,
        };
        fold(conn, Some(session_id), &finish)
            .await?
            .ok_or_else(|| {
                Error::Internal(format!("event {event_id} not closed under held locks"))
            })?;
    }
    Ok(())
}
