//! Writing restored records: every column of each table listed once, bound from the field of
//! the same name, and the rows inserted parents first, each after the live writers' own checks
//! against what is already written (an index its stage uses, a tool call its conversation did
//! not request, a link to another session's interaction).

use std::collections::{HashMap, HashSet};

use sqlx::{PgConnection, Postgres, QueryBuilder};
use uuid::Uuid;

use super::commands::{json, new_chain, new_execution, new_stage};
use super::{Records, refused};
use crate::error::{Error, Result};
use crate::store::audit::log::AuditRecordRow;
use crate::store::audit::{self, Origin};
use crate::store::traced::traced;
use crate::store::write::chains::register_as;
use crate::store::write::executions::check_place as check_execution_place;
use crate::store::write::feed;
use crate::store::write::id_taken;
use crate::store::write::interactions::{SentMessages, check_sent_messages, next_attempt};
use crate::store::write::messages::{check_calls, insert_calls};
use crate::store::write::sessions::refused_insert;
use crate::store::write::stages::check_place as check_stage_place;
use crate::store::write::timeline::check_links;
use crate::store::{
    ChatRow, ChatUserMessageRow, ExecutionRow, Key, LlmInteractionRow, LlmPayloadRow,
    LlmRequestRow, McpInteractionRow, McpPayloadRow, MessageRow, NotificationRow, SessionRow,
    SessionStatusChangeRow, StageRow, TimelineEventRow, requested_calls,
};

/// A record the restore inserts whole, as one row.
trait Row {
    fn id(&self) -> Uuid;
    fn insert(&self) -> QueryBuilder<'_, Postgres>;
}

/// Implements [`Row`] from a table and its columns: the fields of the record with the same
/// names, or for a record in parts, `part.column` (the tuple's part that holds it).
macro_rules! row {
    ($record:ty, $table:literal, [$($column:ident),+] $(, $then:literal)?) => {
        impl Row for $record {
            fn id(&self) -> Uuid {
                self.id
            }
            fn insert(&self) -> QueryBuilder<'_, Postgres> {
                let mut query = QueryBuilder::new(concat!(
                    "INSERT INTO ", $table, " (", stringify!($($column),+), ") VALUES ("
                ));
                let mut values = query.separated(", ");
                $(values.push_bind(&self.$column);)+
                values.push_unseparated(concat!(")" $(, " ", $then)?));
                query
            }
        }
    };
    ($record:ty, $table:literal, [$($part:tt . $column:ident),+]) => {
        impl Row for $record {
            fn id(&self) -> Uuid {
                self.0.id
            }
            fn insert(&self) -> QueryBuilder<'_, Postgres> {
                let mut query = QueryBuilder::new(concat!(
                    "INSERT INTO ", $table, " (", stringify!($($column),+), ") VALUES ("
                ));
                let mut values = query.separated(", ");
                $(values.push_bind(&self.$part.$column);)+
                values.push_unseparated(")");
                query
            }
        }
    };
}

