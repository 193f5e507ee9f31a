//! The queries, each written for casefile and for PostGraphile 5 (whose names are inflected from
//! the foreign keys), and a normal form of their answers to check that both return the same data.

use serde_json::{Map, Value, json};

/// What a query's requests rotate over.
#[derive(Clone, Copy, PartialEq)]
pub enum By {
    /// Pages of 20 sessions (newest first), by cursor.
    Page,
    /// One session, by id.
    Session,
}

pub struct Query {
    pub name: &'static str,
    pub by: By,
    casefile: &'static str,
    peer: &'static str,
}

impl Query {
    /// A request body for one server; `arg` is a page cursor (`null` for the first) or a session id.
    pub fn body(&self, peer: bool, arg: &Value) -> String {
        let (query, variables) = match (self.by, peer) {
            (By::Page, false) => (self.casefile, json!({ "after": arg })),
            (By::Page, true) => (self.peer, json!({ "after": arg })),
            (By::Session, false) => (self.casefile, json!({ "id": arg })),
            (By::Session, true) => (self.peer, json!({ "id": arg })),
        };
        json!({ "query": query, "variables": variables }).to_string()
    }
}

/// The dashboard's session list.
pub const LIST: Query = Query {
    name: "list",
    by: By::Page,
    casefile: "query List($after: String) { sessions(first: 20, after: $after) { pageInfo { endCursor } \
        edges { node { uuid alertType status author chainId \
        stages { uuid name stageIndex status executions { uuid agentName agentIndex status } } } } } }",
    peer: "query List($after: Cursor) { sessions(first: 20, after: $after, \
        orderBy: [CREATED_AT_DESC, ROW_ID_DESC], condition: { deletedAt: null }) { pageInfo { endCursor } \
        nodes { rowId alertType status author chainId \
        stages(orderBy: STAGE_INDEX_ASC) { nodes { rowId stageName stageIndex status \
        agentExecutionsByStageIdAndSessionId(orderBy: AGENT_INDEX_ASC) { nodes { rowId agentName agentIndex status } } } } } } }",
};

/// The session page's reasoning tab: every agent's timeline, messages and interactions.
pub const SESSION: Query = Query {
    name: "session",
    by: By::Session,
    casefile: "query Session($id: ID!) { session(id: $id) { uuid alertType status finalAnalysis executiveSummary \
        stages { uuid name stageIndex status executions { uuid agentName agentIndex status llmModel \
        timeline(first: 100) { edges { node { uuid eventType status content } } } \
        messagesConnection(first: 100) { edges { node { uuid sequenceNumber role content } } } \
        llmInteractionsConnection(first: 100) { edges { node { uuid interactionType modelName inputTokens outputTokens llmResponse } } } \
        mcpInteractionsConnection(first: 100) { edges { node { uuid serverName toolName toolArguments toolResult } } } } } } }",
    peer: "query Session($id: UUID!) { session(rowId: $id) { rowId alertType status finalAnalysis executiveSummary \
        stages(orderBy: STAGE_INDEX_ASC) { nodes { rowId stageName stageIndex status \
        agentExecutionsByStageIdAndSessionId(orderBy: AGENT_INDEX_ASC) { nodes { rowId agentName agentIndex status llmModel \
        timelineEventsByExecutionIdAndStageIdAndSessionId(first: 100, orderBy: SEQUENCE_NUMBER_ASC) { nodes { rowId eventType status content } } \
        messagesByExecutionIdAndStageIdAndSessionId(orderBy: SEQUENCE_NUMBER_ASC) { nodes { rowId sequenceNumber role content } } \
        llmInteractionsByExecutionIdAndStageIdAndSessionId(orderBy: [CREATED_AT_ASC, ROW_ID_ASC]) { nodes { rowId interactionType modelName inputTokens outputTokens llmResponse } } \
        mcpInteractionsByExecutionIdAndStageIdAndSessionId(orderBy: [CREATED_AT_ASC, ROW_ID_ASC]) { nodes { rowId serverName toolName toolArguments toolResult } } } } } } } }",
};

