use std::sync::Arc;

use async_graphql::connection::PageInfo;
use async_graphql::{ComplexObject, Context, ID, Object, SimpleObject};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::SessionHistoryEntry;
use super::connection::{self, ChatConnection};
use super::scoped::{ScopedCalls, ScopedTimeline, Under};
use super::search::{EdgeSearch, SearchMatch};
use super::{
    AgentExecution, Chain, EventFilterInput, Notification, SessionCounts, SessionEventConnection,
    ShareLink, Stage, loaders, required,
};
use crate::api::Limits;
use crate::api::cost;
use crate::api::guards::RoleGuard;
use crate::api::ids::{self, NodeType};
use crate::api::pagination::PageArgs;
use crate::api::scalars::{JsonRef, Text};
use crate::cursor::EventsPosition;
use crate::live::event_pages;
use crate::model::{Role, SessionStatus};
use crate::store::chains::ChainSessions;
use crate::store::sessions::SessionFilter;
use crate::store::{SearchMatchKey, SessionRow, Store};
use async_graphql::Result;

/// A page of sessions.
#[derive(SimpleObject)]
#[graphql(complex)]
pub struct SessionConnection {
    /// The sessions of this page, each with its cursor.
    pub edges: Vec<SessionEdge>,
    /// Where this page is: whether sessions lie before and after it, and the cursors to page on
    /// from either end.
    pub page_info: PageInfo,
    #[graphql(skip)]
    pub count: SessionCount,
}

/// What a page of sessions counts in `totalCount`.
pub enum SessionCount {
    /// The sessions a filter matches (`sessions`).
    Matching(Box<SessionFilter>),
    /// The sessions that ran a chain version (`Chain.sessionsConnection`): counted for every
    /// chain of the level at once.
    OfChain(ChainSessions),
}

/// A session and its cursor.
#[derive(SimpleObject)]
#[graphql(complex)]
pub struct SessionEdge {
    /// Pass as `after` or `before` (with the same `orderBy`) to page on after or before this
    /// session.
    pub cursor: String,
    /// The session.
    pub node: Session,
    #[graphql(skip)]
    pub search: Option<EdgeSearch>,
}

/// Most matches one edge lists.
const MAX_MATCHES: i32 = 20;

#[ComplexObject]
impl SessionEdge {
    /// How well the session matches the filter's `search` (what `RELEVANCE` orders by; null
    /// without a search).
    async fn search_rank(&self) -> Option<f32> {
        self.search.as_ref().map(|s| s.rank)
    }
    /// Where the filter's `search` matched this session, best first: its fields and finished
    /// timeline events, each with a fragment of its text around the words found (empty without
    /// a search).
    #[graphql(complexity = "cost::list(first.clamp(0, MAX_MATCHES) as usize, child_complexity)")]
    async fn matches(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "How many (at most 20).", default = 3)] first: i32,
    ) -> Result<Vec<SearchMatch>> {
        let Some(search) = &self.search else {
            return Ok(Vec::new());
        };
        if !(0..=MAX_MATCHES).contains(&first) {
            return Err(crate::error::Error::bad_input(format!(
                "`first` must be between 0 and {MAX_MATCHES}, got {first}"
            ))
            .into());
        }
        let key = SearchMatchKey {
            session: self.node.0.id,
            words: search.words.clone(),
            first: first.into(),
        };
        let rows = loaders(ctx).search_matches.load_one(key).await?;
        Ok(rows
            .unwrap_or_default()
            .into_iter()
            .map(SearchMatch::from)
            .collect())
    }
}

#[ComplexObject]
impl SessionConnection {
    /// How many sessions the list holds, across all pages.
    #[graphql(complexity = "cost::aggregate(cost::COUNT, child_complexity)")]
    async fn total_count(&self, ctx: &Context<'_>) -> Result<i64> {
        Ok(match &self.count {
            SessionCount::Matching(filter) => {
                ctx.data_unchecked::<Store>().count_sessions(filter).await?
            }
            SessionCount::OfChain(sessions) => loaders(ctx)
                .session_counts_by_chain
                .load_one(sessions.clone())
                .await?
                .unwrap_or_default(),
        })
    }
}

