//! The mutation root: what an orchestrator and its agents record while they work. Every
//! mutation is one transaction: on any error nothing of it is stored.

mod ingest;
mod inputs;
mod retry;
mod share_links;
mod tokens;

use std::sync::Arc;

use async_graphql::{Context, ID, Json, Object, SimpleObject};
use futures::future::BoxFuture;
use sqlx::PgConnection;

use super::guards::{RoleGuard, caller};
use super::ids::{self, NodeType, decode_as};
use super::options::NotificationOptions;
use super::types::{
    AgentExecution, ApiToken, Chain, ChainVersionRef, Chat, ChatUserMessage, LlmInteraction,
    McpInteraction, Message, ModelPrice, Notification, Session, ShareLink, Stage, TimelineEvent,
};
use crate::auth::Authenticator;
use crate::error::Error;
use crate::live::Hub;
use crate::model::{NotificationType, Role};
use crate::observe::metrics::{INGEST_APPENDED_BYTES, INGEST_OPERATIONS};
use crate::observe::request::RequestInfo;
use crate::store::Store;
use crate::store::audit::Origin;
use crate::store::prices::{self, PriceCache};
use crate::store::write::chats::Deletion;
use crate::store::write::locks::Owners;
use crate::store::write::{
    self as write, chats, check_optional, executions, feed, interactions, limits, messages,
    notifications, sessions, stages, timeline,
};
use async_graphql::Result;
pub use ingest::{IngestItem, IngestOperation};
pub use inputs::*;
use uuid::Uuid;

/// A ticket to one session's plain event stream.
#[derive(SimpleObject)]
pub struct EventStreamTicket {
    /// The ticket (secret: it opens the session's event stream until it expires).
    pub ticket: String,
    /// Until when it can be used to connect.
    pub expires_at: chrono::DateTime<chrono::Utc>,
    /// The stream's path on this server, the ticket included.
    pub url: String,
}

/// How a transaction's changes are attributed in the session status history.
pub(crate) enum Audit<'a> {
    /// To the caller.
    Caller,
    /// To the caller, with the reason they gave.
    CallerBecause(Option<&'a str>),
    /// To no one: the changes cannot move a session (appends to a streaming event), so the
    /// statement that would name the caller is saved.
    Nothing,
}

/// Runs `op` on `args` in one transaction: committed when it succeeds, rolled back otherwise.
/// A transaction PostgreSQL aborts for a deadlock or a serialization failure runs again, from
/// the start, a few times (see [`retry`]), so `op` may be called more than once.
pub(crate) async fn transaction<A, T, F>(
    ctx: &Context<'_>,
    audit: Audit<'_>,
    args: A,
    op: F,
) -> Result<T>
where
    A: Sync,
    T: Send,
    F: for<'c> Fn(&'c mut PgConnection, &'c A) -> BoxFuture<'c, crate::error::Result<T>> + Sync,
{
    let actor = caller(ctx)?.actor.as_deref();
    let reason = match audit {
        Audit::CallerBecause(reason) => reason,
        Audit::Caller | Audit::Nothing => None,
    };
    check_optional("reason", reason, limits::REASON)?;
    let audit = !matches!(audit, Audit::Nothing) && (actor.is_some() || reason.is_some());
    let store = ctx.data_unchecked::<Store>();
    let (args, op) = (&args, &op);
    let value = retry::retrying(|| async move {
        // Who and why are transaction-local: named again in every attempt.
        let mut tx = if audit {
            store.begin_naming(actor, reason).await?
        } else {
            store.begin().await?
        };
        let (value, changed) = feed::noting(op(&mut tx, args)).await;
        let value = value?;
        // The status changes it made take their places in the sessions feed as it commits.
        feed::feed(&mut tx, &changed).await?;
        tx.commit().await?;
        Ok(value)
    })
    .await?;
    committed(ctx);
    Ok(value)
}

/// Runs a write that is one statement in the common case: `at_once` on a connection of its
/// own, where the statement commits as it ends and holds its locks only while it runs; when it
/// declines (`None`, having written nothing), `decided` runs in a transaction, as
/// [`transaction`] runs it. `at_once` must change no session's status: it names no caller for
/// the status history.
pub(crate) async fn at_once_or_decided<A, T, F, G>(
    ctx: &Context<'_>,
    args: A,
    at_once: F,
    decided: G,
) -> Result<T>
where
    A: Sync,
    T: Send,
    F: for<'c> Fn(&'c mut PgConnection, &'c A) -> BoxFuture<'c, crate::error::Result<Option<T>>>
        + Sync,
    G: for<'c> Fn(&'c mut PgConnection, &'c A) -> BoxFuture<'c, crate::error::Result<T>> + Sync,
{
    let store = ctx.data_unchecked::<Store>();
    let (args_ref, at_once) = (&args, &at_once);
    let done = retry::retrying(|| async move {
        let mut conn = store.connection().await?;
        at_once(&mut conn, args_ref).await
    })
    .await?;
    match done {
        Some(value) => {
            committed(ctx);
            Ok(value)
        }
        None => transaction(ctx, Audit::Caller, args, decided).await,
    }
}

