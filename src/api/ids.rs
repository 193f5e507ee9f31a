//! Opaque global IDs for the `Node` interface: base64 of `Type:uuid`, as Relay clients expect.
//! Fields that take the id of one known type also accept the bare UUID.

use async_graphql::ID;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use uuid::Uuid;

use crate::error::{Error, Result};

/// The types that have global IDs (GraphQL type names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeType {
    Session,
    Stage,
    AgentExecution,
    TimelineEvent,
    Message,
    LlmInteraction,
    McpInteraction,
    Chat,
    ChatUserMessage,
    Chain,
}

impl NodeType {
    const ALL: [NodeType; 10] = [
        Self::Session,
        Self::Stage,
        Self::AgentExecution,
        Self::TimelineEvent,
        Self::Message,
        Self::LlmInteraction,
        Self::McpInteraction,
        Self::Chat,
        Self::ChatUserMessage,
        Self::Chain,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Session => "Session",
            Self::Stage => "Stage",
            Self::AgentExecution => "AgentExecution",
            Self::TimelineEvent => "TimelineEvent",
            Self::Message => "Message",
            Self::LlmInteraction => "LLMInteraction",
            Self::McpInteraction => "MCPInteraction",
            Self::Chat => "Chat",
            Self::ChatUserMessage => "ChatUserMessage",
            Self::Chain => "Chain",
        }
    }
}

/// The global ID of a record.
pub fn encode(node_type: NodeType, id: Uuid) -> ID {
    ID(STANDARD.encode(format!("{}:{id}", node_type.name())))
}

/// Splits a global ID into its type and uuid.
pub fn decode(id: &str) -> Result<(NodeType, Uuid)> {
    let malformed = || Error::bad_input(format!("\"{id}\" is not a valid id"));
    let bytes = STANDARD.decode(id.trim()).map_err(|_| malformed())?;
    let text = String::from_utf8(bytes).map_err(|_| malformed())?;
    let (type_name, uuid) = text.split_once(':').ok_or_else(malformed)?;
    let node_type = NodeType::ALL
        .into_iter()
        .find(|t| t.name() == type_name)
        .ok_or_else(malformed)?;
    let uuid = Uuid::parse_str(uuid).map_err(|_| malformed())?;
    Ok((node_type, uuid))
}

/// The uuid behind an id that must be of `expected` type: its global ID or its bare UUID.
pub fn decode_as(expected: NodeType, id: &str) -> Result<Uuid> {
    if let Ok(uuid) = Uuid::parse_str(id.trim()) {
        return Ok(uuid);
    }
    let (node_type, uuid) = decode(id)?;
    if node_type != expected {
        return Err(Error::bad_input(format!(
            "id \"{id}\" is a {} id, expected a {} id",
            node_type.name(),
            expected.name()
        )));
    }
    Ok(uuid)
}

/// The uuid behind an event source's `agentId`: an agent execution's id, or the session's (the
/// orchestrator's), global or bare.
pub fn decode_source(id: &str) -> Result<Uuid> {
    match decode(id) {
        Ok((NodeType::Session, uuid)) => Ok(uuid),
        _ => decode_as(NodeType::AgentExecution, id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_type() {
        let uuid = Uuid::now_v7();
        for t in NodeType::ALL {
            let id = encode(t, uuid);
            assert_eq!(decode(&id).unwrap(), (t, uuid));
            assert_eq!(decode_as(t, &id).unwrap(), uuid);
        }
    }

    #[test]
    fn rejects_malformed_and_foreign_ids() {
        assert!(decode("not base64!").is_err());
        assert!(decode(&STANDARD.encode("Nope:123")).is_err());
        assert!(decode(&STANDARD.encode("Session:not-a-uuid")).is_err());
        let stage = encode(NodeType::Stage, Uuid::now_v7());
        let err = decode_as(NodeType::Session, &stage).unwrap_err();
        assert!(err.to_string().contains("expected a Session id"), "{err}");
    }
}