pub struct Session(pub Arc<SessionRow>);

/// One investigation of one alert: a chain of stages run by agents.
///
/// Status: created `PENDING`; `IN_PROGRESS` once started; it ends `COMPLETED`, `FAILED` or
/// `TIMED_OUT`, or — after a cancellation request (`CANCELLING`) — `CANCELLED`.
#[Object]
impl Session {
    /// Global ID.
    pub async fn id(&self) -> ID {
        ids::encode(NodeType::Session, self.0.id)
    }
    /// Database id (UUIDv7).
    async fn uuid(&self) -> Uuid {
        self.0.id
    }
    /// Kind of alert investigated (e.g. `PodCrashLooping`).
    async fn alert_type(&self) -> Text<'_> {
        Text(&self.0.alert_type)
    }
    /// The alert as received.
    async fn alert_data(&self) -> JsonRef<'_> {
        JsonRef(&self.0.alert_data)
    }
    /// Where the session is in its lifecycle.
    async fn status(&self) -> SessionStatus {
        self.0.status
    }
    /// The name of the chain (sequence of stages) that processes it: `chain.name` when it
    /// names a registered version, otherwise the only record of its chain.
    async fn chain_id(&self) -> Text<'_> {
        Text(&self.0.chain_id)
    }
    /// The registered chain version it ran (its definition and `stageCount`); null for a
    /// session created with a chain name (`chainId`) only, as every session from before chain
    /// versions was.
    async fn chain(&self, ctx: &Context<'_>) -> Result<Option<Chain>> {
        let Some(key) = self.0.chain() else {
            return Ok(None);
        };
        let row = loaders(ctx).chains_by_key.load_one(key).await?;
        // A version is never deleted (the foreign key holds it), so it is there.
        Ok(Some(Chain(required(row, "a session's chain version")?)))
    }
    /// What this session changed of its chain version's settings, as sent to `createSession`
    /// (null without any).
    async fn chain_overrides(&self) -> Option<JsonRef<'_>> {
        self.0.chain_overrides.as_ref().map(JsonRef)
    }
    /// Who or what submitted the alert.
    async fn author(&self) -> Option<Text<'_>> {
        self.0.author.as_deref().map(Text)
    }
    /// The identity that created it: `token:NAME` for an API token, the user for a person
    /// signed in through the SSO proxy (null under `--auth none` unless given).
    async fn created_by(&self) -> Option<Text<'_>> {
        self.0.created_by.as_deref().map(Text)
    }
    /// Every status change, delete and restore, oldest first: from, to, who and why.
    #[graphql(complexity = "cost::list(cost::rows::STATUS_CHANGES, child_complexity)")]
    async fn status_history(&self, ctx: &Context<'_>) -> Result<Vec<SessionHistoryEntry>> {
        let rows = loaders(ctx)
            .status_changes_by_session
            .load_one(self.0.id)
            .await?;
        Ok(rows
            .unwrap_or_default()
            .into_iter()
            .map(SessionHistoryEntry)
            .collect())
    }
    /// Runbook the agents follow.
    async fn runbook_url(&self) -> Option<Text<'_>> {
        self.0.runbook_url.as_deref().map(Text)
    }
    /// The investigation's conclusion.
    async fn final_analysis(&self) -> Option<Text<'_>> {
        self.0.final_analysis.as_deref().map(Text)
    }
    /// A short summary of the conclusion.
    async fn executive_summary(&self) -> Option<Text<'_>> {
        self.0.executive_summary.as_deref().map(Text)
    }
    /// Why it failed or timed out.
    async fn error_message(&self) -> Option<Text<'_>> {
        self.0.error_message.as_deref().map(Text)
    }
    /// When processing started.
    async fn started_at(&self) -> Option<DateTime<Utc>> {
        self.0.started_at
    }
    /// When it reached a final status.
    async fn completed_at(&self) -> Option<DateTime<Utc>> {
        self.0.completed_at
    }
    /// Milliseconds from start to completion (null until both are known).
    async fn duration_ms(&self) -> Option<i64> {
        self.0.duration_ms
    }
    /// When it was created.
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    /// When it last changed.
    async fn updated_at(&self) -> DateTime<Utc> {
        self.0.updated_at
    }
    /// When it was soft-deleted (deleted sessions are hidden from `sessions` unless asked for).
    async fn deleted_at(&self) -> Option<DateTime<Utc>> {
        self.0.deleted_at
    }
    /// Its notifications, oldest first, with where each one's delivery stands.
    #[graphql(complexity = "cost::list(cost::rows::NOTIFICATIONS_PER_SESSION, child_complexity)")]
    async fn notifications(&self, ctx: &Context<'_>) -> Result<Vec<Notification>> {
        let rows = loaders(ctx)
            .notifications_by_session
            .load_one(self.0.id)
            .await?;
        Ok(rows
            .unwrap_or_default()
            .into_iter()
            .map(Notification)
            .collect())
    }
    /// The stages of its chain (and of its chats), by stage index.
    #[graphql(complexity = "cost::list(cost::rows::STAGES_PER_SESSION, child_complexity)")]
    async fn stages(&self, ctx: &Context<'_>) -> Result<Vec<Stage>> {
        let rows = loaders(ctx).stages_by_session.load_one(self.0.id).await?;
        Ok(rows.unwrap_or_default().into_iter().map(Stage).collect())
    }
    /// Its whole agent tree, as a flat list in tree order: every execution of every stage, each
    /// right after its parent (siblings by agent index, stages by index), with `parentId` and
    /// `depth` to rebuild the tree from one list.
    #[graphql(complexity = "cost::list(cost::rows::AGENTS_PER_SESSION, child_complexity)")]
    async fn agents(&self, ctx: &Context<'_>) -> Result<Vec<AgentExecution>> {
        let rows = loaders(ctx).agents_by_session.load_one(self.0.id).await?;
        Ok(rows
            .unwrap_or_default()
            .into_iter()
            .map(AgentExecution)
            .collect())
    }
    // The relationships shared with the other levels (`scoped.rs`), in their place here.
    #[graphql(flatten)]
    async fn scoped_timeline(&self) -> ScopedTimeline {
        ScopedTimeline(Under::session(&self.0))
    }
    #[graphql(flatten)]
    async fn scoped_calls(&self) -> ScopedCalls {
        ScopedCalls(Under::session(&self.0))
    }
    /// How many stages, executions, events, messages and interactions it holds.
    #[graphql(complexity = "cost::aggregate(cost::ROLL_UP, child_complexity)")]
    async fn counts(&self, ctx: &Context<'_>) -> Result<SessionCounts> {
        let row = loaders(ctx).counts_by_session.load_one(self.0.id).await?;
        Ok(row.unwrap_or_default().into())
    }
    /// Its share links, oldest first (revoked and expired ones too): who created each, when,
    /// until when, and when it was last used. Operator (a share link does not list links).
    #[graphql(
        guard = "RoleGuard(Role::Operator)",
        complexity = "cost::list(cost::rows::SHARE_LINKS, child_complexity)"
    )]
    async fn share_links(&self, ctx: &Context<'_>) -> Result<Vec<ShareLink>> {
        let rows = loaders(ctx)
            .share_links_by_session
            .load_one(self.0.id)
            .await?;
        Ok(rows
            .unwrap_or_default()
            .into_iter()
            .map(ShareLink)
            .collect())
    }
    /// Its audit trail, oldest first, a page at a time: every control-plane change to it and
    /// under it (its lifecycle, stages, executions, chats, notifications, stream tickets), who
    /// made it and the fields it changed. The client's address and user agent are for admins
    /// (null for other callers).
    #[graphql(complexity = "cost::page(first, last, child_complexity)")]
    async fn audit_log(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "The first this many records after `after` (and before `before`); at most the server's maximum page size. Without `first` and `last`, the first 20. Give `first` or `last`, not both."
        )]
        first: Option<i32>,
        #[graphql(desc = "Only records after this cursor.")] after: Option<String>,
        #[graphql(
            desc = "The last this many records before `before` (and after `after`); at most the server's maximum page size. Give `first` or `last`, not both."
        )]
        last: Option<i32>,
        #[graphql(desc = "Only records before this cursor.")] before: Option<String>,
    ) -> Result<connection::SessionAuditConnection> {
        let args = PageArgs {
            first,
            after,
            last,
            before,
        };
        connection::session_audit(ctx, self.0.id, args).await
    }
    /// Follow-up chats on the finished session, oldest first, a page at a time; deleted chats
    /// only with `includeDeleted`. Every reader of the session reads its chats (their
    /// questions and answers are in its timeline), not only their owners.
    #[graphql(complexity = "cost::page(first, last, child_complexity)")]
    async fn chats_connection(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "The first this many chats after `after` (and before `before`); at most the server's maximum page size. Without `first` and `last`, the first 20. Give `first` or `last`, not both."
        )]
        first: Option<i32>,
        #[graphql(desc = "Only chats after this cursor.")] after: Option<String>,
        #[graphql(
            desc = "The last this many chats before `before` (and after `after`); at most the server's maximum page size. Give `first` or `last`, not both."
        )]
        last: Option<i32>,
        #[graphql(desc = "Only chats before this cursor.")] before: Option<String>,
        #[graphql(
            desc = "Include deleted chats (left out by default, and from `totalCount`).",
            default = false
        )]
        include_deleted: bool,
    ) -> Result<ChatConnection> {
        let args = PageArgs {
            first,
            after,
            last,
            before,
        };
        connection::chats(ctx, self.0.id, include_deleted, args).await
    }
    /// Its event log, a page at a time either way: the `events` subscription's events (without
    /// opening a stream), one per position, in the session's order. Cursors are the
    /// subscription's: an edge's cursor as the subscription's `after` follows on live from right
    /// after it, and a streamed event's cursor pages on from it here.
    #[graphql(complexity = "cost::page(first, last, child_complexity)")]
    async fn events_connection(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "The first this many events after `after` (and before `before`); at most the server's maximum page size. Without `first` and `last`, the first 20. Give `first` or `last`, not both."
        )]
        first: Option<i32>,
        #[graphql(desc = "Only events after this cursor.")] after: Option<String>,
        #[graphql(
            desc = "The last this many events before `before` (and after `after`); at most the server's maximum page size. Give `first` or `last`, not both."
        )]
        last: Option<i32>,
        #[graphql(desc = "Only events before this cursor.")] before: Option<String>,
        #[graphql(desc = "Only these events (all of them when absent), as the subscription's.")]
        filter: Option<EventFilterInput>,
    ) -> Result<SessionEventConnection> {
        let session = self.0.id;
        let args = PageArgs {
            first,
            after,
            last,
            before,
        };
        let slice = args.slice(ctx.data_unchecked::<Limits>(), |cursor| {
            Ok(EventsPosition::decode(cursor, session)?.position)
        })?;
        let filter = filter
            .map(EventFilterInput::into_filter)
            .transpose()?
            .unwrap_or_default();
        let store = ctx.data_unchecked::<Store>();
        let page = event_pages::page(store, session, &filter, &slice).await?;
        Ok(SessionEventConnection::new(
            page,
            session,
            !filter.is_empty(),
        ))
    }
}
