//! The subscription root: live, resumable views of sessions.

use std::sync::Arc;

use async_graphql::{Context, ID, Object, Subscription};
use futures::{Stream, StreamExt as _};

use super::ids::{self, NodeType, decode_as};
use super::pagination::decode_timeline_cursor;
use super::types::TimelineEvent;
use crate::error::Error;
use crate::live::Hub;
use crate::live::timeline::{self, Position, Scope, TimelineUpdateKind, Update};
use crate::store::Store;

/// A change to a session's timeline.
pub struct TimelineUpdate(Update);

/// A change to a session's timeline, with the cursor to resume after it.
#[Object]
impl TimelineUpdate {
    /// What happened.
    async fn kind(&self) -> TimelineUpdateKind {
        self.0.kind
    }
    /// The event's global ID.
    async fn event_id(&self) -> ID {
        ids::encode(NodeType::TimelineEvent, self.0.event_id)
    }
    /// The event's position in the session's timeline.
    async fn sequence_number(&self) -> i64 {
        self.0.sequence_number
    }
    /// For `APPENDED`: where `delta` starts, in characters.
    async fn offset(&self) -> Option<i64> {
        self.0.offset
    }
    /// For `APPENDED`: the appended text (consecutive deltas of an event concatenate to exactly
    /// its content).
    async fn delta(&self) -> Option<&str> {
        self.0.delta.as_deref()
    }
    /// For `CREATED` and `FINISHED`: the event as it is then.
    async fn event(&self) -> Option<TimelineEvent> {
        self.0
            .event
            .as_ref()
            .map(|row| TimelineEvent(row.as_ref().clone()))
    }
    /// Pass as `after` to resume right after this update (on any server process).
    async fn cursor(&self) -> &str {
        &self.0.cursor
    }
}

/// Live views of sessions.
pub struct Subscription;

/// Live views of sessions.
#[Subscription]
impl Subscription {
    /// Every change to a session's timeline, in order: events created, content appended (each
    /// delta with its offset), events finished. With `after` (a cursor from an earlier update
    /// or from a timeline connection), first what came after it, then live, with no gap and no
    /// duplicate. Narrow it to one stage or one execution with `stageId` / `executionId`.
    async fn timeline(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The session.")] session_id: ID,
        #[graphql(desc = "Resume after this cursor.")] after: Option<String>,
        #[graphql(desc = "Only this stage's events.")] stage_id: Option<ID>,
        #[graphql(desc = "Only this execution's events.")] execution_id: Option<ID>,
    ) -> async_graphql::Result<impl Stream<Item = async_graphql::Result<TimelineUpdate>> + use<>>
    {
        let session = decode_as(NodeType::Session, &session_id)?;
        let scope = Scope {
            stage: stage_id
                .map(|id| decode_as(NodeType::Stage, &id))
                .transpose()?,
            execution: execution_id
                .map(|id| decode_as(NodeType::AgentExecution, &id))
                .transpose()?,
        };
        let position = match after {
            None => Position::new(session),
            Some(cursor) => match Position::decode(&cursor, session) {
                Some(position) => position?,
                None => {
                    Position::after_sequence(session, decode_timeline_cursor(&cursor, session)?)
                }
            },
        };
        let store = ctx.data_unchecked::<Store>().clone();
        let exists: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM sessions WHERE id = $1)")
                .bind(session)
                .fetch_one(store.pool())
                .await
                .map_err(Error::from)?;
        if !exists {
            return Err(Error::not_found(format!("session {session} does not exist")).into());
        }
        let hub = ctx.data_unchecked::<Arc<Hub>>().clone();
        Ok(timeline::stream(store, hub, position, scope)
            .map(|item| item.map(TimelineUpdate).map_err(async_graphql::Error::from)))
    }
}