// A session already there keeps what it has. The generated `duration_ms` and the search
// documents the triggers keep are not written.
row!(
    SessionRow,
    "sessions",
    [
        id,
        alert_type,
        alert_data,
        status,
        chain_id,
        author,
        runbook_url,
        final_analysis,
        executive_summary,
        error_message,
        started_at,
        completed_at,
        created_at,
        updated_at,
        deleted_at,
        created_by,
        chain_version,
        chain_overrides
    ],
    "ON CONFLICT (id) DO NOTHING"
);
row!(
    ChatRow,
    "chats",
    [
        id, session_id, created_by, title, created_at, updated_at, deleted_at, deleted_by
    ]
);
row!(
    ChatUserMessageRow,
    "chat_user_messages",
    [
        id, chat_id, session_id, content, author, created_at, created_by
    ]
);
row!(
    StageRow,
    "stages",
    [
        id,
        session_id,
        stage_name,
        stage_index,
        expected_agent_count,
        parallel_type,
        success_policy,
        status,
        started_at,
        completed_at,
        duration_ms,
        error_message,
        chat_id,
        chat_user_message_id,
        created_at,
        updated_at
    ]
);
row!(
    ExecutionRow,
    "agent_executions",
    [
        id,
        stage_id,
        session_id,
        parent_execution_id,
        agent_name,
        agent_index,
        status,
        started_at,
        completed_at,
        duration_ms,
        error_message,
        iteration_strategy,
        llm_provider,
        llm_model,
        created_at,
        updated_at,
        agent_type,
        team_name,
        task,
        result_summary,
        depth
    ]
);
row!(
    MessageRow,
    "messages",
    [
        id,
        session_id,
        stage_id,
        execution_id,
        sequence_number,
        role,
        content,
        tool_call_id,
        tool_name,
        tool_calls,
        created_at
    ]
);
row!(
    (LlmInteractionRow, LlmRequestRow, LlmPayloadRow),
    "llm_interactions",
    [
        0.id,
        0.session_id,
        0.stage_id,
        0.execution_id,
        0.interaction_type,
        0.model_name,
        0.last_message_id,
        1.llm_request,
        2.llm_response,
        2.thinking_content,
        2.response_metadata,
        0.input_tokens,
        0.output_tokens,
        0.total_tokens,
        0.thinking_tokens,
        0.estimated_cost_usd,
        0.duration_ms,
        0.error_message,
        0.created_at,
        // The cost as it was computed (or sent): a restore never prices anything again.
        0.cached_input_tokens,
        0.input_cost_usd,
        0.output_cost_usd,
        0.cost_source,
        0.pricing_snapshot,
        0.sent_message_ids
    ]
);
row!(
    (McpInteractionRow, McpPayloadRow),
    "mcp_interactions",
    [
        0.id,
        0.session_id,
        0.stage_id,
        0.execution_id,
        0.interaction_type,
        0.server_name,
        0.tool_name,
        1.tool_arguments,
        1.tool_result,
        1.available_tools,
        0.duration_ms,
        0.error_message,
        0.created_at,
        0.tool_call_id,
        0.attempt
    ]
);
row!(
    TimelineEventRow,
    "timeline_events",
    [
        id,
        session_id,
        stage_id,
        execution_id,
        sequence_number,
        event_type,
        status,
        content,
        metadata,
        llm_interaction_id,
        mcp_interaction_id,
        created_at,
        updated_at
    ]
);

// By hand: its `type` column is no Rust field name.
impl Row for NotificationRow {
    fn id(&self) -> Uuid {
        self.id
    }
    fn insert(&self) -> QueryBuilder<'_, Postgres> {
        let mut query = QueryBuilder::new(
            "INSERT INTO notifications (session_id, id, type, destination, status, \
             integration_data, attempts, max_attempts, next_attempt_at, claim_id, last_error, \
             created_at, sent_at, delivered_at, failed_at, chat_question_id) VALUES (",
        );
        let mut values = query.separated(", ");
        values.push_bind(self.session_id);
        values.push_bind(self.id);
        values.push_bind(self.notification_type);
        values.push_bind(&self.destination);
        values.push_bind(self.status);
        values.push_bind(&self.integration_data);
        values.push_bind(self.attempts);
        values.push_bind(self.max_attempts);
        values.push_bind(self.next_attempt_at);
        values.push_bind(self.claim_id);
        values.push_bind(&self.last_error);
        values.push_bind(self.created_at);
        values.push_bind(self.sent_at);
        values.push_bind(self.delivered_at);
        values.push_bind(self.failed_at);
        values.push_bind(self.chat_question_id);
        values.push_unseparated(")");
        query
    }
}

/// Inserts a row; says how many it wrote (0 for a session already there). An id another
/// record holds is refused.
async fn insert(conn: &mut PgConnection, row: &impl Row) -> Result<usize> {
    let done = row
        .insert()
        .build()
        .execute(traced(conn))
        .await
        .map_err(|e| id_taken(e, row.id()))?;
    Ok(done.rows_affected() as usize)
}

