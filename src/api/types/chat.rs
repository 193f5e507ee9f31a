use std::sync::Arc;

use crate::api::cost;
use crate::api::scalars::Text;
use async_graphql::{Context, Enum, ID, Object};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::connection::{self, ChatQuestionConnection};
use super::{Session, Stage, TimelineEvent, loaders, required};
use crate::api::ids::{self, NodeType};
use crate::api::pagination::PageArgs;
use crate::model::StageStatus;
use crate::store::{ChatRow, ChatUserMessageRow, InSession as _, Key};
use async_graphql::Result;

/// Where a chat stands: how its latest question fared.
#[derive(Enum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum ChatStatus {
    /// No question has been asked yet.
    New,
    /// The latest question is being answered (its stage is pending or active).
    Answering,
    /// The latest question was answered (its stage completed).
    Answered,
    /// Answering the latest question failed or timed out.
    Failed,
    /// Answering the latest question was cancelled.
    Cancelled,
}

impl From<Option<StageStatus>> for ChatStatus {
    /// The status of a chat whose latest stage has this status (none: no question yet).
    fn from(latest: Option<StageStatus>) -> Self {
        match latest {
            None => ChatStatus::New,
            Some(StageStatus::Pending | StageStatus::Active) => ChatStatus::Answering,
            Some(StageStatus::Completed) => ChatStatus::Answered,
            Some(StageStatus::Failed | StageStatus::TimedOut) => ChatStatus::Failed,
            Some(StageStatus::Cancelled) => ChatStatus::Cancelled,
        }
    }
}

pub struct Chat(pub Arc<ChatRow>);

/// A follow-up conversation on a finished session; each question is answered by a new stage.
/// Whoever reads the session reads its chats (their questions and answers are in the session's
/// timeline); only a chat's owner or an admin posts in it, renames, deletes or restores it.
#[Object]
impl Chat {
    /// Global ID.
    pub async fn id(&self) -> ID {
        ids::encode(NodeType::Chat, self.0.id)
    }
    /// Database id (UUIDv7).
    async fn uuid(&self) -> Uuid {
        self.0.id
    }
    /// Who opened the chat, and so owns it (only they, or an admin, post in it): `token:NAME`
    /// or a person's user from the SSO proxy once authentication is on.
    async fn created_by(&self) -> Option<Text<'_>> {
        self.0.created_by.as_deref().map(Text)
    }
    /// Its title (1–200 characters), given by `openChat` or later by `renameChat`; null when
    /// it has none.
    async fn title(&self) -> Option<Text<'_>> {
        self.0.title.as_deref().map(Text)
    }
    /// When it was opened.
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    /// Its latest activity: when it was opened, the latest question was asked, or the latest
    /// answer ended (a rename does not count). `chats` lists the most recent first.
    async fn updated_at(&self) -> DateTime<Utc> {
        self.0.updated_at
    }
    /// Where it stands: how its latest question fared.
    async fn status(&self, ctx: &Context<'_>) -> Result<ChatStatus> {
        let latest = loaders(ctx)
            .latest_stage_by_chat
            .load_one(self.0.key())
            .await?;
        Ok(ChatStatus::from(latest.map(|stage| stage.status)))
    }
    /// The session it follows up on.
    async fn session(&self, ctx: &Context<'_>) -> Result<Session> {
        let row = loaders(ctx).sessions.load_one(self.0.session_id).await?;
        Ok(Session(required(row, "session")?))
    }
    /// When its owner or an admin deleted it (`deleteChat`); null while it is not deleted. A
    /// deleted chat is left out of `chats` and `Session.chatsConnection` unless they are given
    /// `includeDeleted: true`, takes no question and no rename, and is still read by id.
    async fn deleted_at(&self) -> Option<DateTime<Utc>> {
        self.0.deleted_at
    }
    /// Who deleted it (null while it is not deleted, and under `--auth none`).
    async fn deleted_by(&self) -> Option<Text<'_>> {
        self.0.deleted_by.as_deref().map(Text)
    }
    /// How many questions were asked in it.
    #[graphql(complexity = "cost::aggregate(cost::ROLL_UP, child_complexity)")]
    async fn question_count(&self, ctx: &Context<'_>) -> Result<i64> {
        let count = loaders(ctx)
            .question_counts_by_chat
            .load_one(self.0.key())
            .await?;
        Ok(count.unwrap_or(0))
    }
    /// The questions asked, oldest first, a page at a time.
    #[graphql(complexity = "cost::page(first, last, child_complexity)")]
    async fn questions_connection(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "The first this many questions after `after` (and before `before`); at most the server's maximum page size. Without `first` and `last`, the first 20. Give `first` or `last`, not both."
        )]
        first: Option<i32>,
        #[graphql(desc = "Only questions after this cursor.")] after: Option<String>,
        #[graphql(
            desc = "The last this many questions before `before` (and after `after`); at most the server's maximum page size. Give `first` or `last`, not both."
        )]
        last: Option<i32>,
        #[graphql(desc = "Only questions before this cursor.")] before: Option<String>,
    ) -> Result<ChatQuestionConnection> {
        let args = PageArgs {
            first,
            after,
            last,
            before,
        };
        connection::questions(ctx, self.0.key(), args).await
    }
    /// The questions asked, oldest first.
    #[graphql(
        complexity = "cost::list(cost::rows::QUESTIONS_PER_CHAT, child_complexity)",
        deprecation = "Unbounded: use `questionsConnection`, which pages and counts. Removed in the next release."
    )]
    async fn messages(&self, ctx: &Context<'_>) -> Result<Vec<ChatUserMessage>> {
        let rows = loaders(ctx)
            .user_messages_by_chat
            .load_one(self.0.key())
            .await?;
        Ok(rows
            .unwrap_or_default()
            .into_iter()
            .map(ChatUserMessage)
            .collect())
    }
}

