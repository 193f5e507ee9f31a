//! The relationships that sessions, stages and agent executions share. Each reads the records
//! under its parent by the parent's [`Scope`], so it is declared once here, in a part that each
//! parent flattens into its own object (`#[graphql(flatten)]`): the fields take the part's place
//! among the parent's, and a relationship added to a part appears at every level that has it.
//!
//! A part's own GraphQL name never reaches the schema (no field is of its type, so the schema
//! drops it as unused), and every parent flattens the same parts, so each gets the same fields.

use async_graphql::{Context, Object, Result};
use uuid::Uuid;

use super::TokenUsage;
use super::connection::{
    self, LlmInteractionConnection, McpInteractionConnection, MessageConnection,
};
use super::loaders;
use super::timeline::{TimelineConnection, TimelineFilterInput, timeline_page};
use crate::api::cost;
use crate::api::pagination::PageArgs;
use crate::store::{ExecutionRow, Key, Scope, SessionRow, StageRow};

/// The records under one session, stage or agent execution.
#[derive(Clone, Copy)]
pub(crate) struct Under {
    scope: Scope,
    parent: Uuid,
    /// The session it belongs to: a timeline cursor is only good within its session.
    session: Uuid,
}

impl Under {
    pub(crate) fn session(row: &SessionRow) -> Self {
        Under {
            scope: Scope::Session,
            parent: row.id,
            session: row.id,
        }
    }

    pub(crate) fn stage(row: &StageRow) -> Self {
        Under {
            scope: Scope::Stage,
            parent: row.id,
            session: row.session_id,
        }
    }

    pub(crate) fn execution(row: &ExecutionRow) -> Self {
        Under {
            scope: Scope::Execution,
            parent: row.id,
            session: row.session_id,
        }
    }

    /// The parent's key: its id within its session.
    fn key(self) -> Key {
        Key::new(self.session, self.parent)
    }
}

/// The timeline under a parent (every level).
pub(crate) struct ScopedTimeline(pub Under);

#[Object]
impl ScopedTimeline {
    /// The reasoning timeline of this agent, or of every agent of this stage or session, by
    /// sequence number, a page at a time: forward with `first`/`after`, backward with
    /// `last`/`before`. Edges are always in sequence order.
    #[graphql(complexity = "cost::page(first, last, child_complexity)")]
    async fn timeline(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "The first this many events after `after` (and before `before`); at most the server's maximum page size. Without `first` and `last`, the first 20. Give `first` or `last`, not both."
        )]
        first: Option<i32>,
        #[graphql(
            desc = "Only events after this cursor (an event's cursor from any timeline of the session)."
        )]
        after: Option<String>,
        #[graphql(
            desc = "The last this many events before `before` (and after `after`): to page backward, the page just before `before`, or without it the latest events; at most the server's maximum page size. Give `first` or `last`, not both."
        )]
        last: Option<i32>,
        #[graphql(
            desc = "Only events before this cursor (an event's cursor from any timeline of the session)."
        )]
        before: Option<String>,
        #[graphql(desc = "Only events of these types and states.")] filter: Option<
            TimelineFilterInput,
        >,
    ) -> Result<TimelineConnection> {
        let Under {
            scope,
            parent,
            session,
        } = self.0;
        let args = PageArgs {
            first,
            after,
            last,
            before,
        };
        timeline_page(ctx, scope, parent, session, args, filter).await
    }
}

/// The messages under a parent (stages and agent executions).
pub(crate) struct ScopedMessages(pub Under);

#[Object]
impl ScopedMessages {
    /// The LLM conversation of this agent, or of every agent of this stage (the seed's
    /// "messages by stage"), a page at a time: each agent's conversation whole, by sequence
    /// number, agents in the order of their ids (creation order, for the ids casefile makes);
    /// forward with `first`/`after`, backward with `last`/`before`.
    #[graphql(complexity = "cost::page(first, last, child_complexity)")]
    async fn messages_connection(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "The first this many messages after `after` (and before `before`); at most the server's maximum page size. Without `first` and `last`, the first 20. Give `first` or `last`, not both."
        )]
        first: Option<i32>,
        #[graphql(desc = "Only messages after this cursor.")] after: Option<String>,
        #[graphql(
            desc = "The last this many messages before `before` (and after `after`); at most the server's maximum page size. Give `first` or `last`, not both."
        )]
        last: Option<i32>,
        #[graphql(desc = "Only messages before this cursor.")] before: Option<String>,
    ) -> Result<MessageConnection> {
        let args = PageArgs {
            first,
            after,
            last,
            before,
        };
        connection::messages(ctx, self.0.scope, self.0.key(), args).await
    }
}

/// The LLM and MCP calls under a parent, and what they cost (every level).
pub(crate) struct ScopedCalls(pub Under);

#[Object]
impl ScopedCalls {
    /// The LLM calls of this agent, or of every agent of this stage or session,
    /// chronologically, a page at a time.
    #[graphql(complexity = "cost::page(first, last, child_complexity)")]
    async fn llm_interactions_connection(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "The first this many LLM interactions after `after` (and before `before`); at most the server's maximum page size. Without `first` and `last`, the first 20. Give `first` or `last`, not both."
        )]
        first: Option<i32>,
        #[graphql(desc = "Only LLM interactions after this cursor.")] after: Option<String>,
        #[graphql(
            desc = "The last this many LLM interactions before `before` (and after `after`); at most the server's maximum page size. Give `first` or `last`, not both."
        )]
        last: Option<i32>,
        #[graphql(desc = "Only LLM interactions before this cursor.")] before: Option<String>,
    ) -> Result<LlmInteractionConnection> {
        let args = PageArgs {
            first,
            after,
            last,
            before,
        };
        connection::llm_interactions(ctx, self.0.scope, self.0.key(), args).await
    }
    /// The MCP calls of this agent, or of every agent of this stage or session,
    /// chronologically, a page at a time.
    #[graphql(complexity = "cost::page(first, last, child_complexity)")]
    async fn mcp_interactions_connection(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "The first this many MCP interactions after `after` (and before `before`); at most the server's maximum page size. Without `first` and `last`, the first 20. Give `first` or `last`, not both."
        )]
        first: Option<i32>,
        #[graphql(desc = "Only MCP interactions after this cursor.")] after: Option<String>,
        #[graphql(
            desc = "The last this many MCP interactions before `before` (and after `after`); at most the server's maximum page size. Give `first` or `last`, not both."
        )]
        last: Option<i32>,
        #[graphql(desc = "Only MCP interactions before this cursor.")] before: Option<String>,
    ) -> Result<McpInteractionConnection> {
        let args = PageArgs {
            first,
            after,
            last,
            before,
        };
        connection::mcp_interactions(ctx, self.0.scope, self.0.key(), args).await
    }
    /// Tokens and estimated cost of the LLM calls of this agent, or of every agent of this
    /// stage or session.
    #[graphql(complexity = "cost::aggregate(cost::ROLL_UP, child_complexity)")]
    async fn token_usage(&self, ctx: &Context<'_>) -> Result<TokenUsage> {
        let row = loaders(ctx)
            .token_usage_by
            .get(self.0.scope)
            .load_one(self.0.key())
            .await?;
        Ok(row.unwrap_or_default().into())
    }
}
