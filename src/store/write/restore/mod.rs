//! Restoring sessions as they were: whole records with their own ids, timestamps and final
//! statuses (the demo's sessions, an imported session), which the live writers
//! cannot write (they stamp `now()` and move a status one step at a time).
//!
//! Every record is first checked (`rules`: the live writers' own checks, and what holds of
//! finished history), then the rows are inserted parents first, in one transaction (`rows`),
//! so a refused record leaves nothing written. A session that is already there keeps what it
//! has: it may come from an older version of the same records, whose child ids differ and would
//! collide on sequence numbers and indexes. So only the records of the sessions it inserts are
//! written, and restoring the same records again writes nothing.

mod commands;
mod rows;
mod rules;

use crate::error::{Error, Result};
use crate::store::audit::Origin;
use crate::store::audit::log::AuditRecordRow;
use crate::store::{
    ChainRow, ChatRow, ChatUserMessageRow, ExecutionRow, LlmInteractionRow, LlmPayloadRow,
    LlmRequestRow, McpInteractionRow, McpPayloadRow, MessageRow, NotificationRow, Record,
    SessionRow, SessionStatusChangeRow, StageRow, Store, TimelineEventRow,
};

/// The records of some sessions, each table's in an order it can be inserted in (parent
/// executions before their sub-agents, messages and timeline events by sequence number).
#[derive(Debug, Clone, Default)]
pub struct Records {
    /// The chain versions the sessions ran, registered first (one already registered must have
    /// the same definition).
    pub chains: Vec<ChainRow>,
    pub sessions: Vec<SessionRow>,
    pub chats: Vec<ChatRow>,
    pub chat_messages: Vec<ChatUserMessageRow>,
    pub stages: Vec<StageRow>,
    pub executions: Vec<ExecutionRow>,
    /// The tool calls an assistant message requests are linked to it as the live writer links
    /// them, from its `tool_calls`.
    pub messages: Vec<MessageRow>,
    pub llm_interactions: Vec<(LlmInteractionRow, LlmRequestRow, LlmPayloadRow)>,
    pub mcp_interactions: Vec<(McpInteractionRow, McpPayloadRow)>,
    pub timeline_events: Vec<TimelineEventRow>,
    /// Notifications where their delivery stands (the demo's: some delivered, one failed for
    /// good, one pending).
    pub notifications: Vec<NotificationRow>,
    /// A session's status history as it was (an import's), in place of the one entry its
    /// insert records; none (the demo's): that entry stays.
    pub status_history: Vec<SessionStatusChangeRow>,
    /// A session's audit trail as it was (an import's), before the restore's own record.
    pub audit: Vec<AuditRecordRow>,
}

/// What a restore did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Restored {
    /// The tool calls the records' messages request.
    pub tool_calls: usize,
    /// Rows written, tool calls included.
    pub new: usize,
}

/// Restores the records' sessions that are not there yet, in one transaction. A record that
/// breaks a rule is refused (`BAD_USER_INPUT`, naming it and the rule), and nothing is written.
pub async fn restore(store: &Store, records: &Records, origin: &Origin) -> Result<Restored> {
    let tool_calls = rules::check(records)?;
    let mut tx = store.begin().await?;
    let new = rows::write(&mut tx, records, origin).await?;
    tx.commit().await?;
    Ok(Restored { tool_calls, new })
}

/// Names the refused record in an error, which is then the input's fault.
fn refused<R: Record>(record: &R) -> impl FnOnce(Error) -> Error {
    let id = record.id();
    move |err| match err {
        Error::BadUserInput(why) | Error::Conflict(why) | Error::NotFound(why) => {
            Error::bad_input(format!("{} {id}: {why}", R::NAME))
        }
        other => other,
    }
}
