//! A session as one JSON document (`GET /sessions/{id}/export`, `casefile export`): every
//! record of every layer, its chats, notifications, status history and audit trail, read in
//! one snapshot and written as it is read, a row at a time, so a session with megabytes of
//! prompts never sits whole in memory (what is held is one row and one chunk of output).
//!
//! The document, version 1 (the README's "Export" section is its reference):
//!
//! ```text
//! {"format":"casefile.session","version":1,"exported_at":"…",
//!  "session":{…},"chain":{…}|null,
//!  "stages":[…],"executions":[…],"timeline_events":[…],"messages":[…],
//!  "llm_interactions":[…],"mcp_interactions":[…],
//!  "chats":[…],"chat_messages":[…],"notifications":[…],
//!  "status_history":[…],"audit":[…]}
//! ```
//!
//! Each record has its table's columns, named as they are. Left out: what the database
//! derives and assigns again (search documents, roll-ups, event-log and feed positions).

use bytes::Bytes;
use chrono::{DateTime, SecondsFormat, Utc};
use futures::TryStreamExt as _;
use serde::Serialize;
use serde_json::Value as Json;
use sqlx::postgres::{PgRow, PgValueFormat};
use sqlx::{FromRow, PgConnection, Row as _, ValueRef as _};
use tokio::io::{AsyncWrite, AsyncWriteExt as _};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use uuid::Uuid;

use super::audit::log::AuditRecordRow;
use super::traced::traced;
use crate::error::{Error, Result};
use crate::store::write::restore::Records;
use crate::store::{
    ChainRow, ChatRow, ChatUserMessageRow, ExecutionRow, LlmInteractionRow, LlmPayloadRow,
    LlmRequestRow, McpInteractionRow, McpPayloadRow, MessageRow, NotificationRow, Record,
    SessionRow, SessionStatusChangeRow, StageRow, Store, TimelineEventRow,
};

/// What the document says it is.
pub const FORMAT: &str = "casefile.session";
pub const VERSION: u32 = 1;

/// Output is written in chunks of about this size: few writes, little held.
const CHUNK: usize = 64 * 1024;

/// An LLM interaction with its request and response, as one record, read back (an export writes
/// the payloads straight from the rows it reads: see [`Payload`]). `#[serde(flatten)]` reads
/// through a buffer that cannot hold raw JSON text, so the payloads are values here.
#[derive(Debug, serde::Deserialize)]
pub struct LlmInteractionImport {
    #[serde(flatten)]
    pub interaction: LlmInteractionRow,
    pub llm_request: Json,
    pub llm_response: Json,
    pub thinking_content: Option<String>,
    pub response_metadata: Json,
}

/// An MCP interaction with its arguments, result and tool list, as one record, read back.
#[derive(Debug, serde::Deserialize)]
pub struct McpInteractionImport {
    #[serde(flatten)]
    pub interaction: McpInteractionRow,
    pub tool_arguments: Json,
    pub tool_result: Json,
    pub available_tools: Json,
}

/// A document as read back (`casefile import`).
#[derive(Debug, serde::Deserialize)]
pub struct SessionDocument {
    pub format: String,
    pub version: u32,
    pub session: SessionRow,
    pub chain: Option<ChainRow>,
    pub stages: Vec<StageRow>,
    pub executions: Vec<ExecutionRow>,
    pub timeline_events: Vec<TimelineEventRow>,
    pub messages: Vec<MessageRow>,
    pub llm_interactions: Vec<LlmInteractionImport>,
    pub mcp_interactions: Vec<McpInteractionImport>,
    pub chats: Vec<ChatRow>,
    pub chat_messages: Vec<ChatUserMessageRow>,
    pub notifications: Vec<NotificationRow>,
    pub status_history: Vec<SessionStatusChangeRow>,
    pub audit: Vec<AuditRecordRow>,
}