row!(
    AuditRecordRow,
    "session_audit_records",
    [
        session_id,
        id,
        at,
        actor,
        action,
        target_type,
        target_id,
        request_id,
        client_address,
        user_agent,
        changes
    ],
    "ON CONFLICT DO NOTHING"
);

/// Inserts the records table by table, parents first (the foreign keys are checked row by
/// row), in the order given within each; only the records of the sessions it inserts. Returns
/// how many rows it wrote.
/// Writes `records` as `origin` restores them: each chain version and session it adds is
/// audited as created by it (the rows under a session are its history, not changes).
pub(super) async fn write(
    conn: &mut PgConnection,
    records: &Records,
    origin: &Origin,
) -> Result<usize> {
    let mut new = 0;
    for chain in &records.chains {
        let registered = async { register_as(conn, &new_chain(chain)?, chain).await }
            .await
            .map_err(refused(chain))?;
        if registered {
            audit::record(conn, origin, &audit::created(chain)).await?;
        }
        new += usize::from(registered);
    }
    let mut fresh = HashSet::new();
    for session in &records.sessions {
        let inserted = session
            .insert()
            .build()
            .execute(traced(&mut *conn))
            .await
            .map_err(|e| refused_insert(e, session.id, session.chain()))
            .map_err(refused(session))?;
        if inserted.rows_affected() == 1 {
            // Its creation is recorded and fed now: a history restored below replaces it.
            feed::feed(conn, &[session.id]).await?;
            audit::record(conn, origin, &audit::created(session)).await?;
            fresh.insert(session.id);
        }
    }
    new += fresh.len();
    let fresh = |session_id: &Uuid| fresh.contains(session_id);
    for chat in records.chats.iter().filter(|c| fresh(&c.session_id)) {
        new += insert(conn, chat).await.map_err(refused(chat))?;
    }
    for question in records
        .chat_messages
        .iter()
        .filter(|q| fresh(&q.session_id))
    {
        new += insert(conn, question).await.map_err(refused(question))?;
    }
    let mut stages = HashMap::new();
    for stage in records.stages.iter().filter(|s| fresh(&s.session_id)) {
        new += async {
            check_stage_place(conn, &new_stage(stage)).await?;
            insert(conn, stage).await
        }
        .await
        .map_err(refused(stage))?;
        stages.insert(stage.id, stage);
    }
    for execution in records.executions.iter().filter(|e| fresh(&e.session_id)) {
        new += async {
            check_execution_place(conn, stages[&execution.stage_id], &new_execution(execution))
                .await?;
            insert(conn, execution).await
        }
        .await
        .map_err(refused(execution))?;
    }
    for message in records.messages.iter().filter(|m| fresh(&m.session_id)) {
        new += async {
            let calls = message.tool_calls.as_ref().map(json).transpose()?;
            let requested = calls.as_ref().map(requested_calls).unwrap_or_default();
            let answers = message.tool_call_id.as_deref();
            let conversation = Key::new(message.session_id, message.execution_id);
            check_calls(conn, conversation, answers, &requested).await?;
            let inserted = insert(conn, message).await?;
            Ok(inserted + insert_calls(conn, message, &requested).await? as usize)
        }
        .await
        .map_err(refused(message))?;
    }
    for llm in records
        .llm_interactions
        .iter()
        .filter(|l| fresh(&l.0.session_id))
    {
        let row = &llm.0;
        new += async {
            let conversation = Key::new(row.session_id, row.execution_id);
            let stored = SentMessages {
                last_message_id: row.last_message_id,
                selection: row.sent_message_ids.clone(),
            };
            let sent = row.sent_message_ids.as_deref();
            if check_sent_messages(conn, conversation, row.last_message_id, sent).await? != stored {
                return Err(Error::bad_input(
                    "its `sent_message_ids` are the conversation up to its last message: the \
                     live writer stores them as null"
                        .to_owned(),
                ));
            }
            insert(conn, llm).await
        }
        .await
        .map_err(refused(row))?;
    }
    for mcp in records
        .mcp_interactions
        .iter()
        .filter(|m| fresh(&m.0.session_id))
    {
        let row = &mcp.0;
        new += async {
            // Attempts are restored in order, each numbered as the live writer numbered it.
            let conversation = Key::new(row.session_id, row.execution_id);
            let next = next_attempt(conn, conversation, row.tool_call_id.as_deref()).await?;
            if row.attempt != next {
                return Err(Error::bad_input(format!(
                    "it is attempt {} at its tool call, but the next attempt is {next}",
                    row.attempt
                )));
            }
            insert(conn, mcp).await
        }
        .await
        .map_err(refused(row))?;
    }
    for event in records
        .timeline_events
        .iter()
        .filter(|e| fresh(&e.session_id))
    {
        new += async {
            let (llm, mcp) = (event.llm_interaction_id, event.mcp_interaction_id);
            check_links(conn, event.session_id, llm, mcp).await?;
            insert(conn, event).await
        }
        .await
        .map_err(refused(event))?;
    }
    for notification in records
        .notifications
        .iter()
        .filter(|n| fresh(&n.session_id))
    {
        new += insert(conn, notification)
            .await
            .map_err(refused(notification))?;
    }
    let mut histories: HashMap<Uuid, Vec<&SessionStatusChangeRow>> = HashMap::new();
    for change in records
        .status_history
        .iter()
        .filter(|c| fresh(&c.session_id))
    {
        histories.entry(change.session_id).or_default().push(change);
    }
    for (session, changes) in histories {
        new += replace_history(conn, session, &changes).await?;
    }
    for record in records
        .audit
        .iter()
        .filter(|r| r.session_id.is_some_and(|s| fresh(&s)))
    {
        new += insert(conn, record).await.map_err(refused(record))?;
    }
    Ok(new)
}