/// The debug tab: every LLM interaction with its payloads and the conversation it sent, every
/// MCP interaction with its arguments and result.
pub const DEBUG: Query = Query {
    name: "debug",
    by: By::Session,
    casefile: "query Debug($id: ID!) { session(id: $id) { uuid \
        llmInteractionsConnection(first: 100) { edges { node { uuid interactionType modelName inputTokens outputTokens totalTokens thinkingContent \
        errorMessage llmRequest llmResponse responseMetadata \
        conversationConnection(first: 100) { edges { node { uuid sequenceNumber role content toolCalls } } } } } } \
        mcpInteractionsConnection(first: 100) { edges { node { uuid interactionType serverName toolName toolArguments toolResult availableTools errorMessage } } } } }",
    peer: "query Debug($id: UUID!) { session(rowId: $id) { rowId \
        llmInteractions(orderBy: [CREATED_AT_ASC, ROW_ID_ASC]) { nodes { rowId interactionType modelName inputTokens outputTokens totalTokens thinkingContent \
        errorMessage llmRequest llmResponse responseMetadata \
        conversation { nodes { rowId sequenceNumber role content toolCalls } } } } \
        mcpInteractions(orderBy: [CREATED_AT_ASC, ROW_ID_ASC]) { nodes { rowId interactionType serverName toolName toolArguments toolResult availableTools errorMessage } } } }",
};

/// Every relationship of 20 sessions, down to timeline, messages and interactions.
pub const DEEP: Query = Query {
    name: "deep",
    by: By::Page,
    casefile: "query Deep($after: String) { sessions(first: 20, after: $after) { edges { node { uuid alertType status \
        chatsConnection(first: 100) { edges { node { uuid questionsConnection(first: 100) { edges { node { uuid content } } } } } } \
        stages { uuid name status executions { uuid agentName status subAgents { uuid agentName } \
        timeline(first: 100) { edges { node { uuid eventType content } } } \
        messagesConnection(first: 100) { edges { node { uuid role content } } } \
        llmInteractionsConnection(first: 100) { edges { node { uuid modelName inputTokens lastMessage { uuid } } } } \
        mcpInteractionsConnection(first: 100) { edges { node { uuid toolName } } } } } } } } }",
    peer: "query Deep($after: Cursor) { sessions(first: 20, after: $after, \
        orderBy: [CREATED_AT_DESC, ROW_ID_DESC], condition: { deletedAt: null }) { nodes { rowId alertType status \
        chats(orderBy: [CREATED_AT_ASC, ROW_ID_ASC]) { nodes { rowId chatUserMessagesByChatIdAndSessionId(orderBy: [CREATED_AT_ASC, ROW_ID_ASC]) { nodes { rowId content } } } } \
        stages(orderBy: STAGE_INDEX_ASC) { nodes { rowId stageName status \
        agentExecutionsByStageIdAndSessionId(orderBy: AGENT_INDEX_ASC) { nodes { rowId agentName status \
        agentExecutionsByParentExecutionIdAndSessionId(orderBy: AGENT_INDEX_ASC) { nodes { rowId agentName } } \
        timelineEventsByExecutionIdAndStageIdAndSessionId(first: 100, orderBy: SEQUENCE_NUMBER_ASC) { nodes { rowId eventType content } } \
        messagesByExecutionIdAndStageIdAndSessionId(orderBy: SEQUENCE_NUMBER_ASC) { nodes { rowId role content } } \
        llmInteractionsByExecutionIdAndStageIdAndSessionId(orderBy: [CREATED_AT_ASC, ROW_ID_ASC]) { nodes { rowId modelName inputTokens lastMessageExecutionSession { rowId } } } \
        mcpInteractionsByExecutionIdAndStageIdAndSessionId(orderBy: [CREATED_AT_ASC, ROW_ID_ASC]) { nodes { rowId toolName } } } } } } } } }",
};

pub const ALL: [&Query; 4] = [&LIST, &SESSION, &DEBUG, &DEEP];