/// Creates a timeline event (`createTimelineEvent`, `recordSystemNotice`): in one statement
/// when it can, else step by step in a transaction.
async fn create_event(ctx: &Context<'_>, new: timeline::NewEvent) -> Result<TimelineEvent> {
    let row = at_once_or_decided(
        ctx,
        new,
        |c, new| Box::pin(timeline::create_at_once(c, new)),
        |c, new| {
            Box::pin(async move { timeline::create_decided(c, &mut Owners::default(), new).await })
        },
    )
    .await?;
    Ok(TimelineEvent(row.into()))
}

/// Who is calling the running mutation and from where, for its audit record.
fn origin(ctx: &Context<'_>) -> Result<Origin> {
    let request = ctx.data_opt::<RequestInfo>();
    Ok(Origin {
        actor: caller(ctx)?.actor.clone(),
        action: ctx.field().name().to_owned(),
        request_id: request.map(|info| info.id.to_string()),
        client_address: request.and_then(|info| info.client.map(|addr| addr.ip().to_string())),
        user_agent: request.and_then(|info| info.user_agent.as_deref().map(str::to_owned)),
    })
}

/// Counts a mutation that committed, and has its changes delivered.
fn committed(ctx: &Context<'_>) {
    metrics::counter!(INGEST_OPERATIONS, "mutation" => ctx.field().name().to_owned()).increment(1);
    ctx.data_unchecked::<Arc<Hub>>().committed();
}

/// What an append did.
#[derive(SimpleObject)]
pub struct TimelineAppend {
    /// The streaming event.
    pub event_id: ID,
    /// Where the append started (as sent).
    pub offset: i64,
    /// The offset just past this chunk, in characters: the `offset` of the next append.
    pub end: i64,
    /// Characters newly stored (0 when this was a retry of an applied chunk).
    pub applied: i64,
}

/// Records an investigation as it happens. Session status rule: created `PENDING`;
/// `IN_PROGRESS` when started (or when its first agent execution starts); `COMPLETED` on
/// `completeSession` once no execution runs; `FAILED`/`TIMED_OUT` on `failSession`/
/// `timeOutSession` (running executions end with it); `requestSessionCancellation` cancels
/// pending executions and leaves it `CANCELLING` until no execution is active, then
/// `CANCELLED`. Stage status is aggregated from its executions. Repeating a move to the state a
/// record is already in (same values) is a harmless retry; any other move out of a final state
/// is a `CONFLICT` naming the current state. No text or JSON input may hold a NUL character
/// (`\u0000`): PostgreSQL cannot store one.
pub struct Mutation;