/// `session`'s status history as `changes` says, in place of the entry its insert recorded:
/// each change keeps its id, and takes the feed's next position (the feed orders changes as
/// this database saw them).
async fn replace_history(
    conn: &mut PgConnection,
    session: Uuid,
    changes: &[&SessionStatusChangeRow],
) -> Result<usize> {
    // Feeding the session's creation took the feed's lock, held to the commit: positions taken
    // here follow every committed one.
    sqlx::query(
        "WITH feed AS (DELETE FROM session_feed WHERE session_id = $1) \
         DELETE FROM session_status_changes WHERE session_id = $1",
    )
    .bind(session)
    .execute(traced(&mut *conn))
    .await?;
    for change in changes {
        sqlx::query(
            "WITH next AS (SELECT coalesce(max(position), 0) + 1 AS position FROM session_feed), \
                  change AS (INSERT INTO session_status_changes (id, session_id, action, \
                      from_status, to_status, actor, reason, changed_at, feed_position) \
                  SELECT $1, $2, $3, $4, $5, $6, $7, $8, position FROM next \
                  RETURNING id, feed_position) \
             INSERT INTO session_feed (position, session_id, change_id) \
             SELECT feed_position, $2, id FROM change",
        )
        .bind(change.id)
        .bind(session)
        .bind(change.action)
        .bind(change.from_status)
        .bind(change.to_status)
        .bind(&change.actor)
        .bind(&change.reason)
        .bind(change.changed_at)
        .execute(traced(&mut *conn))
        .await?;
    }
    // Ids kept: the sequence moves past them, so a change recorded here later takes a new one.
    sqlx::query(
        "SELECT setval(pg_get_serial_sequence('session_status_changes', 'id'), \
             greatest((SELECT max(id) FROM session_status_changes), \
                      (SELECT last_value FROM session_status_changes_id_seq)))",
    )
    .execute(traced(&mut *conn))
    .await?;
    Ok(changes.len())
}