impl SessionDocument {
    /// `text` as a document of this format and version; BAD_USER_INPUT saying what is wrong.
    pub fn parse(text: &str) -> Result<SessionDocument> {
        #[derive(serde::Deserialize)]
        struct Header {
            format: Option<String>,
            version: Option<u32>,
        }
        let header: Header = serde_json::from_str(text)
            .map_err(|err| Error::bad_input(format!("not a JSON document: {err}")))?;
        if header.format.as_deref() != Some(FORMAT) || header.version != Some(VERSION) {
            return Err(Error::bad_input(format!(
                "not a {FORMAT} document of version {VERSION} (format {:?}, version {:?})",
                header.format, header.version
            )));
        }
        serde_json::from_str(text)
            .map_err(|err| Error::bad_input(format!("a {FORMAT} document, but: {err}")))
    }

    /// Adds its records to `records`, as the row-restore writer takes them.
    pub fn add_to(self, records: &mut Records) {
        records.chains.extend(self.chain);
        records.sessions.push(self.session);
        records.stages.extend(self.stages);
        records.executions.extend(self.executions);
        records.timeline_events.extend(self.timeline_events);
        records.messages.extend(self.messages);
        records
            .llm_interactions
            .extend(self.llm_interactions.into_iter().map(|l| {
                let (id, session_id) = (l.interaction.id, l.interaction.session_id);
                (
                    l.interaction,
                    LlmRequestRow {
                        id,
                        session_id,
                        llm_request: l.llm_request,
                    },
                    LlmPayloadRow {
                        id,
                        session_id,
                        llm_response: l.llm_response,
                        thinking_content: l.thinking_content,
                        response_metadata: l.response_metadata,
                    },
                )
            }));
        records
            .mcp_interactions
            .extend(self.mcp_interactions.into_iter().map(|m| {
                let (id, session_id) = (m.interaction.id, m.interaction.session_id);
                (
                    m.interaction,
                    McpPayloadRow {
                        id,
                        session_id,
                        tool_arguments: m.tool_arguments,
                        tool_result: m.tool_result,
                        available_tools: m.available_tools,
                    },
                )
            }));
        records.chats.extend(self.chats);
        records.chat_messages.extend(self.chat_messages);
        records.notifications.extend(self.notifications);
        records.status_history.extend(self.status_history);
        records.audit.extend(self.audit);
    }
}

/// Where a session stood when its document was read: what a purge that archives it checks
/// before deleting it, so a session that changed after its export is not deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exported {
    pub session: Uuid,
    pub updated_at: DateTime<Utc>,
    /// The last position of its event log: every change to its records takes the next one.
    pub last_position: i64,
}

/// One array of the document: its name, the statement reading its rows of session `$1` (in an
/// order that does not depend on the plan, so two exports of the same rows are equal), and the
/// large columns each record carries beside its row's fields.
struct Part {
    name: &'static str,
    statement: String,
    payloads: &'static [Payload],
}

