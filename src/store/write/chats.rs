//! Follow-up chats on a finished session. Each question is answered by a stage of its own.

use serde::Serialize;
use serde_json::json;
use sqlx::PgConnection;
use uuid::Uuid;

use super::stages::{NewStage, ensure_accepts_work};
use super::timeline::NewEvent;
use super::{
    check_name, check_optional, check_required, check_text, ensure_not_deleted, fetch,
    fetch_session, id_taken, is_retry, limits, lock_session, refuse_taken_id,
};
use crate::error::{Error, Result};
use crate::model::{TimelineEventStatus, TimelineEventType};
use crate::store::audit::{self, Origin};
use crate::store::traced::traced;
use crate::store::{ChatRow, ChatUserMessageRow, ExecutionRow};

#[derive(Debug, Clone, Serialize)]
pub struct NewChat {
    pub id: Option<Uuid>,
    pub session_id: Uuid,
    pub created_by: Option<String>,
    /// Left out of the request's hash when absent, so that a retry of an `openChat` made before
    /// titles existed still matches its receipt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

impl NewChat {
    pub(crate) fn check(&self) -> Result<()> {
        check_optional("createdBy", self.created_by.as_deref(), limits::NAME)?;
        check_title(self.title.as_deref())
    }
}

pub async fn open(conn: &mut PgConnection, new: &NewChat, origin: &Origin) -> Result<ChatRow> {
    new.check()?;
    let session = lock_session(conn, new.session_id).await?;
    let id = new.id.unwrap_or_else(Uuid::now_v7);
    if is_retry(conn, new.id, session.id, ("openChat", "chats"), new).await? {
        return fetch::<ChatRow>(conn, session.id, id).await;
    }
    ensure_accepts_work(&session, true, "open a chat")?;
    let chat = sqlx::query_as(
        "INSERT INTO chats (id, session_id, created_by, title) VALUES ($1, $2, $3, $4) RETURNING *",
    )
    .bind(id)
    .bind(session.id)
    .bind(&new.created_by)
    .bind(&new.title)
    .fetch_one(traced(&mut *conn))
    .await
    .map_err(|e| id_taken(e, id))?;
    audit::record(conn, origin, &audit::created(&chat)).await?;
    Ok(chat)
}

/// A chat's title: absent, or 1–200 characters that are not all whitespace.
fn check_title(title: Option<&str>) -> Result<()> {
    title.map_or(Ok(()), |t| check_required("title", t, limits::CHAT_TITLE))
}

/// Gives a chat a new title, or none. Only its owner may (or anyone `who` allows), and not on
/// a deleted session (like every other write). A rename is not activity: the chat keeps its
/// place in the list (`updated_at` stays).
pub async fn rename(
    conn: &mut PgConnection,
    chat_id: Uuid,
    title: Option<&str>,
    who: Poster<'_>,
    origin: &Origin,
) -> Result<ChatRow> {
    check_title(title)?;
    // Not `FOR UPDATE`: a question posted meanwhile (whose foreign key shares the chat's key)
    // need not wait for the rename. The API names the chat by id alone: this finds its
    // session, which every later statement names.
    let chat: ChatRow = sqlx::query_as("SELECT * FROM chats WHERE id = $1 FOR NO KEY UPDATE")
        .bind(chat_id)
        .fetch_optional(traced(&mut *conn))
        .await?
        .ok_or_else(|| Error::not_found(format!("chat {chat_id} does not exist")))?;
    who.check(chat.created_by.as_deref(), "rename", chat_id)?;
    ensure_not_deleted(&fetch_session(conn, chat.session_id).await?)?;
    ensure_chat_not_deleted(&chat)?;
    let renamed =
        sqlx::query_as("UPDATE chats SET title = $3 WHERE id = $1 AND session_id = $2 RETURNING *")
            .bind(chat_id)
            .bind(chat.session_id)
            .bind(title)
            .fetch_one(traced(&mut *conn))
            .await?;
    audit::record(conn, origin, &audit::changed(Some(&chat), &renamed)).await?;
    Ok(renamed)
}

/// Refuses a write to a deleted chat, as a deleted session refuses writes.
fn ensure_chat_not_deleted(chat: &ChatRow) -> Result<()> {
    match chat.deleted_at {
        Some(_) => Err(Error::Conflict(format!(
            "chat {} is deleted; restore it first",
            chat.id
        ))),
        None => Ok(()),
    }
}

/// Whether a chat is deleted or restored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deletion {
    /// Soft-deletes it: hidden from `chats` and `Session.chatsConnection` unless asked for,
    /// still read by id.
    Delete,
    /// Undoes a delete.
    Restore,
}