/// PostGraphile's names, as casefile's.
const RENAMES: [(&str, &str); 14] = [
    ("rowId", "uuid"),
    ("stageName", "name"),
    ("agentExecutionsByStageIdAndSessionId", "executions"),
    (
        "agentExecutionsByParentExecutionIdAndSessionId",
        "subAgents",
    ),
    (
        "timelineEventsByExecutionIdAndStageIdAndSessionId",
        "timeline",
    ),
    (
        "messagesByExecutionIdAndStageIdAndSessionId",
        "messagesConnection",
    ),
    (
        "llmInteractionsByExecutionIdAndStageIdAndSessionId",
        "llmInteractionsConnection",
    ),
    (
        "mcpInteractionsByExecutionIdAndStageIdAndSessionId",
        "mcpInteractionsConnection",
    ),
    ("llmInteractions", "llmInteractionsConnection"),
    ("mcpInteractions", "mcpInteractionsConnection"),
    ("chats", "chatsConnection"),
    ("conversation", "conversationConnection"),
    (
        "chatUserMessagesByChatIdAndSessionId",
        "questionsConnection",
    ),
    ("lastMessageExecutionSession", "lastMessage"),
];

/// Enums: casefile's are GraphQL enums (`COMPLETED`), PostGraphile's the stored text.
const ENUMS: [&str; 4] = ["status", "eventType", "role", "interactionType"];

/// JSON columns (parsed, should a server send one as a string).
const JSON_FIELDS: [&str; 7] = [
    "llmRequest",
    "llmResponse",
    "responseMetadata",
    "toolArguments",
    "toolResult",
    "availableTools",
    "toolCalls",
];

/// One server's answer in a form both share: connections become lists of their nodes, names
/// and enum values are casefile's, cursors are dropped.
pub fn normal(value: &Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.iter().map(normal).collect()),
        Value::Object(object) => {
            if let Some(nodes) = object.get("nodes") {
                return normal(nodes);
            }
            if let Some(Value::Array(edges)) = object.get("edges") {
                return Value::Array(edges.iter().map(|e| normal(&e["node"])).collect());
            }
            let mut out = Map::new();
            for (key, value) in object {
                if key == "pageInfo" {
                    continue;
                }
                let key = RENAMES
                    .iter()
                    .find(|(from, _)| from == key)
                    .map_or(key.as_str(), |(_, to)| to);
                let value = match value {
                    Value::String(s) if ENUMS.contains(&key) => Value::String(s.to_lowercase()),
                    Value::String(s) if JSON_FIELDS.contains(&key) => {
                        serde_json::from_str(s).unwrap_or_else(|_| value.clone())
                    }
                    _ => normal(value),
                };
                out.insert(key.to_owned(), value);
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// Where two normal forms first differ, in words; `None` when they are equal.
pub fn difference(path: &str, a: &Value, b: &Value) -> Option<String> {
    match (a, b) {
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                return Some(format!("{path}: {} items vs {}", x.len(), y.len()));
            }
            x.iter()
                .zip(y)
                .enumerate()
                .find_map(|(i, (x, y))| difference(&format!("{path}[{i}]"), x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            for key in x.keys().chain(y.keys()) {
                let (Some(vx), Some(vy)) = (x.get(key), y.get(key)) else {
                    return Some(format!("{path}.{key}: present on one side only"));
                };
                if let Some(d) = difference(&format!("{path}.{key}"), vx, vy) {
                    return Some(d);
                }
            }
            None
        }
        _ if a == b => None,
        _ => {
            let short = |v: &Value| v.to_string().chars().take(120).collect::<String>();
            Some(format!("{path}: {} vs {}", short(a), short(b)))
        }
    }
}

/// Counts of what a normal form holds (items in lists, by field), for the equivalence line.
pub fn items(value: &Value) -> usize {
    match value {
        Value::Array(items) => items.len() + items.iter().map(self::items).sum::<usize>(),
        Value::Object(object) => object.values().map(self::items).sum(),
        _ => 0,
    }
}
