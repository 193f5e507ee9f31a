use async_graphql::{Context, ID, Interface};

use super::*;
use crate::api::ids::{self, NodeType};
use async_graphql::Result;

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
}