/// Records an investigation as it happens. Session status rule: created `PENDING`;
/// `IN_PROGRESS` when started (or when its first agent execution starts); `COMPLETED` on
/// `completeSession` once no execution runs; `FAILED`/`TIMED_OUT` on `failSession`/
/// `timeOutSession` (running executions end with it); `requestSessionCancellation` cancels
/// pending executions and leaves it `CANCELLING` until no execution is active, then
/// `CANCELLED`. Stage status is aggregated from its executions. Repeating a move to the state a
/// record is already in (same values) is a harmless retry; any other move out of a final state
/// is a `CONFLICT` naming the current state. No text or JSON input may hold a NUL character
/// (`\u0000`): PostgreSQL cannot store one.
#[Object]
impl Mutation {
    /// Creates a session from an alert (`PENDING`). Writer.
    #[graphql(guard = "RoleGuard(Role::Writer)")]
    async fn create_session(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "What to record.")] mut input: CreateSessionInput,
    ) -> Result<Session> {
        let created_by = created_by(ctx, input.created_by.take())?;
        let reason = input.reason.take();
        let new = input.into_command(created_by)?;
        let audit = Audit::CallerBecause(reason.as_deref());
        let args = (new, origin(ctx)?);
        let row = transaction(ctx, audit, args, |c, (new, origin)| {
            Box::pin(sessions::create(c, new, origin))
        })
        .await?;
        Ok(Session(row.into()))
    }

    /// Registers a chain version. A version never changes: registering it again with the same
    /// definition (equal as JSON values: key order, whitespace and how a number is written do
    /// not matter; the order of arrays does) returns it and writes nothing; with another
    /// definition it is a `CONFLICT`. Writer.
    #[graphql(guard = "RoleGuard(Role::Writer)")]
    async fn register_chain(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "What to register.")] input: RegisterChainInput,
    ) -> Result<Chain> {
        let new = input.into_command(caller(ctx)?.actor.clone());
        let origin = origin(ctx)?;
        let row = transaction(ctx, Audit::Nothing, (new, origin), |c, (new, origin)| {
            Box::pin(write::chains::register(c, new, origin))
        })
        .await?;
        Ok(Chain(row.into()))
    }

    /// Deprecates a chain version: left out of `chains` unless `includeDeprecated`; the
    /// sessions that ran it keep it, and new sessions may still name it (an orchestrator not
    /// yet upgraded keeps recording what it runs). Deprecating it again changes nothing.
    /// Admin.
    #[graphql(guard = "RoleGuard(Role::Admin)")]
    async fn deprecate_chain(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The chain version.")] chain: ChainVersionRef,
    ) -> Result<Chain> {
        let key = chain.key("chain")?;
        let origin = origin(ctx)?;
        let row = transaction(ctx, Audit::Nothing, (key, origin), |c, (key, origin)| {
            Box::pin(write::chains::deprecate(c, key, origin))
        })
        .await?;
        Ok(Chain(row.into()))
    }

    /// `PENDING` → `IN_PROGRESS`. Writer.
    #[graphql(guard = "RoleGuard(Role::Writer)")]
    async fn start_session(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The session.")] id: ID,
    ) -> Result<Session> {
        let id = decode_as(NodeType::Session, &id)?;
        let args = (id, origin(ctx)?);
        let row = transaction(ctx, Audit::Caller, args, |c, (id, origin)| {
            Box::pin(sessions::start(c, *id, origin))
        })
        .await?;
        Ok(Session(row.into()))
    }

    /// `IN_PROGRESS` → `COMPLETED`, with the conclusion; refused while an execution still runs.
    /// Writer.
    #[graphql(guard = "RoleGuard(Role::Writer)")]
    async fn complete_session(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "What to record.")] input: CompleteSessionInput,
    ) -> Result<Session> {
        let id = decode_as(NodeType::Session, &input.id)?;
        let completion = sessions::Completion {
            final_analysis: input.final_analysis,
            executive_summary: input.executive_summary,
        };
        let notify = NotifyInput::into_new(input.notify, max_attempts(ctx));
        let audit = Audit::CallerBecause(input.reason.as_deref());
        let args = (id, completion, notify, origin(ctx)?);
        let row = transaction(ctx, audit, args, |c, (id, completion, notify, origin)| {
            Box::pin(sessions::complete(c, *id, completion, notify, origin))
        })
        .await?;
        Ok(Session(row.into()))
    }

    /// → `FAILED`, with the error; executions still running fail with it. Writer.
    #[graphql(guard = "RoleGuard(Role::Writer)")]
    async fn fail_session(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "What to record.")] input: FailSessionInput,
    ) -> Result<Session> {
        fail(ctx, input, false).await
    }

    /// → `TIMED_OUT`, with the error; executions still running time out with it. Writer.
    #[graphql(guard = "RoleGuard(Role::Writer)")]
    async fn time_out_session(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "What to record.")] input: FailSessionInput,
    ) -> Result<Session> {
        fail(ctx, input, true).await
    }

    /// Requests cancellation: `CANCELLING` while executions are still active, `CANCELLED` once
    /// none is (pending executions are cancelled at once). Operator.
    #[graphql(guard = "RoleGuard(Role::Operator)")]
    async fn request_session_cancellation(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The session.")] id: ID,
        #[graphql(desc = "Why, for the status history (at most 2,000 characters).")] reason: Option<
            String,
        >,
    ) -> Result<Session> {
        let id = decode_as(NodeType::Session, &id)?;
        let audit = Audit::CallerBecause(reason.as_deref());
        let args = (id, origin(ctx)?);
        let row = transaction(ctx, audit, args, |c, (id, origin)| {
            Box::pin(sessions::request_cancellation(c, *id, origin))
        })
        .await?;
        Ok(Session(row.into()))
    }

    /// Soft-deletes a finished session (hidden from `sessions` unless `includeDeleted`). Admin.
    #[graphql(guard = "RoleGuard(Role::Admin)")]
    async fn delete_session(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The session.")] id: ID,
        #[graphql(desc = "Why, for the status history (at most 2,000 characters).")] reason: Option<
            String,
        >,
    ) -> Result<Session> {
        let id = decode_as(NodeType::Session, &id)?;
        let audit = Audit::CallerBecause(reason.as_deref());
        let args = (id, origin(ctx)?);
        let row = transaction(ctx, audit, args, |c, (id, origin)| {
            Box::pin(sessions::delete(c, *id, origin))
        })
        .await?;
        Ok(Session(row.into()))
    }

    /// Undoes `deleteSession`. Admin.
    #[graphql(guard = "RoleGuard(Role::Admin)")]
    async fn restore_session(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The session.")] id: ID,
        #[graphql(desc = "Why, for the status history (at most 2,000 characters).")] reason: Option<
            String,
        >,
    ) -> Result<Session> {
        let id = decode_as(NodeType::Session, &id)?;
        let audit = Audit::CallerBecause(reason.as_deref());
        let args = (id, origin(ctx)?);
        let row = transaction(ctx, audit, args, |c, (id, origin)| {
            Box::pin(sessions::restore(c, *id, origin))
        })
        .await?;
        Ok(Session(row.into()))
    }

    /// Creates a stage (`PENDING`) in a running session, or a chat stage in a finished one.
    /// Writer.
    #[graphql(guard = "RoleGuard(Role::Writer)")]
    async fn create_stage(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "What to record.")] input: CreateStageInput,
    ) -> Result<Stage> {
        let new = input.into_command()?;
        let args = (new, origin(ctx)?);
        let row = transaction(ctx, Audit::Caller, args, |c, (new, origin)| {
            Box::pin(stages::create(c, new, origin))
        })
        .await?;
        Ok(Stage(row.into()))
    }

    /// Creates an agent execution (`PENDING`) in a stage that has not finished. Writer.
    #[graphql(guard = "RoleGuard(Role::Writer)")]
    async fn create_agent_execution(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "What to record.")] input: CreateAgentExecutionInput,
    ) -> Result<AgentExecution> {
        let new = input.into_command()?;
        let args = (new, origin(ctx)?);
        let row = transaction(ctx, Audit::Caller, args, |c, (new, origin)| {
            Box::pin(
                async move { executions::create(c, &mut Owners::default(), new, origin).await },
            )
        })
        .await?;
        Ok(AgentExecution(row.into()))
    }

    /// `PENDING` → `ACTIVE` (recording anything under a pending execution also starts it).
    /// Writer.
    #[graphql(guard = "RoleGuard(Role::Writer)")]
    async fn start_agent_execution(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "What to record.")] input: StartAgentExecutionInput,
    ) -> Result<AgentExecution> {
        let id = decode_as(NodeType::AgentExecution, &input.id)?;
        let args = (id, origin(ctx)?);
        let row = transaction(ctx, Audit::Caller, args, |c, (id, origin)| {
            Box::pin(async move { executions::start(c, &mut Owners::default(), *id, origin).await })
        })
        .await?;
        Ok(AgentExecution(row.into()))
    }

    /// → a final status; its streaming events end with it and its stage is re-aggregated.
    /// Writer.
    #[graphql(guard = "RoleGuard(Role::Writer)")]
    async fn finish_agent_execution(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "What to record.")] input: FinishAgentExecutionInput,
    ) -> Result<AgentExecution> {
        let finish = input.into_command(max_attempts(ctx))?;
        let args = (finish, origin(ctx)?);
        let row = transaction(ctx, Audit::Caller, args, |c, (finish, origin)| {
            Box::pin(
                async move { executions::finish(c, &mut Owners::default(), finish, origin).await },
            )
        })
        .await?;
        Ok(AgentExecution(row.into()))
    }

    /// Creates a timeline event with the session's next sequence number. Writer.
    #[graphql(guard = "RoleGuard(Role::Writer)")]
    async fn create_timeline_event(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "What to record.")] input: CreateTimelineEventInput,
    ) -> Result<TimelineEvent> {
        create_event(ctx, input.into_command()?).await
    }

    /// Records a warning or error for an agent (an MCP server unavailable, a fallback model
    /// used): an instant timeline event of type `SYSTEM_WARNING` / `SYSTEM_ERROR` whose metadata
    /// holds the `code`, seen in the session's event stream as `SYSTEM` `WARNING` / `ERROR`.
    /// Writer.
    #[graphql(guard = "RoleGuard(Role::Writer)")]
    async fn record_system_notice(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "What to record.")] input: RecordSystemNoticeInput,
    ) -> Result<TimelineEvent> {
        create_event(ctx, input.into_command()?).await
    }

    /// A ticket to one session's plain event stream (`GET /sessions/{id}/events?ticket=…`), for
    /// clients that cannot send an `Authorization` header (a browser's `EventSource`). It can be
    /// used to connect for 60 seconds, to that session only; a stream it opened runs on until
    /// the credentials it was minted with are revoked or expire. Reader.
    #[graphql(guard = "RoleGuard(Role::Reader)")]
    async fn create_event_stream_ticket(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The session.")] session_id: ID,
    ) -> Result<EventStreamTicket> {
        let session = decode_as(NodeType::Session, &session_id)?;
        let store = ctx.data_unchecked::<Store>();
        if !store.membership(session, None, None).await?.session_exists {
            return Err(Error::not_found(format!("session {session} does not exist")).into());
        }
        let identity = caller(ctx)?;
        let auth = ctx.data_unchecked::<Arc<Authenticator>>();
        let ticket = auth.mint_ticket(identity, session, &origin(ctx)?).await?;
        Ok(EventStreamTicket {
            url: format!("/sessions/{session}/events?ticket={}", ticket.secret),
            ticket: ticket.secret,
            expires_at: ticket.expires_at,
        })
    }

    /// Appends to a streaming event's content, exactly once per offset. Writer.
    #[graphql(guard = "RoleGuard(Role::Writer)")]
    async fn append_timeline_content(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "What to record.")] input: AppendTimelineContentInput,
    ) -> Result<TimelineAppend> {
        let append = input.into_command()?;
        let (event_id, offset) = (append.event_id, append.offset);
        // Most appends are an agent's next tokens, stored with the others that arrive with
        // them; the rest are decided alone.
        let store = ctx.data_unchecked::<Store>();
        let grouped = store.append_groups().append(&append).await?;
        let done = match grouped {
            Some(done) => {
                committed(ctx);
                done
            }
            None => {
                transaction(ctx, Audit::Nothing, append, |c, append| {
                    Box::pin(
                        async move { timeline::append(c, &mut Owners::default(), append).await },
                    )
                })
                .await?
            }
        };
        metrics::counter!(INGEST_APPENDED_BYTES).increment(done.stored_bytes as u64);
        Ok(TimelineAppend {
            event_id: ids::encode(NodeType::TimelineEvent, event_id),
            offset,
            end: done.end,
            applied: done.stored,
        })
    }

    /// Finishes a streaming event with its final content, metadata and debug links; after this
    /// it never changes. Writer.
    #[graphql(guard = "RoleGuard(Role::Writer)")]
    async fn finish_timeline_event(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "What to record.")] input: FinishTimelineEventInput,
    ) -> Result<TimelineEvent> {
        let finish = input.into_command()?;
        let row = at_once_or_decided(
            ctx,
            finish,
            |c, finish| Box::pin(timeline::finish_at_once(c, finish)),
            |c, finish| {
                Box::pin(async move {
                    timeline::finish_decided(c, &mut Owners::default(), finish).await
                })
            },
        )
        .await?;
        Ok(TimelineEvent(row.into()))
    }

    /// Appends the next message of an agent's conversation. Writer.
    #[graphql(guard = "RoleGuard(Role::Writer)")]
    async fn append_message(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "What to record.")] input: AppendMessageInput,
    ) -> Result<Message> {
        let new = input.into_command()?;
        let row = transaction(ctx, Audit::Caller, new, |c, new| {
            Box::pin(async move { messages::append(c, &mut Owners::default(), new).await })
        })
        .await?;
        Ok(Message(row.into()))
    }

    /// Records a completed LLM call. Writer.
    #[graphql(name = "recordLLMInteraction", guard = "RoleGuard(Role::Writer)")]
    async fn record_llm_interaction(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "What to record.")] input: RecordLlmInteractionInput,
    ) -> Result<LlmInteraction> {
        let new = input.into_command()?;
        let row = transaction(ctx, Audit::Caller, new, |c, new| {
            Box::pin(async move {
                let prices = &mut PriceCache::default();
                interactions::record_llm(c, &mut Owners::default(), prices, new).await
            })
        })
        .await?;
        Ok(LlmInteraction(row.into()))
    }

    /// Records a completed MCP call. Writer.
    #[graphql(name = "recordMCPInteraction", guard = "RoleGuard(Role::Writer)")]
    async fn record_mcp_interaction(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "What to record.")] input: RecordMcpInteractionInput,
    ) -> Result<McpInteraction> {
        let new = input.into_command()?;
        let row = transaction(ctx, Audit::Caller, new, |c, new| {
            Box::pin(async move { interactions::record_mcp(c, &mut Owners::default(), new).await })
        })
        .await?;
        Ok(McpInteraction(row.into()))
    }

    /// Opens a follow-up chat on a finished session; its creator owns it. Operator.
    #[graphql(guard = "RoleGuard(Role::Operator)")]
    async fn open_chat(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "What to record.")] mut input: OpenChatInput,
    ) -> Result<Chat> {
        let created_by = created_by(ctx, input.created_by.take())?;
        let new = input.into_command(created_by)?;
        let args = (new, origin(ctx)?);
        let row = transaction(ctx, Audit::Caller, args, |c, (new, origin)| {
            Box::pin(chats::open(c, new, origin))
        })
        .await?;
        Ok(Chat(row.into()))
    }

    /// Posts a question in a chat: stores it, creates its answering stage and execution, and
    /// records the `USER_QUESTION` timeline event. Operator, and only in a chat of one's own
    /// (an admin may post in any).
    #[graphql(guard = "RoleGuard(Role::Operator)")]
    async fn post_chat_message(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "What to record.")] mut input: PostChatMessageInput,
    ) -> Result<ChatUserMessage> {
        let created_by = created_by(ctx, input.created_by.take())?;
        let owner_only = owner_only(ctx)?;
        let new = input.into_command(created_by)?;
        let args = (new, owner_only, origin(ctx)?);
        let row = transaction(ctx, Audit::Caller, args, |c, (new, owner, origin)| {
            Box::pin(chats::post(
                c,
                new,
                chats::Poster::from(owner.as_deref()),
                origin,
            ))
        })
        .await?;
        Ok(ChatUserMessage(row.into()))
    }

    /// Gives a chat a new title, or removes it. Operator, and only a chat of one's own (an
    /// admin may rename any). Renaming is not activity: the chat keeps its `updatedAt`.
    #[graphql(guard = "RoleGuard(Role::Operator)")]
    async fn rename_chat(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The chat and its new title.")] input: RenameChatInput,
    ) -> Result<Chat> {
        let id = decode_as(NodeType::Chat, &input.id)?;
        let rename = (id, input.title, owner_only(ctx)?, origin(ctx)?);
        let row = transaction(
            ctx,
            Audit::Caller,
            rename,
            |c, (id, title, owner, origin)| {
                let who = chats::Poster::from(owner.as_deref());
                Box::pin(chats::rename(c, *id, title.as_deref(), who, origin))
            },
        )
        .await?;
        Ok(Chat(row.into()))
    }

    /// Soft-deletes a chat: left out of `chats` and `Session.chatsConnection` unless they are
    /// given `includeDeleted: true`, still read by id (with `deletedAt`), and closed to
    /// questions and renames until restored. Deleting a deleted chat changes nothing. Recorded
    /// in the session's audit trail and event log (`chat`/`deleted`). Operator, and only a
    /// chat of one's own (an admin may delete any).
    #[graphql(guard = "RoleGuard(Role::Operator)")]
    async fn delete_chat(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The chat, and why.")] input: ChatDeletionInput,
    ) -> Result<Chat> {
        chat_deletion(ctx, input, Deletion::Delete).await
    }

    /// Undoes `deleteChat`; restoring a chat that is not deleted changes nothing. Recorded in
    /// the session's audit trail and event log (`chat`/`restored`). Operator, and only a chat
    /// of one's own (an admin may restore any).
    #[graphql(guard = "RoleGuard(Role::Operator)")]
    async fn restore_chat(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The chat, and why.")] input: ChatDeletionInput,
    ) -> Result<Chat> {
        chat_deletion(ctx, input, Deletion::Restore).await
    }

    /// Applies many operations in one transaction, in order (at most 1,000): all of them or
    /// none. Each is as idempotent as its own mutation, so a failed batch can be resent whole.
    /// Writer (every operation it can hold is a writer's).
    #[graphql(guard = "RoleGuard(Role::Writer)")]
    async fn ingest(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The operations, applied in order.")] operations: Vec<IngestOperation>,
    ) -> Result<Vec<IngestItem>> {
        ingest::run(ctx, operations).await
    }

    /// Sets a model's price (US dollars per million tokens) from an instant on: LLM interactions
    /// at or after it that come without a cost are priced with it. A price never changes, and
    /// costs already stored never change with it: a new price takes effect from its own
    /// instant. Setting the price already in effect again writes nothing (retries are safe);
    /// other prices at the very instant of one already set for the model and provider are a
    /// CONFLICT. Admin.
    #[graphql(guard = "RoleGuard(Role::Admin)")]
    async fn set_model_price(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The price.")] input: SetModelPriceInput,
    ) -> Result<ModelPrice> {
        let new = input.into_command(caller(ctx)?.actor.clone());
        let origin = origin(ctx)?;
        let set = transaction(ctx, Audit::Nothing, (new, origin), |c, (new, origin)| {
            Box::pin(prices::set_price(c, new, origin))
        })
        .await?;
        Ok(ModelPrice(set.row()))
    }

    /// Claims up to `limit` due notifications (of `types`, or of every type) for a delivery
    /// worker, for `leaseSeconds`: each is `SENDING` until the worker reports it, or due again
    /// when the lease runs out (a crashed worker's claims come back). Concurrent workers get
    /// disjoint sets. The same `claimId` again returns what it claimed, so a claim retried
    /// after a lost answer loses nothing; use a new one for each claim. Notifier (the delivery
    /// worker's role; writers and above may too).
    #[graphql(guard = "RoleGuard(Role::Notifier)")]
    async fn claim_notifications(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "A new id for each claim (a UUID the worker makes).")] claim_id: Uuid,
        #[graphql(desc = "Only these types (default: every type).")] types: Option<
            Vec<NotificationType>,
        >,
        #[graphql(desc = "Most notifications to take (1–100).", default = 10)] limit: i32,
        #[graphql(desc = "How long the claim holds, in seconds (1–3,600).", default = 60)]
        lease_seconds: i32,
    ) -> Result<Vec<Notification>> {
        let request = notifications::ClaimRequest {
            claim_id,
            types: types.unwrap_or_default(),
            limit,
            lease_seconds,
        };
        let args = (request, origin(ctx)?);
        let rows = transaction(ctx, Audit::Nothing, args, |c, (request, origin)| {
            Box::pin(notifications::claim(c, request, origin))
        })
        .await?;
        Ok(rows.into_iter().map(|r| Notification(r.into())).collect())
    }

    /// Reports a claimed notification sent, with what the destination answered (merged into
    /// `integrationData`). Again with the same claim: a harmless retry. Notifier.
    #[graphql(guard = "RoleGuard(Role::Notifier)")]
    async fn mark_notification_sent(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The notification.")] notification: NotificationRef,
        #[graphql(desc = "The claim that took it.")] claim_id: Uuid,
        #[graphql(
            desc = "What the destination answered, as a JSON object (Slack: `thread_ts`, `permalink`)."
        )]
        integration_data: Option<Json<serde_json::Value>>,
    ) -> Result<Notification> {
        let args = (
            notification.key()?,
            integration_data.map(|j| j.0),
            origin(ctx)?,
        );
        let row = transaction(ctx, Audit::Nothing, args, |c, (key, data, origin)| {
            Box::pin(notifications::mark_sent(
                c,
                *key,
                claim_id,
                data.as_ref(),
                origin,
            ))
        })
        .await?;
        Ok(Notification(row.into()))
    }

    /// Reports a sent notification's delivery confirmed. Again: a harmless retry. Notifier.
    #[graphql(guard = "RoleGuard(Role::Notifier)")]
    async fn mark_notification_delivered(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The notification.")] notification: NotificationRef,
    ) -> Result<Notification> {
        let args = (notification.key()?, origin(ctx)?);
        let row = transaction(ctx, Audit::Nothing, args, |c, (key, origin)| {
            Box::pin(notifications::mark_delivered(c, *key, origin))
        })
        .await?;
        Ok(Notification(row.into()))
    }

    /// Reports a claimed notification's attempt failed: it is due again after a backoff
    /// (by default 30 seconds after the first attempt, doubling with each, at most an hour:
    /// `--notification-backoff-base-secs`, `--notification-backoff-max-secs`), or `FAILED` for
    /// good once it has had `maxAttempts`. Again with the same claim and error: a harmless
    /// retry. Notifier.
    #[graphql(guard = "RoleGuard(Role::Notifier)")]
    async fn mark_notification_failed(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The notification.")] notification: NotificationRef,
        #[graphql(desc = "The claim that took it.")] claim_id: Uuid,
        #[graphql(desc = "What went wrong (at most 10,000 characters).")] error: String,
    ) -> Result<Notification> {
        let backoff = ctx.data_unchecked::<NotificationOptions>().backoff();
        let args = (notification.key()?, error, origin(ctx)?);
        let row = transaction(ctx, Audit::Nothing, args, |c, (key, error, origin)| {
            Box::pin(notifications::mark_failed(
                c, *key, claim_id, error, backoff, origin,
            ))
        })
        .await?;
        Ok(Notification(row.into()))
    }

    /// Creates a read-only link to one session for someone without an account: its secret
    /// (in the result, once, and never stored) reads that session, its records and its live
    /// streams over GraphQL and the event stream, and nothing else (any other session, any
    /// list, any mutation: FORBIDDEN), until it expires or is revoked. Operator.
    #[graphql(guard = "RoleGuard(Role::Operator)")]
    async fn create_share_link(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The session to share.")] session_id: ID,
        #[graphql(
            desc = "How long it works: a period such as `7d`, `12h` or `90m`, at most 90 days.",
            default_with = "String::from(\"7d\")"
        )]
        expires_in: String,
        #[graphql(desc = "What it is for (at most 500 characters).")] note: Option<String>,
    ) -> Result<share_links::CreatedShareLink> {
        share_links::create(ctx, session_id, expires_in, note).await
    }

    /// Revokes a share link: every server refuses it within seconds, and streams it opened are
    /// closed. Revoking a revoked link changes nothing. Operator.
    #[graphql(guard = "RoleGuard(Role::Operator)")]
    async fn revoke_share_link(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The link.")] id: Uuid,
    ) -> Result<ShareLink> {
        share_links::revoke(ctx, id).await
    }

    /// Creates an API token. Its secret is in the result, once, and never stored. Admin.
    #[graphql(guard = "RoleGuard(Role::Admin)")]
    async fn create_api_token(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The token.")] input: tokens::CreateApiTokenInput,
    ) -> Result<tokens::CreatedApiToken> {
        tokens::create(ctx, input).await
    }

    /// Revokes an API token: every server on the database refuses it within seconds, and
    /// streams it opened are closed. Revoking a revoked token changes nothing. Admin.
    #[graphql(guard = "RoleGuard(Role::Admin)")]
    async fn revoke_api_token(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The token's name.")] name: String,
    ) -> Result<ApiToken> {
        tokens::revoke(ctx, name).await
    }
}

