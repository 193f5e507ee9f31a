//! Batched loaders: every relationship and roll-up in the schema resolves through one of these,
//! so a query costs one SQL statement per loader per level, however many rows it touches
//! ([`batch`] says how levels are told apart). Each loader delegates to one `Store` query
//! (`WHERE key = ANY($1)`); all of them are built per request in [`Loaders::new`], so their
//! caches never outlive a request ([`OperationLoaders`] builds them when a field first needs
//! one). A relationship from a row at hand is keyed by the row's [`Key`] (id within session),
//! so that its statement names the sessions it reads; only the records of global ids
//! ([`Nodes`]) and sessions themselves are loaded by id.
//!
//! A share link's loaders are bound to its session: each key says which sessions it reads
//! ([`Reach`]), each record by id which session it belongs to, and anything beyond the link's
//! session is refused (`FORBIDDEN`), whichever field asked.

mod batch;

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

use uuid::Uuid;

pub use batch::{Dispatcher, Load, Loader, UntilIdle};

use crate::error::Error;
use crate::store::audit::log::AuditRecordRow;
use crate::store::child_pages::ChildPageKey;
use crate::store::share_links::ShareLinkRow;
use crate::store::*;

/// Loader errors must be `Clone`; the error mapping at the edge unwraps the `Arc`.
pub type LoadError = Arc<Error>;

/// Any table's rows by id: sessions (whose id is the session), and the records of a global
/// id, which names no session (on a distributed database, a read of every shard).
pub struct ById<R> {
    store: Store,
    row: PhantomData<fn() -> R>,
}

impl<R> ById<R> {
    fn new(store: &Store) -> Self {
        Self {
            store: store.clone(),
            row: PhantomData,
        }
    }
}

impl<R: Record> Load for ById<R> {
    type Key = Uuid;
    type Value = Arc<R>;

    async fn load(&self, keys: &[Uuid]) -> Result<HashMap<Uuid, Arc<R>>, LoadError> {
        let rows: Vec<R> = self.store.by_ids(keys).await?;
        Ok(rows.into_iter().map(|r| (r.id(), Arc::new(r))).collect())
    }

    /// An id names no session: the record says which it belongs to.
    fn within(_: &Uuid, row: &Arc<R>, session: Uuid) -> bool {
        row.session().is_none_or(|own| own == session)
    }
}

/// A record's rows by key (id within session): a relationship from a row at hand, which
/// names the session.
pub struct ByKey<R> {
    store: Store,
    row: PhantomData<fn() -> R>,
}

impl<R> ByKey<R> {
    fn new(store: &Store) -> Self {
        Self {
            store: store.clone(),
            row: PhantomData,
        }
    }
}

impl<R: InSession> Load for ByKey<R> {
    type Key = Key;
    type Value = Arc<R>;

    async fn load(&self, keys: &[Key]) -> Result<HashMap<Key, Arc<R>>, LoadError> {
        let rows: Vec<R> = self.store.by_keys(keys).await?;
        Ok(rows.into_iter().map(|r| (r.key(), Arc::new(r))).collect())
    }

    fn within(key: &Key, _: &Arc<R>, session: Uuid) -> bool {
        key.within(session)
    }
}

/// Which sessions a loader's key reads the rows of.
pub trait Reach {
    /// Whether it reads nothing of another session than `session`.
    fn within(&self, session: Uuid) -> bool;
}

/// A session's id: the key of the loaders of a session's children (`…BySession`).
impl Reach for Uuid {
    fn within(&self, session: Uuid) -> bool {
        *self == session
    }
}

impl Reach for Key {
    fn within(&self, session: Uuid) -> bool {
        self.session == session
    }
}

impl Reach for TimelinePageKey {
    fn within(&self, session: Uuid) -> bool {
        self.session == session
    }
}

impl<A, B> Reach for ChildPageKey<A, B> {
    fn within(&self, session: Uuid) -> bool {
        self.session == session
    }
}

impl Reach for CallKey {
    fn within(&self, session: Uuid) -> bool {
        self.session_id == session
    }
}

impl Reach for SearchMatchKey {
    fn within(&self, session: Uuid) -> bool {
        self.session == session
    }
}

