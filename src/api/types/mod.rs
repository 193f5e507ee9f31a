//! The GraphQL object types. Each wraps a stored row; every relationship resolves through the
//! request's [`Loaders`].

mod access;
mod audit;
mod chain;
mod chat;
mod connection;
mod events;
mod execution;
mod interactions;
mod message;
mod node;
mod notification;
mod prices;
mod purge;
mod rollups;
mod scoped;
mod search;
mod session;
mod share_link;
mod stage;
mod stats;
mod timeline;
mod tool_call;

use async_graphql::Context;

use super::loaders::{Loaders, OperationLoaders};
use crate::error::{Error, Result};

pub use access::{ApiToken, SessionHistoryEntry, Viewer};
pub(crate) use audit::audit_log;
pub use audit::{AuditLogFilter, AuditRecord, AuditRecordConnection};
pub(crate) use chain::list_chains;
pub use chain::{Chain, ChainConnection, ChainVersionRef};
pub use chat::{Chat, ChatUserMessage};
pub use connection::{ChatListConnection, McpInteractionSearchConnection};
pub(crate) use connection::{list_chats, search_mcp_interactions};
pub use events::{EventFilterInput, SessionEvent, SessionEventConnection};
pub use execution::AgentExecution;
pub use interactions::{LlmInteraction, McpInteraction};
pub use message::Message;
pub use node::Node;
pub(crate) use notification::list_notifications;
pub use notification::{Notification, NotificationConnection};
pub use prices::ModelPrice;
pub use purge::Purge;
pub use rollups::{SessionCounts, TokenUsage};
pub use search::EdgeSearch;
pub use session::{Session, SessionConnection, SessionCount, SessionEdge};
pub use share_link::ShareLink;
pub use stage::Stage;
pub use stats::SessionStats;
pub use timeline::{TimelineConnection, TimelineEvent, TimelineEventEdge};
pub use tool_call::RequestedToolCall;

pub(crate) fn loaders<'a>(ctx: &Context<'a>) -> &'a Loaders {
    ctx.data_unchecked::<OperationLoaders>().get()
}

/// A parent that foreign keys guarantee; its absence is a bug, not a client error.
pub(crate) fn required<T>(value: Option<T>, what: &str) -> Result<T> {
    value.ok_or_else(|| {
        Error::Internal(format!(
            "{what} is missing although a foreign key requires it"
        ))
    })
}