/// A chat's delete or restore: the caller's ownership checked as for a rename, the reason
/// audited.
async fn chat_deletion(
    ctx: &Context<'_>,
    input: ChatDeletionInput,
    deletion: Deletion,
) -> Result<Chat> {
    let id = decode_as(NodeType::Chat, &input.id)?;
    let audit = Audit::CallerBecause(input.reason.as_deref());
    let args = (id, input.reason.clone(), owner_only(ctx)?, origin(ctx)?);
    let row = transaction(ctx, audit, args, |c, (id, reason, owner, origin)| {
        let (who, reason) = (chats::Poster::from(owner.as_deref()), reason.as_deref());
        Box::pin(chats::set_deletion(c, *id, deletion, reason, who, origin))
    })
    .await?;
    Ok(Chat(row.into()))
}

/// Whose chats the caller may post in, rename, delete and restore: only the identity's own,
/// below admin; `None` for anyone's.
fn owner_only(ctx: &Context<'_>) -> Result<Option<String>> {
    let identity = caller(ctx)?;
    Ok(match (&identity.actor, identity.role) {
        (Some(actor), role) if role < Role::Admin => Some(actor.clone()),
        _ => None,
    })
}

/// `createdBy` as recorded: the caller's identity once authentication is on (a value in the
/// input would be a forgery), the input's value without it.
fn created_by(ctx: &Context<'_>, input: Option<String>) -> Result<Option<String>> {
    let identity = caller(ctx)?;
    if identity.is_anonymous() {
        return Ok(input);
    }
    if input.is_some() {
        return Err(Error::bad_input(
            "`createdBy` is the caller's identity when authentication is on; leave it out",
        )
        .into());
    }
    Ok(identity.actor.clone())
}

/// The attempts a notification gets when its writer names none.
fn max_attempts(ctx: &Context<'_>) -> i32 {
    ctx.data_unchecked::<NotificationOptions>()
        .notification_max_attempts
}

async fn fail(ctx: &Context<'_>, input: FailSessionInput, timed_out: bool) -> Result<Session> {
    let id = decode_as(NodeType::Session, &input.id)?;
    let audit = Audit::CallerBecause(input.reason.as_deref());
    let notify = NotifyInput::into_new(input.notify, max_attempts(ctx));
    let failure = (id, input.error_message, notify, origin(ctx)?);
    let row = transaction(ctx, audit, failure, |c, (id, error, notify, origin)| {
        Box::pin(sessions::fail(c, *id, timed_out, error, notify, origin))
    })
    .await?;
    Ok(Session(row.into()))
}