/// Deletes or restores a chat. Only its owner may (or anyone `who` allows), and not on a
/// deleted session. Deleting a deleted chat, or restoring one that is not, changes nothing (as
/// `deleteSession` and `restoreSession` do). `reason` goes into the audit record.
pub async fn set_deletion(
    conn: &mut PgConnection,
    chat_id: Uuid,
    deletion: Deletion,
    reason: Option<&str>,
    who: Poster<'_>,
    origin: &Origin,
) -> Result<ChatRow> {
    let delete = deletion == Deletion::Delete;
    let action = if delete { "delete" } else { "restore" };
    let chat = lock_owned(conn, chat_id, who, action).await?;
    if chat.deleted_at.is_some() == delete {
        return Ok(chat);
    }
    let changed = sqlx::query_as(
        "UPDATE chats SET deleted_at = CASE WHEN $3 THEN now() END, \
                          deleted_by = CASE WHEN $3 THEN $4 END \
         WHERE id = $1 AND session_id = $2 RETURNING *",
    )
    .bind(chat_id)
    .bind(chat.session_id)
    .bind(delete)
    .bind(&origin.actor)
    .fetch_one(traced(&mut *conn))
    .await?;
    audited(conn, origin, &chat, changed, reason).await
}

/// The chat, once `who` may `act` on it, under its session's lock (which `post` holds while it
/// checks the chat is not deleted) and its own.
async fn lock_owned(
    conn: &mut PgConnection,
    chat_id: Uuid,
    who: Poster<'_>,
    act: &str,
) -> Result<ChatRow> {
    let session_id: Uuid = sqlx::query_scalar("SELECT session_id FROM chats WHERE id = $1")
        .bind(chat_id)
        .fetch_optional(traced(&mut *conn))
        .await?
        .ok_or_else(|| Error::not_found(format!("chat {chat_id} does not exist")))?;
    let session = lock_session(conn, session_id).await?;
    let chat: ChatRow =
        sqlx::query_as("SELECT * FROM chats WHERE id = $1 AND session_id = $2 FOR NO KEY UPDATE")
            .bind(chat_id)
            .bind(session_id)
            .fetch_one(traced(&mut *conn))
            .await?;
    who.check(chat.created_by.as_deref(), act, chat_id)?;
    ensure_not_deleted(&session)?;
    Ok(chat)
}

/// Records the change in the session's audit trail, with the reason given for it.
async fn audited(
    conn: &mut PgConnection,
    origin: &Origin,
    before: &ChatRow,
    after: ChatRow,
    reason: Option<&str>,
) -> Result<ChatRow> {
    let mut change = audit::changed(Some(before), &after);
    if let Some(reason) = reason {
        change.after.push(("reason", json!(reason)));
    }
    audit::record(conn, origin, &change).await?;
    Ok(after)
}

/// A question, and who answers it.
#[derive(Debug, Clone, Serialize)]
pub struct NewChatMessage {
    pub id: Option<Uuid>,
    pub chat_id: Uuid,
    pub content: String,
    pub author: Option<String>,
    /// Who posts it; recorded, and checked against the chat's owner.
    pub created_by: Option<String>,
    /// Ids for the answering stage and its execution (generated when absent).
    pub stage_id: Option<Uuid>,
    pub execution_id: Option<Uuid>,
    pub agent_name: String,
    pub iteration_strategy: String,
    pub llm_provider: Option<String>,
    pub llm_model: Option<String>,
}

