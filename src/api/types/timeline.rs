use std::sync::Arc;

use async_graphql::connection::PageInfo;
use async_graphql::{Context, ID, InputObject, Object, SimpleObject};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{
    AgentExecution, LlmInteraction, McpInteraction, RequestedToolCall, Session, Stage, loaders,
    required,
};
use crate::api::Limits;
use crate::api::ids::{self, NodeType};
use crate::api::pagination::{PageArgs, edges_of};
use crate::api::scalars::{JsonRef, Text};
use crate::cursor::{EventTypes, TimelinePosition, View};
use crate::model::{TimelineEventStatus, TimelineEventType};
use crate::store::{Key, Scope, TimelineEventRow, TimelineFilter, TimelinePageKey};
use async_graphql::Result;

/// A page of timeline events, in sequence order.
#[derive(SimpleObject)]
#[graphql(name = "TimelineEventConnection")]
pub struct TimelineConnection {
    /// The events of this page, each with its cursor.
    edges: Vec<TimelineEventEdge>,
    /// Where this page is: whether events lie before and after it, and the cursors to page on
    /// from either end.
    page_info: PageInfo,
}

/// A timeline event and its cursor.
#[derive(SimpleObject)]
pub struct TimelineEventEdge {
    /// Pass as `after` or `before` to page on after or before this event (also accepted as
    /// `after` by timeline subscriptions).
    cursor: String,
    /// The event.
    node: TimelineEvent,
}

/// Which events a timeline holds.
#[derive(InputObject, Default)]
#[graphql(name = "TimelineFilter")]
pub struct TimelineFilterInput {
    /// Only events of these types: a context builder reading one stage's `FINAL_ANALYSIS` or
    /// one agent's `MCP_TOOL_CALL` events reads just those (an index serves each type). A
    /// cursor from such a page resumes a `timeline` subscription with the same types or fewer.
    pub event_types: Option<Vec<TimelineEventType>>,
    /// Only events in these states. A cursor from a page filtered by status pages on, but
    /// resumes no subscription: the page passed over events in other states, which may still
    /// be streaming.
    pub status: Option<Vec<TimelineEventStatus>>,
}

/// One page of the timeline under `parent` (a session, stage or execution of `session`).
pub(crate) async fn timeline_page(
    ctx: &Context<'_>,
    scope: Scope,
    parent: Uuid,
    session: Uuid,
    args: PageArgs,
    filter: Option<TimelineFilterInput>,
) -> Result<TimelineConnection> {
    let slice = args.slice(ctx.data_unchecked::<Limits>(), |cursor| {
        Ok(TimelinePosition::decode(cursor, session)?.seen)
    })?;
    let filter = filter.unwrap_or_default();
    // In one order, so that fields asking for the same types share a statement.
    let types = filter.event_types.as_deref().map(EventTypes::of);
    let by_status = filter.status.is_some();
    let filter = TimelineFilter {
        event_types: types.map(EventTypes::to_vec),
        statuses: filter.status,
    };
    let page = loaders(ctx)
        .timeline
        .get(scope)
        .load_one(TimelinePageKey {
            session,
            parent,
            slice,
            filter,
        })
        .await?
        .unwrap_or_default();
    // Each cursor also records how much of the page's streaming events up to it the page
    // showed, so a subscription resumed from it sends the rest of them, and nothing twice. A
    // backward page's cursors are made the same way, in list order: an edge's cursor depends on
    // the page's edges, not on which way the page was taken.
    let view = View {
        stage: (scope == Scope::Stage).then_some(parent),
        execution: (scope == Scope::Execution).then_some(parent),
        types,
    };
    let mut at = TimelinePosition::new(session, view);
    if by_status {
        at = at.filtered_by_status();
    }
    let (edges, page_info) = edges_of(
        page,
        |row| {
            at.pass(row.sequence_number);
            if row.status == TimelineEventStatus::Streaming {
                at.given_up_to(row.sequence_number, row.content.chars().count() as i64);
            }
            TimelineEventEdge {
                cursor: at.encode(),
                node: TimelineEvent(row),
            }
        },
        |e| &e.cursor,
    );
    Ok(TimelineConnection { edges, page_info })
}