pub struct ChatUserMessage(pub Arc<ChatUserMessageRow>);

/// A question a person asked in a chat (1 to 5,000 characters, not only whitespace).
#[Object]
impl ChatUserMessage {
    /// Global ID.
    pub async fn id(&self) -> ID {
        ids::encode(NodeType::ChatUserMessage, self.0.id)
    }
    /// Database id (UUIDv7).
    async fn uuid(&self) -> Uuid {
        self.0.id
    }
    /// The question.
    async fn content(&self) -> Text<'_> {
        Text(&self.0.content)
    }
    /// Who asked, as a display name.
    async fn author(&self) -> Option<Text<'_>> {
        self.0.author.as_deref().map(Text)
    }
    /// The identity that posted it: `token:NAME` or a person's user from the SSO proxy (null
    /// under `--auth none` unless given).
    async fn created_by(&self) -> Option<Text<'_>> {
        self.0.created_by.as_deref().map(Text)
    }
    /// When it was asked.
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    /// The chat it was asked in.
    async fn chat(&self, ctx: &Context<'_>) -> Result<Chat> {
        let chat = Key::new(self.0.session_id, self.0.chat_id);
        let row = loaders(ctx).chats.load_one(chat).await?;
        Ok(Chat(required(row, "chat")?))
    }
    /// The stage that answers it (null until the answer starts).
    async fn stage(&self, ctx: &Context<'_>) -> Result<Option<Stage>> {
        Ok(loaders(ctx)
            .stage_by_chat_user_message
            .load_one(self.0.key())
            .await?
            .map(Stage))
    }
    /// Whether it is still being answered (its stage is pending or active). Follow the
    /// stage's timeline to watch the answer stream in.
    async fn answering(&self, ctx: &Context<'_>) -> Result<bool> {
        let stage = loaders(ctx)
            .stage_by_chat_user_message
            .load_one(self.0.key())
            .await?;
        Ok(stage.is_some_and(|s| matches!(s.status, StageStatus::Pending | StageStatus::Active)))
    }
    /// The answer: the final response of its answering stage (the last finished
    /// `LLM_RESPONSE` or `FINAL_ANALYSIS` event of the stage's timeline), once the stage has
    /// completed. Null while it is being answered, and when answering failed, timed out or was
    /// cancelled (the stage's `errorMessage` says why).
    async fn answer(&self, ctx: &Context<'_>) -> Result<Option<TimelineEvent>> {
        Ok(loaders(ctx)
            .answer_by_chat_user_message
            .load_one(self.0.key())
            .await?
            .map(TimelineEvent))
    }
}