/// Validates a chat question as the chat design does: not empty, not only whitespace, at most
/// 5,000 characters.
pub fn validate_question(content: &str) -> Result<()> {
    if content.is_empty() {
        return Err(Error::bad_input("message cannot be empty"));
    }
    if content.trim().is_empty() {
        return Err(Error::bad_input("message cannot be only whitespace"));
    }
    let len = content.chars().count();
    if len > limits::CHAT_MESSAGE {
        return Err(Error::bad_input(format!(
            "message exceeds {} character limit ({len} characters)",
            limits::CHAT_MESSAGE
        )));
    }
    check_text("content", content, limits::CHAT_MESSAGE)
}

/// A question as stored: its text, who asks (a display name) and who posted it.
pub(crate) fn check_question(
    content: &str,
    author: Option<&str>,
    created_by: Option<&str>,
) -> Result<()> {
    validate_question(content)?;
    check_optional("author", author, limits::NAME)?;
    check_optional("createdBy", created_by, limits::NAME)
}

/// Who may post to a chat, or rename it.
#[derive(Debug, Clone, Copy)]
pub enum Poster<'a> {
    /// Anyone (an admin, or no authentication at all).
    Anyone,
    /// Only the chat's owner, if this is them.
    Owner(&'a str),
}

impl<'a> From<Option<&'a str>> for Poster<'a> {
    /// Only this owner, or anyone.
    fn from(owner_only: Option<&'a str>) -> Self {
        owner_only.map_or(Poster::Anyone, Poster::Owner)
    }
}

impl Poster<'_> {
    /// Refuses unless this poster may `act` (a verb) on a chat that `owner` opened.
    fn check(self, owner: Option<&str>, act: &str, chat_id: Uuid) -> Result<()> {
        match self {
            Poster::Owner(poster) if owner != Some(poster) => Err(Error::Forbidden(format!(
                "only the chat's owner ({}) or an admin may {act} chat {chat_id}",
                owner.unwrap_or("nobody")
            ))),
            _ => Ok(()),
        }
    }
}