pub struct TimelineEvent(pub Arc<TimelineEventRow>);

/// One entry of the reasoning timeline: created when streaming starts, updated while it streams,
/// immutable once finished.
#[Object]
impl TimelineEvent {
    /// Global ID.
    pub async fn id(&self) -> ID {
        ids::encode(NodeType::TimelineEvent, self.0.id)
    }
    /// Database id (UUIDv7).
    async fn uuid(&self) -> Uuid {
        self.0.id
    }
    /// Position in the session's timeline (1, 2, 3, … without gaps).
    async fn sequence_number(&self) -> i64 {
        self.0.sequence_number
    }
    /// What the event shows.
    async fn event_type(&self) -> TimelineEventType {
        self.0.event_type
    }
    /// Streaming, or how it finished.
    async fn status(&self) -> TimelineEventStatus {
        self.0.status
    }
    /// The text so far (final once the event is finished).
    async fn content(&self) -> Text<'_> {
        Text(&self.0.content)
    }
    /// Type-specific details (tool name, server name, …).
    async fn metadata(&self) -> JsonRef<'_> {
        JsonRef(&self.0.metadata)
    }
    /// When the event was created.
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    /// When the event last changed.
    async fn updated_at(&self) -> DateTime<Utc> {
        self.0.updated_at
    }
    /// The session it belongs to.
    async fn session(&self, ctx: &Context<'_>) -> Result<Session> {
        let row = loaders(ctx).sessions.load_one(self.0.session_id).await?;
        Ok(Session(required(row, "session")?))
    }
    /// The stage it belongs to.
    async fn stage(&self, ctx: &Context<'_>) -> Result<Stage> {
        let stage = Key::new(self.0.session_id, self.0.stage_id);
        let row = loaders(ctx).stages.load_one(stage).await?;
        Ok(Stage(required(row, "stage")?))
    }
    /// The agent execution that produced it.
    async fn execution(&self, ctx: &Context<'_>) -> Result<AgentExecution> {
        let row = loaders(ctx)
            .executions
            .load_one(Key::new(self.0.session_id, self.0.execution_id))
            .await?;
        Ok(AgentExecution(required(row, "execution")?))
    }
    /// The LLM call behind it (debug details), once linked.
    async fn llm_interaction(&self, ctx: &Context<'_>) -> Result<Option<LlmInteraction>> {
        let Some(id) = self.0.llm_interaction_id else {
            return Ok(None);
        };
        Ok(loaders(ctx)
            .llm_interactions
            .load_one(Key::new(self.0.session_id, id))
            .await?
            .map(LlmInteraction))
    }
    /// The MCP call behind it (debug details), once linked.
    async fn mcp_interaction(&self, ctx: &Context<'_>) -> Result<Option<McpInteraction>> {
        let Some(id) = self.0.mcp_interaction_id else {
            return Ok(None);
        };
        Ok(loaders(ctx)
            .mcp_interactions
            .load_one(Key::new(self.0.session_id, id))
            .await?
            .map(McpInteraction))
    }
    /// For an `LLM_TOOL_CALL` or `MCP_TOOL_CALL` event: the call it shows, named by its
    /// metadata's `tool_call_id`, as the model requested it (null until an assistant message
    /// of the agent's conversation requests it).
    async fn tool_call(&self, ctx: &Context<'_>) -> Result<Option<RequestedToolCall>> {
        if !matches!(
            self.0.event_type,
            TimelineEventType::LlmToolCall | TimelineEventType::McpToolCall
        ) {
            return Ok(None);
        }
        let metadata: serde_json::Value =
            serde_json::from_str(self.0.metadata.get()).unwrap_or_default();
        let Some(call_id) = metadata.get("tool_call_id").and_then(|id| id.as_str()) else {
            return Ok(None);
        };
        let conversation = Key::new(self.0.session_id, self.0.execution_id);
        RequestedToolCall::find(ctx, conversation, call_id).await
    }
}