/// Declares a loader that hands its keys to one store query (its `store` visible to this
/// module, which builds every loader, also when it is declared in a file of its own).
macro_rules! loader {
    ($(#[$doc:meta])* $name:ident: $key:ty => $value:ty, |$store:ident, $keys:ident| $query:expr) => {
        $(#[$doc])*
        pub struct $name {
            pub(in crate::api::loaders) store: Store,
        }
        impl Load for $name {
            type Key = $key;
            type Value = $value;
            async fn load(&self, $keys: &[$key]) -> Result<HashMap<$key, $value>, LoadError> {
                let $store = &self.store;
                Ok($query.await?)
            }
            fn within(key: &$key, _: &$value, session: uuid::Uuid) -> bool {
                $crate::api::loaders::Reach::within(key, session)
            }
        }
    };
    ($(#[$doc:meta])* $name:ident(scope): $key:ty => $value:ty, |$store:ident, $scope:ident, $keys:ident| $query:expr) => {
        $(#[$doc])*
        pub struct $name {
            store: Store,
            scope: Scope,
        }
        impl Load for $name {
            type Key = $key;
            type Value = $value;
            async fn load(&self, $keys: &[$key]) -> Result<HashMap<$key, $value>, LoadError> {
                let ($store, $scope) = (&self.store, self.scope);
                Ok($query.await?)
            }
            fn within(key: &$key, _: &$value, session: uuid::Uuid) -> bool {
                $crate::api::loaders::Reach::within(key, session)
            }
        }
    };
}

mod chains_by_key;
mod chat_pages_with_deleted;
mod notifications_by_session;
mod question_counts_by_chat;
mod question_pages_by_chat;
mod session_counts_by_chain;
mod session_pages_by_chain;

pub use chains_by_key::ChainsByKey;
pub use chat_pages_with_deleted::ChatPagesWithDeleted;
pub use notifications_by_session::NotificationsBySession;
pub use question_counts_by_chat::QuestionCountsByChat;
pub use question_pages_by_chat::QuestionPagesByChat;
pub use session_counts_by_chain::SessionCountsByChain;
pub use session_pages_by_chain::SessionPagesByChain;

loader!(
    /// Stages of a session, by stage index.
    StagesBySession: Uuid => Vec<Arc<StageRow>>, |store, keys| store.stages_by_session(keys)
);
loader!(
    /// A session's agent tree, flat, in tree order.
    AgentsBySession: Uuid => Vec<Arc<ExecutionRow>>, |store, keys| store.agents_by_session(keys)
);
loader!(
    /// Agent executions of a stage, by agent index.
    ExecutionsByStage: Key => Vec<Arc<ExecutionRow>>, |store, keys| store.executions_by_stage(keys)
);
loader!(
    /// Sub-agents an execution spawned, by agent index.
    SubAgentsByParent: Key => Vec<Arc<ExecutionRow>>, |store, keys| store.executions_by_parent(keys)
);
loader!(
    /// Questions asked in a chat.
    UserMessagesByChat: Key => Vec<Arc<ChatUserMessageRow>>, |store, keys| store.user_messages_by_chat(keys)
);
loader!(
    /// The stage answering a chat question.
    StageByChatUserMessage: Key => Arc<StageRow>, |store, keys| store.stage_by_chat_user_message(keys)
);
loader!(
    /// The latest stage of a chat: where it stands.
    LatestStageByChat: Key => Arc<StageRow>, |store, keys| store.latest_stage_by_chat(keys)
);
loader!(
    /// The answer to a chat question, once its stage has completed.
    AnswerByChatUserMessage: Key => Arc<TimelineEventRow>,
    |store, keys| store.answer_by_chat_user_message(keys)
);
loader!(
    /// A session's status history, oldest first.
    StatusChangesBySession: Uuid => Vec<Arc<SessionStatusChangeRow>>,
    |store, keys| store.status_changes_by_session(keys)
);
loader!(
    /// Counts of what a session holds.
    CountsBySession: Uuid => SessionCountsRow, |store, keys| store.session_counts(keys)
);
loader!(
    /// Pages of the timeline of a session, stage or execution.
    TimelinePages(scope): TimelinePageKey => page::Page<Arc<TimelineEventRow>>,
    |store, scope, keys| store.timeline_pages(scope, keys)
);
loader!(
    /// Pages of the messages of a stage or execution.
    MessagePages(scope): MessagePageKey => CountedPage<Arc<MessageRow>>,
    |store, scope, keys| store.message_pages(scope, keys)
);
loader!(
    /// Pages of the conversations of LLM interactions.
    ConversationPages: MessagePageKey => CountedPage<Arc<SentMessageRow>>,
    |store, keys| store.conversation_pages(keys)
);
loader!(
    /// Pages of the LLM interactions of a session, stage or execution.
    LlmInteractionPages(scope): RecordPageKey => CountedPage<Arc<LlmInteractionInPage>>,
    |store, scope, keys| store.llm_interaction_pages(scope, keys)
);
loader!(
    /// Pages of the MCP interactions of a session, stage or execution.
    McpInteractionPages(scope): RecordPageKey => CountedPage<Arc<McpInteractionInPage>>,
    |store, scope, keys| store.mcp_interaction_pages(scope, keys)
);
loader!(
    /// The share links of a session, oldest first.
    ShareLinksBySession: Uuid => Vec<Arc<ShareLinkRow>>,
    |store, keys| store.share_links_by_session(keys)
);
loader!(
    /// Pages of the audit trail of a session.
    SessionAuditPages: RecordPageKey => CountedPage<Arc<AuditRecordRow>>,
    |store, keys| store.session_audit_pages(keys)
);
loader!(
    /// Pages of the chats of a session that are not deleted.
    ChatPages: RecordPageKey => CountedPage<Arc<ChatRow>>, |store, keys| store.chat_pages(keys)
);
loader!(
    /// The assistant message requesting each tool call, and the call's place in it.
    RequestsByCall: CallKey => (i32, Arc<MessageRow>), |store, keys| store.requests_by_call(keys)
);
loader!(
    /// The tool message answering each tool call.
    AnswersByCall: CallKey => Arc<MessageRow>, |store, keys| store.answers_by_call(keys)
);
loader!(
    /// The MCP interactions executing each tool call: its attempts, in order.
    McpInteractionsByCall: CallKey => Vec<Arc<McpInteractionRow>>,
    |store, keys| store.mcp_interactions_by_call(keys)
);
loader!(
    /// The timeline events showing each tool call.
    EventsByCall: CallKey => CallEvents, |store, keys| store.events_by_call(keys)
);
loader!(
    /// Where a search matched each session: its best matches.
    SearchMatches: SearchMatchKey => Vec<SearchMatchRow>, |store, keys| store.search_matches(keys)
);
loader!(
    /// Token and cost totals under a session, stage or execution.
    TokenUsageBy(scope): Key => TokenUsageRow, |store, scope, keys| store.token_usage_by(scope, keys)
);

/// One loader of each kind, per scope where a relationship exists at several levels.
pub struct PerScope<L: Load> {
    session: Loader<L>,
    stage: Loader<L>,
    execution: Loader<L>,
}

impl<L: Load> PerScope<L> {
    pub fn get(&self, scope: Scope) -> &Loader<L> {
        match scope {
            Scope::Session => &self.session,
            Scope::Stage => &self.stage,
            Scope::Execution => &self.execution,
        }
    }
}

/// The records of global ids (`node`, `nodes`), by id alone: a global id names no session.
pub struct Nodes {
    pub stages: Loader<ById<StageRow>>,
    pub executions: Loader<ById<ExecutionRow>>,
    pub timeline_events: Loader<ById<TimelineEventRow>>,
    pub messages: Loader<ById<MessageRow>>,
    pub llm_interactions: Loader<ById<LlmInteractionRow>>,
    pub mcp_interactions: Loader<ById<McpInteractionRow>>,
    pub chats: Loader<ById<ChatRow>>,
    pub chat_user_messages: Loader<ById<ChatUserMessageRow>>,
    pub chains: Loader<ById<ChainRow>>,
}

/// An operation's loaders, built when a field first asks for one: about seventy allocations
/// that an operation answered from its own result (an append's `end`) never needs.
pub struct OperationLoaders {
    built: OnceLock<Loaders>,
    store: Store,
    dispatcher: Arc<Dispatcher>,
    cached: bool,
    bound: Option<Uuid>,
}

impl OperationLoaders {
    /// The loaders [`Loaders::new`] will build from these, once asked.
    pub fn new(
        store: &Store,
        dispatcher: &Arc<Dispatcher>,
        cached: bool,
        bound: Option<Uuid>,
    ) -> Self {
        Self {
            built: OnceLock::new(),
            store: store.clone(),
            dispatcher: dispatcher.clone(),
            cached,
            bound,
        }
    }

    pub fn get(&self) -> &Loaders {
        self.built
            .get_or_init(|| Loaders::new(&self.store, &self.dispatcher, self.cached, self.bound))
    }
}

/// Every loader of one request.
pub struct Loaders {
    pub sessions: Loader<ById<SessionRow>>,
    pub nodes: Nodes,
    pub stages: Loader<ByKey<StageRow>>,
    pub executions: Loader<ByKey<ExecutionRow>>,
    pub timeline_events: Loader<ByKey<TimelineEventRow>>,
    pub messages: Loader<ByKey<MessageRow>>,
    pub llm_interactions: Loader<ByKey<LlmInteractionRow>>,
    pub mcp_interactions: Loader<ByKey<McpInteractionRow>>,
    pub llm_requests: Loader<ByKey<LlmRequestRow>>,
    pub llm_payloads: Loader<ByKey<LlmPayloadRow>>,
    pub mcp_payloads: Loader<ByKey<McpPayloadRow>>,
    pub chats: Loader<ByKey<ChatRow>>,
    pub chat_user_messages: Loader<ByKey<ChatUserMessageRow>>,
    pub stages_by_session: Loader<StagesBySession>,
    pub agents_by_session: Loader<AgentsBySession>,
    pub executions_by_stage: Loader<ExecutionsByStage>,
    pub sub_agents_by_parent: Loader<SubAgentsByParent>,
    pub user_messages_by_chat: Loader<UserMessagesByChat>,
    pub stage_by_chat_user_message: Loader<StageByChatUserMessage>,
    pub latest_stage_by_chat: Loader<LatestStageByChat>,
    pub answer_by_chat_user_message: Loader<AnswerByChatUserMessage>,
    pub counts_by_session: Loader<CountsBySession>,
    pub status_changes_by_session: Loader<StatusChangesBySession>,
    pub timeline: PerScope<TimelinePages>,
    pub message_pages: PerScope<MessagePages>,
    pub llm_interaction_pages: PerScope<LlmInteractionPages>,
    pub mcp_interaction_pages: PerScope<McpInteractionPages>,
    pub chat_pages: Loader<ChatPages>,
    pub chat_pages_with_deleted: Loader<ChatPagesWithDeleted>,
    pub question_pages_by_chat: Loader<QuestionPagesByChat>,
    pub question_counts_by_chat: Loader<QuestionCountsByChat>,
    pub session_audit_pages: Loader<SessionAuditPages>,
    pub share_links_by_session: Loader<ShareLinksBySession>,
    pub conversation_pages: Loader<ConversationPages>,
    pub token_usage_by: PerScope<TokenUsageBy>,
    pub requests_by_call: Loader<RequestsByCall>,
    pub answers_by_call: Loader<AnswersByCall>,
    pub mcp_interactions_by_call: Loader<McpInteractionsByCall>,
    pub events_by_call: Loader<EventsByCall>,
    pub search_matches: Loader<SearchMatches>,
    pub chains_by_key: Loader<ChainsByKey>,
    pub notifications_by_session: Loader<NotificationsBySession>,
    pub session_pages_by_chain: Loader<SessionPagesByChain>,
    pub session_counts_by_chain: Loader<SessionCountsByChain>,
}

impl Loaders {
    /// The loaders of one operation, batched by `dispatcher`. `cached`: each key is loaded at
    /// most once; a subscription's loaders keep nothing, so every update is resolved against
    /// the database as it is then.
    /// `bound`: the one session a share link reads.
    pub fn new(
        store: &Store,
        dispatcher: &Arc<Dispatcher>,
        cached: bool,
        bound: Option<Uuid>,
    ) -> Self {
        macro_rules! batched {
            ($load:expr) => {
                Loader::new($load, dispatcher, cached, bound)
            };
        }
        macro_rules! per_scope {
            ($name:ident) => {
                PerScope {
                    session: batched!($name {
                        store: store.clone(),
                        scope: Scope::Session,
                    }),
                    stage: batched!($name {
                        store: store.clone(),
                        scope: Scope::Stage,
                    }),
                    execution: batched!($name {
                        store: store.clone(),
                        scope: Scope::Execution,
                    }),
                }
            };
        }
        Self {
            sessions: batched!(ById::new(store)),
            nodes: Nodes {
                stages: batched!(ById::new(store)),
                executions: batched!(ById::new(store)),
                timeline_events: batched!(ById::new(store)),
                messages: batched!(ById::new(store)),
                llm_interactions: batched!(ById::new(store)),
                mcp_interactions: batched!(ById::new(store)),
                chats: batched!(ById::new(store)),
                chat_user_messages: batched!(ById::new(store)),
                chains: batched!(ById::new(store)),
            },
            stages: batched!(ByKey::new(store)),
            executions: batched!(ByKey::new(store)),
            timeline_events: batched!(ByKey::new(store)),
            messages: batched!(ByKey::new(store)),
            llm_interactions: batched!(ByKey::new(store)),
            mcp_interactions: batched!(ByKey::new(store)),
            llm_requests: batched!(ByKey::new(store)),
            llm_payloads: batched!(ByKey::new(store)),
            mcp_payloads: batched!(ByKey::new(store)),
            chats: batched!(ByKey::new(store)),
            chat_user_messages: batched!(ByKey::new(store)),
            stages_by_session: batched!(StagesBySession {
                store: store.clone()
            }),
            agents_by_session: batched!(AgentsBySession {
                store: store.clone()
            }),
            executions_by_stage: batched!(ExecutionsByStage {
                store: store.clone()
            }),
            sub_agents_by_parent: batched!(SubAgentsByParent {
                store: store.clone()
            }),
            user_messages_by_chat: batched!(UserMessagesByChat {
                store: store.clone()
            }),
            stage_by_chat_user_message: batched!(StageByChatUserMessage {
                store: store.clone()
            }),
            latest_stage_by_chat: batched!(LatestStageByChat {
                store: store.clone()
            }),
            answer_by_chat_user_message: batched!(AnswerByChatUserMessage {
                store: store.clone()
            }),
            counts_by_session: batched!(CountsBySession {
                store: store.clone()
            }),
            status_changes_by_session: batched!(StatusChangesBySession {
                store: store.clone()
            }),
            timeline: per_scope!(TimelinePages),
            message_pages: per_scope!(MessagePages),
            llm_interaction_pages: per_scope!(LlmInteractionPages),
            mcp_interaction_pages: per_scope!(McpInteractionPages),
            chat_pages: batched!(ChatPages {
                store: store.clone()
            }),
            chat_pages_with_deleted: batched!(ChatPagesWithDeleted {
                store: store.clone()
            }),
            question_pages_by_chat: batched!(QuestionPagesByChat {
                store: store.clone()
            }),
            question_counts_by_chat: batched!(QuestionCountsByChat {
                store: store.clone()
            }),
            session_audit_pages: batched!(SessionAuditPages {
                store: store.clone()
            }),
            share_links_by_session: batched!(ShareLinksBySession {
                store: store.clone()
            }),
            conversation_pages: batched!(ConversationPages {
                store: store.clone()
            }),
            token_usage_by: per_scope!(TokenUsageBy),
            requests_by_call: batched!(RequestsByCall {
                store: store.clone()
            }),
            answers_by_call: batched!(AnswersByCall {
                store: store.clone()
            }),
            mcp_interactions_by_call: batched!(McpInteractionsByCall {
                store: store.clone()
            }),
            events_by_call: batched!(EventsByCall {
                store: store.clone()
            }),
            search_matches: batched!(SearchMatches {
                store: store.clone()
            }),
            chains_by_key: batched!(ChainsByKey {
                store: store.clone()
            }),
            notifications_by_session: batched!(NotificationsBySession {
                store: store.clone()
            }),
            session_pages_by_chain: batched!(SessionPagesByChain {
                store: store.clone()
            }),
            session_counts_by_chain: batched!(SessionCountsByChain {
                store: store.clone()
            }),
        }
    }
}