/// A large column of a record (a prompt, a tool's result), written into the document straight
/// from the row it was read in: a multi-megabyte payload is never copied out of it into a value
/// of its own on the way.
enum Payload {
    /// `jsonb`, passed through as the database's text.
    Json(&'static str),
    /// `text`, written as a JSON string.
    Text(&'static str),
}

impl Payload {
    fn column(&self) -> &'static str {
        match self {
            Payload::Json(column) | Payload::Text(column) => column,
        }
    }
}

const LLM_PAYLOADS: &[Payload] = &[
    Payload::Json("llm_request"),
    Payload::Json("llm_response"),
    Payload::Text("thinking_content"),
    Payload::Json("response_metadata"),
];

const MCP_PAYLOADS: &[Payload] = &[
    Payload::Json("tool_arguments"),
    Payload::Json("tool_result"),
    Payload::Json("available_tools"),
];

fn part<R: Record>(name: &'static str, payloads: &'static [Payload], order: &str) -> Part {
    let extra: String = payloads
        .iter()
        .map(|p| format!(", {}", p.column()))
        .collect();
    Part {
        name,
        statement: format!(
            "SELECT {}{extra} FROM {} t WHERE session_id = $1 ORDER BY {order}",
            R::COLUMNS,
            R::source(Some("$1"))
        ),
        payloads,
    }
}

/// How many chunks may wait for their reader: with [`CHUNK`], what a slow reader can make an
/// export hold.
pub const CHUNKS_WAITING: usize = 4;

/// Writes `chunks` to `sink` as they come, until their writer is done (or fails: a dropped
/// writer also ends them; its own outcome says which).
pub async fn write_chunks(
    chunks: &mut mpsc::Receiver<Bytes>,
    sink: &mut (dyn AsyncWrite + Unpin + Send),
) -> std::io::Result<()> {
    while let Some(chunk) = chunks.recv().await {
        sink.write_all(&chunk).await?;
    }
    sink.flush().await
}

/// Output gathered as chunks of at most [`CHUNK`] bytes. A multi-megabyte record is never one
/// contiguous buffer growing by doubling (which, at each step, holds the old copy and a new one
/// twice its size): it is its own size in chunks, and no byte is copied twice.
#[derive(Default)]
struct Chunked {
    full: Vec<Bytes>,
    filling: Vec<u8>,
}

impl std::io::Write for Chunked {
    fn write(&mut self, mut data: &[u8]) -> std::io::Result<usize> {
        let written = data.len();
        while !data.is_empty() {
            if self.filling.capacity() == 0 {
                self.filling.reserve_exact(CHUNK);
            }
            let room = CHUNK - self.filling.len();
            let (now, rest) = data.split_at(room.min(data.len()));
            self.filling.extend_from_slice(now);
            if self.filling.len() == CHUNK {
                self.full
                    .push(Bytes::from(std::mem::take(&mut self.filling)));
            }
            data = rest;
        }
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Writes documents as chunks of bytes to a channel, whose reader (an HTTP response, a file)
/// takes them at its own pace: a full channel makes the export wait.
pub struct DocumentWriter {
    out: mpsc::Sender<Bytes>,
    buffer: Chunked,
}

impl DocumentWriter {
    /// Exports session `session` on a task of its own (see [`DocumentWriter::session`]): the
    /// task's outcome, and the chunks of its document, one line ended by a newline.
    pub fn spawn_session(
        store: &Store,
        session: Uuid,
    ) -> (JoinHandle<Result<Exported>>, mpsc::Receiver<Bytes>) {
        let (mut writer, chunks) = DocumentWriter::new();
        let store = store.clone();
        let written = tokio::spawn(async move { writer.session(&store, session).await });
        (written, chunks)
    }

    /// A writer, and the chunks it writes.
    pub fn new() -> (Self, mpsc::Receiver<Bytes>) {
        let (out, chunks) = mpsc::channel(CHUNKS_WAITING);
        let writer = DocumentWriter {
            out,
            buffer: Chunked::default(),
        };
        (writer, chunks)
    }

    fn text(&mut self, text: &str) {
        self.bytes(text.as_bytes());
    }

    fn bytes(&mut self, bytes: &[u8]) {
        std::io::Write::write_all(&mut self.buffer, bytes)
            .expect("writing to memory does not fail");
    }

    async fn value(&mut self, value: &impl Serialize) -> Result<()> {
        serde_json::to_writer(&mut self.buffer, value)
            .map_err(|err| Error::Internal(format!("a record did not serialize: {err}")))?;
        self.send_full().await
    }

    /// Sends the chunks filled so far.
    async fn send_full(&mut self) -> Result<()> {
        let chunks = std::mem::take(&mut self.buffer.full);
        self.send(chunks).await
    }

    /// Sends what is buffered, the last chunk too.
    async fn flush(&mut self) -> Result<()> {
        let mut chunks = std::mem::take(&mut self.buffer.full);
        if !self.buffer.filling.is_empty() {
            chunks.push(Bytes::from(std::mem::take(&mut self.buffer.filling)));
        }
        self.send(chunks).await
    }

    async fn send(&mut self, chunks: Vec<Bytes>) -> Result<()> {
        for chunk in chunks {
            self.out.send(chunk).await.map_err(|_| {
                Error::Internal("the export's reader went away (the client hung up)".to_owned())
            })?;
        }
        Ok(())
    }

    /// Session `session`'s document, read in one snapshot, as one line ended by a newline (so
    /// documents written one after another are the lines of a bulk export); NOT_FOUND when there is no such session (deleted ones are
    /// exported: a soft delete is part of their history). Nothing is written before the
    /// session is found.
    pub async fn session(&mut self, store: &Store, session: Uuid) -> Result<Exported> {
        let mut tx = store.begin().await?;
        // One snapshot for the whole document, however long the output takes to drain.
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(traced(&mut tx))
            .await?;
        let row: Option<SessionRow> = sqlx::query_as(&format!(
            "SELECT {} FROM sessions WHERE id = $1",
            SessionRow::COLUMNS
        ))
        .bind(session)
        .fetch_optional(traced(&mut tx))
        .await?;
        let row =
            row.ok_or_else(|| Error::not_found(format!("session {session} does not exist")))?;
        let last_position: i64 = sqlx::query_scalar("SELECT session_last_position($1)")
            .bind(session)
            .fetch_one(traced(&mut tx))
            .await?;
        let exported = Exported {
            session,
            updated_at: row.updated_at,
            last_position,
        };
        let chain: Option<ChainRow> = match row.chain() {
            Some(key) => {
                sqlx::query_as(&format!(
                    "SELECT {} FROM chains WHERE name = $1 AND version = $2",
                    ChainRow::COLUMNS
                ))
                .bind(&key.name)
                .bind(&key.version)
                .fetch_optional(traced(&mut tx))
                .await?
            }
            None => None,
        };
        self.text(&format!(
            "{{\"format\":\"{FORMAT}\",\"version\":{VERSION},\"exported_at\":\"{}\",\"session\":",
            timestamp(Utc::now())
        ));
        self.value(&row).await?;
        self.text(",\"chain\":");
        self.value(&chain).await?;
        self.rows::<StageRow>(
            &mut tx,
            part::<StageRow>("stages", &[], "stage_index, id"),
            session,
        )
        .await?;
        self.rows::<ExecutionRow>(
            &mut tx,
            part::<ExecutionRow>("executions", &[], "created_at, id"),
            session,
        )
        .await?;
        self.rows::<TimelineEventRow>(
            &mut tx,
            part::<TimelineEventRow>("timeline_events", &[], "sequence_number"),
            session,
        )
        .await?;
        self.rows::<MessageRow>(
            &mut tx,
            part::<MessageRow>("messages", &[], "execution_id, sequence_number"),
            session,
        )
        .await?;
        self.rows::<LlmInteractionRow>(
            &mut tx,
            part::<LlmInteractionRow>("llm_interactions", LLM_PAYLOADS, "created_at, id"),
            session,
        )
        .await?;
        self.rows::<McpInteractionRow>(
            &mut tx,
            part::<McpInteractionRow>("mcp_interactions", MCP_PAYLOADS, "created_at, id"),
            session,
        )
        .await?;
        self.rows::<ChatRow>(
            &mut tx,
            part::<ChatRow>("chats", &[], "created_at, id"),
            session,
        )
        .await?;
        self.rows::<ChatUserMessageRow>(
            &mut tx,
            part::<ChatUserMessageRow>("chat_messages", &[], "created_at, id"),
            session,
        )
        .await?;
        self.rows::<NotificationRow>(
            &mut tx,
            part::<NotificationRow>("notifications", &[], "created_at, id"),
            session,
        )
        .await?;
        self.rows::<SessionStatusChangeRow>(
            &mut tx,
            Part {
                name: "status_history",
                statement: "SELECT * FROM session_status_changes WHERE session_id = $1 \
                            ORDER BY id"
                    .to_owned(),
                payloads: &[],
            },
            session,
        )
        .await?;
        self.rows::<AuditRecordRow>(
            &mut tx,
            part::<AuditRecordRow>("audit", &[], "at, id"),
            session,
        )
        .await?;
        self.text("}");
        self.text("\n");
        tx.commit().await?;
        self.flush().await?;
        Ok(exported)
    }

    /// `,"name":[row,row,…]`, each row written as it arrives: its record's fields, then its
    /// payloads.
    async fn rows<R>(&mut self, conn: &mut PgConnection, part: Part, session: Uuid) -> Result<()>
    where
        R: for<'r> FromRow<'r, PgRow> + Serialize + Send + Unpin,
    {
        self.text(&format!(",\"{}\":[", part.name));
        let mut rows = sqlx::query(&part.statement)
            .bind(session)
            .fetch(traced(conn));
        let mut first = true;
        while let Some(row) = rows.try_next().await? {
            if !first {
                self.text(",");
            }
            first = false;
            let record = R::from_row(&row)?;
            if part.payloads.is_empty() {
                self.value(&record).await?;
                continue;
            }
            // The record's fields are a JSON object: its closing brace comes after the payloads.
            let mut fields = serde_json::to_vec(&record)
                .map_err(|err| Error::Internal(format!("a record did not serialize: {err}")))?;
            fields.pop();
            self.bytes(&fields);
            for payload in part.payloads {
                self.text(&format!(",\"{}\":", payload.column()));
                self.payload(&row, payload).await?;
            }
            self.text("}");
            self.send_full().await?;
        }
        self.text("]");
        Ok(())
    }

    /// A payload of `row`, as it lies in the row, sent a chunk at a time as it is written: the
    /// export holds the row and a chunk or two of output, not a second copy of the payload.
    async fn payload(&mut self, row: &PgRow, payload: &Payload) -> Result<()> {
        match payload {
            Payload::Json(column) => {
                let value = row.try_get_raw(*column)?;
                if value.is_null() {
                    self.text("null");
                    return Ok(());
                }
                let bytes = value.as_bytes().map_err(sqlx::Error::Decode)?;
                // `jsonb` in binary is a version byte (1), then the JSON text.
                let text = match value.format() {
                    PgValueFormat::Binary => bytes.get(1..).unwrap_or_default(),
                    PgValueFormat::Text => bytes,
                };
                for piece in text.chunks(CHUNK) {
                    self.bytes(piece);
                    self.send_full().await?;
                }
            }
            Payload::Text(column) => {
                let Some(mut text) = row.try_get::<Option<&str>, _>(*column)? else {
                    self.text("null");
                    return Ok(());
                };
                self.text("\"");
                while !text.is_empty() {
                    // A piece ends on a character's boundary (one is at most 4 bytes long).
                    let (piece, rest) = text.split_at(text.floor_char_boundary(CHUNK));
                    let quoted = serde_json::to_string(piece).map_err(|err| {
                        Error::Internal(format!("a payload did not serialize: {err}"))
                    })?;
                    self.text(&quoted[1..quoted.len() - 1]);
                    self.send_full().await?;
                    text = rest;
                }
                self.text("\"");
            }
        }
        Ok(())
    }
}

/// As chrono writes a timestamp in JSON.
fn timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    #[test]
    fn output_is_gathered_in_whole_chunks_and_loses_nothing() {
        let mut out = Chunked::default();
        let big: Vec<u8> = (0..3 * CHUNK + 17).map(|i| (i % 251) as u8).collect();
        out.write_all(b"{").unwrap();
        out.write_all(&big).unwrap();
        out.write_all(b"}").unwrap();
        assert_eq!(out.full.len(), 3);
        assert!(out.full.iter().all(|chunk| chunk.len() == CHUNK));
        assert_eq!(out.filling.len(), 19);
        let joined: Vec<u8> = out
            .full
            .iter()
            .flatten()
            .chain(&out.filling)
            .copied()
            .collect();
        assert_eq!(joined[0], b'{');
        assert_eq!(&joined[1..joined.len() - 1], &big[..]);
        assert_eq!(joined.last(), Some(&b'}'));
    }
}