/// Posts a question: stores it, creates its answering stage (the session's next stage index)
/// with one pending execution, and records the `user_question` timeline event.
pub async fn post(
    conn: &mut PgConnection,
    new: &NewChatMessage,
    poster: Poster<'_>,
    origin: &Origin,
) -> Result<ChatUserMessageRow> {
    check_question(
        &new.content,
        new.author.as_deref(),
        new.created_by.as_deref(),
    )?;
    check_name("agentName", &new.agent_name)?;
    check_required(
        "iterationStrategy",
        &new.iteration_strategy,
        limits::STRATEGY,
    )?;
    check_optional("llmProvider", new.llm_provider.as_deref(), limits::NAME)?;
    check_optional("llmModel", new.llm_model.as_deref(), limits::NAME)?;
    // The API names the chat by id alone: this finds its session, which every later
    // statement names.
    let (session_id, owner): (Uuid, Option<String>) =
        sqlx::query_as("SELECT session_id, created_by FROM chats WHERE id = $1")
            .bind(new.chat_id)
            .fetch_optional(traced(&mut *conn))
            .await?
            .ok_or_else(|| Error::not_found(format!("chat {} does not exist", new.chat_id)))?;
    poster.check(owner.as_deref(), "post to", new.chat_id)?;
    let session = lock_session(conn, session_id).await?;
    let id = new.id.unwrap_or_else(Uuid::now_v7);
    if is_retry(
        conn,
        new.id,
        session_id,
        ("postChatMessage", "chat_user_messages"),
        new,
    )
    .await?
    {
        return fetch::<ChatUserMessageRow>(conn, session_id, id).await;
    }
    ensure_accepts_work(&session, true, "post a chat message")?;
    // Read again under the session's lock, which `deleteChat` takes too: a delete that
    // committed meanwhile is seen.
    let chat: ChatRow = sqlx::query_as("SELECT * FROM chats WHERE id = $1 AND session_id = $2")
        .bind(new.chat_id)
        .bind(session_id)
        .fetch_one(traced(&mut *conn))
        .await?;
    ensure_chat_not_deleted(&chat)?;
    let unanswered: Option<String> = sqlx::query_scalar(
        "SELECT s.stage_name FROM stages s \
         WHERE s.chat_id = $1 AND s.session_id = $2 AND s.status IN ('pending', 'active') LIMIT 1",
    )
    .bind(new.chat_id)
    .bind(session_id)
    .fetch_optional(traced(&mut *conn))
    .await?;
    if unanswered.is_some() {
        return Err(Error::Conflict(format!(
            "chat {} is still answering its previous question",
            new.chat_id
        )));
    }
    let stage_index = next_stage_index(conn, session_id).await?;
    let message: ChatUserMessageRow = sqlx::query_as(
        "INSERT INTO chat_user_messages (id, chat_id, session_id, content, author, created_by) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING *",
    )
    .bind(id)
    .bind(new.chat_id)
    .bind(session_id)
    .bind(&new.content)
    .bind(&new.author)
    .bind(&new.created_by)
    .fetch_one(traced(&mut *conn))
    .await
    .map_err(|e| id_taken(e, id))?;
    sqlx::query("UPDATE chats SET updated_at = now() WHERE id = $1 AND session_id = $2")
        .bind(new.chat_id)
        .bind(session_id)
        .execute(traced(&mut *conn))
        .await?;

    // The answering stage and execution may carry ids the client chose (no receipt of their
    // own: the question's covers the request).
    if let Some(id) = new.stage_id {
        refuse_taken_id(conn, "stages", id).await?;
    }
    if let Some(id) = new.execution_id {
        refuse_taken_id(conn, "agent_executions", id).await?;
    }
    let stage_id = new.stage_id.unwrap_or_else(Uuid::now_v7);
    let stage = NewStage {
        id: Some(stage_id),
        session_id,
        stage_index,
        name: "Chat".to_owned(),
        expected_agent_count: 1,
        parallel_type: None,
        success_policy: None,
        chat_id: Some(new.chat_id),
        chat_user_message_id: Some(id),
    };
    super::stages::insert(conn, stage_id, &stage).await?;
    let execution_id = new.execution_id.unwrap_or_else(Uuid::now_v7);
    let execution: ExecutionRow = sqlx::query_as(
        "INSERT INTO agent_executions (id, stage_id, session_id, agent_name, agent_index, \
            iteration_strategy, llm_provider, llm_model) \
         VALUES ($1, $2, $3, $4, 1, $5, $6, $7) RETURNING *",
    )
    .bind(execution_id)
    .bind(stage_id)
    .bind(session_id)
    .bind(&new.agent_name)
    .bind(&new.iteration_strategy)
    .bind(&new.llm_provider)
    .bind(&new.llm_model)
    .fetch_one(traced(&mut *conn))
    .await
    .map_err(|e| id_taken(e, execution_id))?;
    let question = NewEvent {
        id: None,
        execution_id,
        event_type: TimelineEventType::UserQuestion,
        status: TimelineEventStatus::Completed,
        content: new.content.clone(),
        metadata: json!({ "author": new.author, "chat_id": new.chat_id, "chat_user_message_id": id }),
    };
    super::timeline::insert(
        conn,
        Uuid::now_v7(),
        session_id,
        stage_id,
        execution.id,
        &question,
    )
    .await?;
    audit::record(conn, origin, &audit::created(&message)).await?;
    Ok(message)
}

/// The index of a session's next stage (its chat answers come after everything else). The
/// session is locked by the caller. Past the largest index there is none left.
async fn next_stage_index(conn: &mut PgConnection, session_id: Uuid) -> Result<i32> {
    let last: Option<i32> =
        sqlx::query_scalar("SELECT max(stage_index) FROM stages WHERE session_id = $1")
            .bind(session_id)
            .fetch_one(traced(conn))
            .await?;
    match last {
        None => Ok(0),
        Some(last) => last.checked_add(1).ok_or_else(|| {
            Error::Conflict(format!(
                "session {session_id} has a stage at index {last}, the largest there is: no \
                 index is left for the stage that would answer this question"
            ))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_untitled_chat_hashes_as_before_titles_existed() {
        let chat = NewChat {
            id: None,
            session_id: Uuid::nil(),
            created_by: Some("alice".to_owned()),
            title: None,
        };
        assert_eq!(
            serde_json::to_value(&chat).unwrap(),
            json!({ "id": null, "session_id": Uuid::nil(), "created_by": "alice" })
        );
    }
}
