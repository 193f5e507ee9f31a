//! Batched loaders: every relationship and roll-up in the schema resolves through one of these,
//! so a query costs one SQL statement per loader per level, however many rows it touches.
//! Each loader delegates to one `Store` query (`WHERE key = ANY($1)`); all of them are built
//! per request in [`Loaders::new`], so their caches never outlive a request.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;

use async_graphql::dataloader::{DataLoader, HashMapCache, Loader};
use uuid::Uuid;

use crate::error::Error;
use crate::store::*;

/// Loader errors must be `Clone`; the error mapping at the edge unwraps the `Arc`.
pub type LoadError = Arc<Error>;

type Batched<L> = DataLoader<L, HashMapCache>;

/// Any table's rows by id.
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

impl<R: Record> Loader<Uuid> for ById<R> {
    type Value = R;
    type Error = LoadError;

    async fn load(&self, keys: &[Uuid]) -> Result<HashMap<Uuid, R>, LoadError> {
        let rows: Vec<R> = self.store.by_ids(keys).await?;
        Ok(rows.into_iter().map(|r| (r.id(), r)).collect())
    }
}

/// Declares a loader that hands its keys to one store query.
macro_rules! loader {
    ($(#[$doc:meta])* $name:ident: $key:ty => $value:ty, |$store:ident, $keys:ident| $query:expr) => {
        $(#[$doc])*
        pub struct $name {
            store: Store,
        }
        impl Loader<$key> for $name {
            type Value = $value;
            type Error = LoadError;
            async fn load(&self, $keys: &[$key]) -> Result<HashMap<$key, $value>, LoadError> {
                let $store = &self.store;
                Ok($query.await?)
            }
        }
    };
    ($(#[$doc:meta])* $name:ident(scope): $key:ty => $value:ty, |$store:ident, $scope:ident, $keys:ident| $query:expr) => {
        $(#[$doc])*
        pub struct $name {
            store: Store,
            scope: Scope,
        }
        impl Loader<$key> for $name {
            type Value = $value;
            type Error = LoadError;
            async fn load(&self, $keys: &[$key]) -> Result<HashMap<$key, $value>, LoadError> {
                let ($store, $scope) = (&self.store, self.scope);
                Ok($query.await?)
            }
        }
    };
}

loader!(
    /// Stages of a session, by stage index.
    StagesBySession: Uuid => Vec<StageRow>, |store, keys| store.stages_by_session(keys)
);
loader!(
    /// Agent executions of a stage, by agent index.
    ExecutionsByStage: Uuid => Vec<ExecutionRow>, |store, keys| store.executions_by_stage(keys)
);
loader!(
    /// Sub-agents an execution spawned, by agent index.
    SubAgentsByParent: Uuid => Vec<ExecutionRow>, |store, keys| store.executions_by_parent(keys)
);
loader!(
    /// An execution's LLM conversation, by sequence number.
    MessagesByExecution: Uuid => Vec<MessageRow>, |store, keys| store.messages_by_execution(keys)
);
loader!(
    /// The messages sent to the model in an LLM interaction.
    ConversationByLlmInteraction: Uuid => Vec<MessageRow>,
    |store, keys| store.conversation_by_llm_interaction(keys)
);
loader!(
    /// Follow-up chats of a session.
    ChatsBySession: Uuid => Vec<ChatRow>, |store, keys| store.chats_by_session(keys)
);
loader!(
    /// Questions asked in a chat.
    UserMessagesByChat: Uuid => Vec<ChatUserMessageRow>, |store, keys| store.user_messages_by_chat(keys)
);
loader!(
    /// The stage answering a chat question.
    StageByChatUserMessage: Uuid => StageRow, |store, keys| store.stage_by_chat_user_message(keys)
);
loader!(
    /// A session's status history, oldest first.
    StatusChangesBySession: Uuid => Vec<SessionStatusChangeRow>,
    |store, keys| store.status_changes_by_session(keys)
);
loader!(
    /// Counts of what a session holds.
    CountsBySession: Uuid => SessionCountsRow, |store, keys| store.session_counts(keys)
);
loader!(
    /// Pages of the timeline of a session, stage or execution.
    TimelinePages(scope): TimelinePageKey => Vec<TimelineEventRow>,
    |store, scope, keys| store.timeline_pages(scope, keys)
);
loader!(
    /// LLM interactions under a session, stage or execution, chronologically.
    LlmInteractionsBy(scope): Uuid => Vec<LlmInteractionRow>,
    |store, scope, keys| store.llm_interactions_by(scope, keys)
);
loader!(
    /// MCP interactions under a session, stage or execution, chronologically.
    McpInteractionsBy(scope): Uuid => Vec<McpInteractionRow>,
    |store, scope, keys| store.mcp_interactions_by(scope, keys)
);
loader!(
    /// Token and cost totals under a session, stage or execution.
    TokenUsageBy(scope): Uuid => TokenUsageRow, |store, scope, keys| store.token_usage_by(scope, keys)
);

/// One loader of each kind, per scope where a relationship exists at several levels.
pub struct PerScope<L> {
    session: Batched<L>,
    stage: Batched<L>,
    execution: Batched<L>,
}

impl<L> PerScope<L> {
    fn disable_cache(&self) {
        for loader in [&self.session, &self.stage, &self.execution] {
            loader.enable_all_cache(false);
        }
    }

    pub fn get(&self, scope: Scope) -> &Batched<L> {
        match scope {
            Scope::Session => &self.session,
            Scope::Stage => &self.stage,
            Scope::Execution => &self.execution,
        }
    }
}

/// Every loader of one request.
pub struct Loaders {
    pub sessions: Batched<ById<SessionRow>>,
    pub stages: Batched<ById<StageRow>>,
    pub executions: Batched<ById<ExecutionRow>>,
    pub timeline_events: Batched<ById<TimelineEventRow>>,
    pub messages: Batched<ById<MessageRow>>,
    pub llm_interactions: Batched<ById<LlmInteractionRow>>,
    pub mcp_interactions: Batched<ById<McpInteractionRow>>,
    pub chats: Batched<ById<ChatRow>>,
    pub chat_user_messages: Batched<ById<ChatUserMessageRow>>,
    pub stages_by_session: Batched<StagesBySession>,
    pub executions_by_stage: Batched<ExecutionsByStage>,
    pub sub_agents_by_parent: Batched<SubAgentsByParent>,
    pub messages_by_execution: Batched<MessagesByExecution>,
    pub conversation_by_llm_interaction: Batched<ConversationByLlmInteraction>,
    pub chats_by_session: Batched<ChatsBySession>,
    pub user_messages_by_chat: Batched<UserMessagesByChat>,
    pub stage_by_chat_user_message: Batched<StageByChatUserMessage>,
    pub counts_by_session: Batched<CountsBySession>,
    pub status_changes_by_session: Batched<StatusChangesBySession>,
    pub timeline: PerScope<TimelinePages>,
    pub llm_interactions_by: PerScope<LlmInteractionsBy>,
    pub mcp_interactions_by: PerScope<McpInteractionsBy>,
    pub token_usage_by: PerScope<TokenUsageBy>,
}

fn batched<L: Loader<K>, K>(loader: L) -> Batched<L>
where
    K: Send + Sync + std::hash::Hash + Eq + Clone + 'static,
{
    DataLoader::with_cache(loader, tokio::spawn, HashMapCache::default())
}

impl Loaders {
    /// Loaders for a long-lived connection (a subscription): they batch but keep nothing, so
    /// every update is resolved against the database as it is then.
    pub fn uncached(store: &Store) -> Self {
        let loaders = Self::new(store);
        loaders.sessions.enable_all_cache(false);
        loaders.stages.enable_all_cache(false);
        loaders.executions.enable_all_cache(false);
        loaders.timeline_events.enable_all_cache(false);
        loaders.messages.enable_all_cache(false);
        loaders.llm_interactions.enable_all_cache(false);
        loaders.mcp_interactions.enable_all_cache(false);
        loaders.chats.enable_all_cache(false);
        loaders.chat_user_messages.enable_all_cache(false);
        loaders.stages_by_session.enable_all_cache(false);
        loaders.executions_by_stage.enable_all_cache(false);
        loaders.sub_agents_by_parent.enable_all_cache(false);
        loaders.messages_by_execution.enable_all_cache(false);
        loaders
            .conversation_by_llm_interaction
            .enable_all_cache(false);
        loaders.chats_by_session.enable_all_cache(false);
        loaders.user_messages_by_chat.enable_all_cache(false);
        loaders.stage_by_chat_user_message.enable_all_cache(false);
        loaders.counts_by_session.enable_all_cache(false);
        loaders.status_changes_by_session.enable_all_cache(false);
        loaders.timeline.disable_cache();
        loaders.llm_interactions_by.disable_cache();
        loaders.mcp_interactions_by.disable_cache();
        loaders.token_usage_by.disable_cache();
        loaders
    }

    pub fn new(store: &Store) -> Self {
        let plain = || store.clone();
        macro_rules! per_scope {
            ($name:ident) => {
                PerScope {
                    session: batched($name {
                        store: plain(),
                        scope: Scope::Session,
                    }),
                    stage: batched($name {
                        store: plain(),
                        scope: Scope::Stage,
                    }),
                    execution: batched($name {
                        store: plain(),
                        scope: Scope::Execution,
                    }),
                }
            };
        }
        Self {
            sessions: batched(ById::new(store)),
            stages: batched(ById::new(store)),
            executions: batched(ById::new(store)),
            timeline_events: batched(ById::new(store)),
            messages: batched(ById::new(store)),
            llm_interactions: batched(ById::new(store)),
            mcp_interactions: batched(ById::new(store)),
            chats: batched(ById::new(store)),
            chat_user_messages: batched(ById::new(store)),
            stages_by_session: batched(StagesBySession { store: plain() }),
            executions_by_stage: batched(ExecutionsByStage { store: plain() }),
            sub_agents_by_parent: batched(SubAgentsByParent { store: plain() }),
            messages_by_execution: batched(MessagesByExecution { store: plain() }),
            conversation_by_llm_interaction: batched(ConversationByLlmInteraction {
                store: plain(),
            }),
            chats_by_session: batched(ChatsBySession { store: plain() }),
            user_messages_by_chat: batched(UserMessagesByChat { store: plain() }),
            stage_by_chat_user_message: batched(StageByChatUserMessage { store: plain() }),
            counts_by_session: batched(CountsBySession { store: plain() }),
            status_changes_by_session: batched(StatusChangesBySession { store: plain() }),
            timeline: per_scope!(TimelinePages),
            llm_interactions_by: per_scope!(LlmInteractionsBy),
            mcp_interactions_by: per_scope!(McpInteractionsBy),
            token_usage_by: per_scope!(TokenUsageBy),
        }
    }
}
