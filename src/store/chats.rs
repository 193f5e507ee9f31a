//! Follow-up chats (seed 002): the chats of sessions and the questions in them, a person's chats
//! across sessions, and where each chat and question stands (its answering stage and answer).

use std::collections::HashMap;
use std::sync::Arc;

use sqlx::{FromRow, Postgres, QueryBuilder};
use uuid::Uuid;

use super::page::{NewestFirst, Page, Slice};
use super::records::timeline_event_columns;
use super::sessions::push_session_not_deleted;
use super::{
    ChatRow, ChatUserMessageRow, InSession, Key, Record as _, RecordKey, StageRow, Store,
    TimelineEventRow, group_by_key, key_columns,
};
use crate::error::Result;

/// Which chats to list across sessions.
#[derive(Debug, Clone, Default)]
pub struct ChatListFilter {
    /// Only the chats this identity opened (all chats when absent).
    pub created_by: Option<String>,
    /// Include deleted chats, and the chats of soft-deleted sessions.
    pub include_deleted: bool,
}

/// The order of the chat list: most recent activity first (a question asked or an answer
/// ended), along `chats_owner_activity_idx` and `chats_activity_idx`.
const BY_ACTIVITY: NewestFirst = NewestFirst {
    table: "chats",
    columns: ChatRow::COLUMNS,
    at: "updated_at",
};

impl Store {
    /// A page of the chats matching `filter`, most recently active first (ties by id).
    pub async fn list_chats(
        &self,
        filter: &ChatListFilter,
        slice: &Slice<RecordKey>,
    ) -> Result<Page<ChatRow>> {
        BY_ACTIVITY
            .fetch(self, &|qb| push_filter(qb, filter), slice)
            .await
    }

    /// How many chats match `filter`.
    pub async fn count_chats(&self, filter: &ChatListFilter) -> Result<i64> {
        let mut qb = QueryBuilder::new("SELECT count(*) FROM chats");
        push_filter(&mut qb, filter);
        Ok(qb
            .build_query_scalar()
            .fetch_one(self.reader().await?.traced())
            .await?)
    }

    /// How PostgreSQL reads a page of the chat list (`EXPLAIN` of the very statement).
    pub async fn explain_chat_list(
        &self,
        filter: &ChatListFilter,
        slice: &Slice<RecordKey>,
    ) -> Result<String> {
        BY_ACTIVITY
            .explain(self, &|qb| push_filter(qb, filter), slice)
            .await
    }

    /// Questions asked in each chat (by key), oldest first.
    pub async fn user_messages_by_chat(
        &self,
        chats: &[Key],
    ) -> Result<HashMap<Key, Vec<Arc<ChatUserMessageRow>>>> {
        let (ids, sessions) = key_columns(chats);
        let rows: Vec<ChatUserMessageRow> = sqlx::query_as(concat!(
            "SELECT m.* FROM ",
            keys_relation!(),
            " JOIN chat_user_messages m ON m.chat_id = k.id AND m.session_id = k.session_id \
             ORDER BY m.session_id, m.chat_id, m.created_at, m.id"
        ))
        .bind(ids)
        .bind(sessions)
        .fetch_all(self.reader().await?.traced())
        .await?;
        Ok(group_by_key(chats, rows, |r| r.chat_id))
    }

    /// How many questions were asked in each chat (by key; every chat asked for is counted,
    /// none as 0).
    pub async fn question_counts_by_chat(&self, chats: &[Key]) -> Result<HashMap<Key, i64>> {
        let (ids, sessions) = key_columns(chats);
        let rows: Vec<(Uuid, Uuid, i64)> = sqlx::query_as(concat!(
            "SELECT k.id, k.session_id, (SELECT count(*) FROM chat_user_messages m \
                 WHERE m.chat_id = k.id AND m.session_id = k.session_id) FROM ",
            keys_relation!()
        ))
        .bind(ids)
        .bind(sessions)
        .fetch_all(self.reader().await?.traced())
        .await?;
        Ok(rows
            .into_iter()
            .map(|(id, session, count)| (Key::new(session, id), count))
            .collect())
    }

