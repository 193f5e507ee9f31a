use async_graphql::{Context, ID, Interface};

use super::*;
use crate::api::guards::{across_sessions, caller, may_read};
use crate::api::ids::{self, NodeType};
use async_graphql::Result;
use uuid::Uuid;

/// An object with a global ID that `node(id:)` can fetch (Relay's object identification).
#[derive(Interface)]
#[graphql(field(name = "id", ty = "ID", desc = "Global ID."))]
pub enum Node {
    Session(Session),
    Stage(Stage),
    AgentExecution(AgentExecution),
    TimelineEvent(TimelineEvent),
    Message(Message),
    LlmInteraction(LlmInteraction),
    McpInteraction(McpInteraction),
    Chat(Chat),
    ChatUserMessage(ChatUserMessage),
    Chain(Chain),
}

impl Node {
    /// Fetches the record behind a global ID; `None` when it does not exist.
    pub async fn load(ctx: &Context<'_>, id: &ID) -> Result<Option<Node>> {
        let (node_type, uuid) = ids::decode(id)?;
        // A global id names no session: each record is found by its id alone.
        let (sessions, l) = (&loaders(ctx).sessions, &loaders(ctx).nodes);
        Ok(match node_type {
            NodeType::Session => sessions
                .load_one(uuid)
                .await?
                .map(|r| Node::Session(Session(r))),
            NodeType::Stage => l
                .stages
                .load_one(uuid)
                .await?
                .map(|r| Node::Stage(Stage(r))),
            NodeType::AgentExecution => l
                .executions
                .load_one(uuid)
                .await?
                .map(|r| Node::AgentExecution(AgentExecution(r))),
            NodeType::TimelineEvent => l
                .timeline_events
                .load_one(uuid)
                .await?
                .map(|r| Node::TimelineEvent(TimelineEvent(r))),
            NodeType::Message => l
                .messages
                .load_one(uuid)
                .await?
                .map(|r| Node::Message(Message(r))),
            NodeType::LlmInteraction => l
                .llm_interactions
                .load_one(uuid)
                .await?
                .map(|r| Node::LlmInteraction(LlmInteraction(r))),
            NodeType::McpInteraction => l
                .mcp_interactions
                .load_one(uuid)
                .await?
                .map(|r| Node::McpInteraction(McpInteraction(r))),
            NodeType::Chat => l.chats.load_one(uuid).await?.map(|r| Node::Chat(Chat(r))),
            NodeType::ChatUserMessage => l
                .chat_user_messages
                .load_one(uuid)
                .await?
                .map(|r| Node::ChatUserMessage(ChatUserMessage(r))),
            NodeType::Chain => l
                .chains
                .load_one(uuid)
                .await?
                .map(|r| Node::Chain(Chain(r))),
        })
    }

    /// The session it belongs to (none: a chain version, which belongs to none).
    pub fn session_id(&self) -> Option<Uuid> {
        Some(match self {
            Node::Session(n) => n.0.id,
            Node::Stage(n) => n.0.session_id,
            Node::AgentExecution(n) => n.0.session_id,
            Node::TimelineEvent(n) => n.0.session_id,
            Node::Message(n) => n.0.session_id,
            Node::LlmInteraction(n) => n.0.session_id,
            Node::McpInteraction(n) => n.0.session_id,
            Node::Chat(n) => n.0.session_id,
            Node::ChatUserMessage(n) => n.0.session_id,
            Node::Chain(_) => return None,
        })
    }

    /// The record behind a global ID, when the caller may read it: a share link reads its own
    /// session's records only (FORBIDDEN otherwise, a chain version included).
    pub async fn load_readable(ctx: &Context<'_>, id: &ID) -> Result<Option<Node>> {
        let node = Node::load(ctx, id).await?;
        if caller(ctx)?.scope.is_some()
            && let Some(node) = &node
        {
            match node.session_id() {
                Some(session) => may_read(ctx, session)?,
                None => across_sessions(ctx)?,
            }
        }
        Ok(node)
    }
}