    /// The stage that answers each chat question (by key; absent until the answer starts).
    pub async fn stage_by_chat_user_message(
        &self,
        questions: &[Key],
    ) -> Result<HashMap<Key, Arc<StageRow>>> {
        let (ids, sessions) = key_columns(questions);
        let rows: Vec<StageRow> = sqlx::query_as(concat!(
            "SELECT st.* FROM ",
            keys_relation!(),
            " JOIN stages st ON st.chat_user_message_id = k.id AND st.session_id = k.session_id"
        ))
        .bind(ids)
        .bind(sessions)
        .fetch_all(self.reader().await?.traced())
        .await?;
        Ok(by_parent(rows, |r| r.chat_user_message_id))
    }

    /// The latest stage of each chat (by key; the one answering its latest question), which
    /// says where the chat stands; absent for a chat with no question yet.
    pub async fn latest_stage_by_chat(&self, chats: &[Key]) -> Result<HashMap<Key, Arc<StageRow>>> {
        let (ids, sessions) = key_columns(chats);
        let rows: Vec<StageRow> = sqlx::query_as(concat!(
            "SELECT latest.* FROM ",
            keys_relation!(),
            " CROSS JOIN LATERAL (SELECT * FROM stages \
                 WHERE chat_id = k.id AND session_id = k.session_id \
                 ORDER BY stage_index DESC LIMIT 1) latest"
        ))
        .bind(ids)
        .bind(sessions)
        .fetch_all(self.reader().await?.traced())
        .await?;
        Ok(by_parent(rows, |r| r.chat_id))
    }

    /// The answer to each chat question (by key): the last completed response (`llm_response`
    /// or `final_analysis`) of its answering stage, once that stage has completed. Absent
    /// while it is being answered, and when the answer failed.
    pub async fn answer_by_chat_user_message(
        &self,
        questions: &[Key],
    ) -> Result<HashMap<Key, Arc<TimelineEventRow>>> {
        #[derive(FromRow)]
        struct Row {
            question_id: Uuid,
            #[sqlx(flatten)]
            event: TimelineEventRow,
        }
        let (ids, sessions) = key_columns(questions);
        // The stage's events are read backward along `timeline_events_stage_idx`.
        let rows: Vec<Row> = sqlx::query_as(concat!(
            "SELECT st.chat_user_message_id AS question_id, answer.* FROM ",
            keys_relation!(),
            " JOIN stages st ON st.chat_user_message_id = k.id AND st.session_id = k.session_id \
             CROSS JOIN LATERAL (SELECT ",
            timeline_event_columns!(),
            " FROM timeline_events WHERE stage_id = st.id AND session_id = st.session_id \
                 AND event_type IN ('llm_response', 'final_analysis') AND status = 'completed' \
               ORDER BY sequence_number DESC LIMIT 1) answer \
             WHERE st.status = 'completed'"
        ))
        .bind(ids)
        .bind(sessions)
        .fetch_all(self.reader().await?.traced())
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| {
                (
                    Key::new(r.event.session_id, r.question_id),
                    Arc::new(r.event),
                )
            })
            .collect())
    }
}

/// Each row under the parent it names (`parent_of`, within its session).
fn by_parent<R: InSession>(
    rows: Vec<R>,
    parent_of: impl Fn(&R) -> Option<Uuid>,
) -> HashMap<Key, Arc<R>> {
    rows.into_iter()
        .filter_map(|r| Some((Key::new(r.session_id(), parent_of(&r)?), Arc::new(r))))
        .collect()
}

/// The list's conditions, `created_by` first as in the owner's index.
fn push_filter(qb: &mut QueryBuilder<'_, Postgres>, filter: &ChatListFilter) {
    qb.push(" WHERE TRUE");
    if let Some(owner) = &filter.created_by {
        qb.push(" AND created_by = ").push_bind(owner.clone());
    }
    if !filter.include_deleted {
        qb.push(" AND chats.deleted_at IS NULL");
        push_session_not_deleted(qb, "chats");
    }
}
