//! Relay connections over relationships that can grow without bound (see the README's naming
//! rule: `<field>Connection`, the plain list deprecated for one release). Each is a page of a
//! keyset order read by a batched loader, one statement per relationship, with `totalCount`.

use std::collections::HashMap;
use std::sync::Arc;

use async_graphql::connection::PageInfo;
use async_graphql::{ComplexObject, Context, Result, SimpleObject};
use uuid::Uuid;

use super::{AuditRecord, Chat, ChatUserMessage, LlmInteraction, McpInteraction, Message, loaders};
use crate::api::Limits;
use crate::api::cost;
use crate::api::loaders::{Load, Loader};
use crate::api::pagination::{PageArgs, edges_of};
use crate::cursor::{
    chat_activity_cursor, decode_chat_activity_cursor, decode_message_cursor,
    decode_question_cursor, decode_record_cursor, message_cursor, question_cursor, record_cursor,
};
use crate::store::audit::log::AuditRecordRow;
use crate::store::chats::ChatListFilter;
use crate::store::child_pages::{ChildPageKey, Payloads};
use crate::store::mcp_search::McpSearchFilter;
use crate::store::{
    ChatRow, ChatUserMessageRow, CountedPage, Key, LlmInteractionRow, McpInteractionRow,
    MessageRow, Record, Scope, SentMessageRow, Store,
};

/// Declares a connection type and its edge type over `$node` (a wrapper of `Arc<$row>`), whose
/// cursor is `$cursor` of a row.
macro_rules! connection {
    ($connection:ident, $edge:ident, $node:ident($row:ty), $what:literal, $cursor:expr) => {
        #[doc = concat!("A page of ", $what, ".")]
        #[derive(SimpleObject)]
        pub struct $connection {
            /// The page's items, each with its cursor.
            edges: Vec<$edge>,
            /// Where this page is: whether items lie before and after it, and the cursors to
            /// page on from either end.
            page_info: PageInfo,
            /// How many items the whole list holds.
            total_count: i64,
        }

        #[doc = concat!("One of ", $what, ", and its cursor.")]
        #[derive(SimpleObject)]
        pub struct $edge {
            /// Pass as `after` or `before` to page on after or before this item.
            cursor: String,
            /// The item.
            node: $node,
        }

        impl From<CountedPage<Arc<$row>>> for $connection {
            fn from(CountedPage { page, total }: CountedPage<Arc<$row>>) -> Self {
                let cursor: fn(&$row) -> String = $cursor;
                let (edges, page_info) = edges_of(
                    page,
                    |row| $edge {
                        cursor: cursor(&row),
                        node: $node(row),
                    },
                    |e| &e.cursor,
                );
                $connection {
                    edges,
                    page_info,
                    total_count: total,
                }
            }
        }
    };
}

connection!(
    MessageConnection,
    MessageEdge,
    Message(MessageRow),
    "messages: each agent's conversation whole, by sequence number (agents in the order of their ids: creation order, for the ids casefile makes)",
    |row| message_cursor((row.execution_id, i64::from(row.sequence_number)))
);

/// What an LLM call sent, as messages: each one's cursor is its place in what was sent.
impl From<CountedPage<Arc<SentMessageRow>>> for MessageConnection {
    fn from(CountedPage { page, total }: CountedPage<Arc<SentMessageRow>>) -> Self {
        let (edges, page_info) = edges_of(
            page,
            |row| MessageEdge {
                cursor: message_cursor((row.message.execution_id, i64::from(row.position))),
                node: Message(row.message.clone()),
            },
            |e| &e.cursor,
        );
        MessageConnection {
            edges,
            page_info,
            total_count: total,
        }
    }
}

connection!(
    LlmInteractionConnection,
    LlmInteractionEdge,
    LlmInteraction(LlmInteractionRow),
    "LLM interactions, chronologically",
    |row| record_cursor((row.created_at, row.id))
);
connection!(
    McpInteractionConnection,
    McpInteractionEdge,
    McpInteraction(McpInteractionRow),
    "MCP interactions, chronologically",
    |row| record_cursor((row.created_at, row.id))
);
connection!(
    ChatConnection,
    ChatEdge,
    Chat(ChatRow),
    "a session's chats, oldest first",
    |row| record_cursor((row.created_at, row.id))
);
connection!(
    ChatQuestionConnection,
    ChatQuestionEdge,
    ChatUserMessage(ChatUserMessageRow),
    "a chat's questions, oldest first",
    |row| question_cursor((row.created_at, row.id))
);

connection!(
    SessionAuditConnection,
    SessionAuditEdge,
    AuditRecord(AuditRecordRow),
    "a session's audit records, oldest first",
    |row| record_cursor((row.at, row.id))
);

/// One page, through `loader`, of the children of `parent` (by key), with cursors decoded by
/// `decode`.
async fn page_of<L, A, B, C>(
    ctx: &Context<'_>,
    loader: &Loader<L>,
    parent: Key,
    args: PageArgs,
    decode: fn(&str) -> crate::error::Result<(A, B)>,
) -> Result<C>
where
    L: Load<Key = ChildPageKey<A, B>>,
    L::Value: Default,
    C: From<L::Value>,
{
    let page = load_page(ctx, loader, parent, args, Payloads::default(), decode).await?;
    Ok(C::from(page))
}

/// What [`page_of`] reads, with the `payloads` of its rows (interactions').
async fn load_page<L, A, B>(
    ctx: &Context<'_>,
    loader: &Loader<L>,
    parent: Key,
    args: PageArgs,
    payloads: Payloads,
    decode: fn(&str) -> crate::error::Result<(A, B)>,
) -> Result<L::Value>
where
    L: Load<Key = ChildPageKey<A, B>>,
    L::Value: Default,
{
    let slice = args.slice(ctx.data_unchecked::<Limits>(), decode)?;
    let page = loader
        .load_one(ChildPageKey {
            session: parent.session,
            parent: parent.id,
            slice,
            counted: ctx.look_ahead().field("totalCount").exists(),
            payloads,
        })
        .await?
        .unwrap_or_default();
    Ok(page)
}

/// Whether the nodes of the connection being resolved select any of `fields`.
fn nodes_select(ctx: &Context<'_>, fields: &[&str]) -> bool {
    let node = ctx.look_ahead().field("edges").field("node");
    fields.iter().any(|f| node.field(f).exists())
}

/// A page of the messages of a stage or execution.
pub(crate) async fn messages(
    ctx: &Context<'_>,
    scope: Scope,
    parent: Key,
    args: PageArgs,
) -> Result<MessageConnection> {
    let loader = loaders(ctx).message_pages.get(scope);
    page_of(ctx, loader, parent, args, decode_message_cursor).await
}

/// A page of the conversation of an LLM interaction.
pub(crate) async fn conversation(
    ctx: &Context<'_>,
    interaction: Key,
    args: PageArgs,
) -> Result<MessageConnection> {
    let loader = &loaders(ctx).conversation_pages;
    page_of(ctx, loader, interaction, args, decode_message_cursor).await
}

/// The payloads a page read with its rows, by their rows' keys.
fn read_in<R: Record, P: Clone>(
    rows: &[Arc<R>],
    payload: impl Fn(&R) -> &Option<P>,
) -> HashMap<Key, P> {
    (rows.iter())
        .filter_map(|r| Some((Key::new(r.session()?, r.id()), payload(r).clone()?)))
        .collect()
}

/// A page of the LLM interactions of a session, stage or execution. The payloads its nodes
/// select are read by the page's statement and kept in the loaders their fields ask.
pub(crate) async fn llm_interactions(
    ctx: &Context<'_>,
    scope: Scope,
    parent: Key,
    args: PageArgs,
) -> Result<LlmInteractionConnection> {
    let payloads = Payloads {
        request: nodes_select(ctx, &["llmRequest"]),
        rest: nodes_select(ctx, &["llmResponse", "thinkingContent", "responseMetadata"]),
    };
    let loaders = loaders(ctx);
    let loader = loaders.llm_interaction_pages.get(scope);
    let CountedPage { page, total } =
        load_page(ctx, loader, parent, args, payloads, decode_record_cursor).await?;
    loaders
        .llm_requests
        .prime(read_in(&page.rows, |r| &r.request));
    loaders
        .llm_payloads
        .prime(read_in(&page.rows, |r| &r.payload));
    let page = page.map(|r| r.interaction.clone());
    Ok(CountedPage { page, total }.into())
}

/// A page of the MCP interactions of a session, stage or execution, with the payloads its
/// nodes select (see [`llm_interactions`]).
pub(crate) async fn mcp_interactions(
    ctx: &Context<'_>,
    scope: Scope,
    parent: Key,
    args: PageArgs,
) -> Result<McpInteractionConnection> {
    let payloads = Payloads {
        request: false,
        rest: nodes_select(ctx, &["toolArguments", "toolResult", "availableTools"]),
    };
    let loaders = loaders(ctx);
    let loader = loaders.mcp_interaction_pages.get(scope);
    let CountedPage { page, total } =
        load_page(ctx, loader, parent, args, payloads, decode_record_cursor).await?;
    loaders
        .mcp_payloads
        .prime(read_in(&page.rows, |r| &r.payload));
    let page = page.map(|r| r.interaction.clone());
    Ok(CountedPage { page, total }.into())
}

/// A page of the chats of a session (the deleted ones only when asked for).
pub(crate) async fn chats(
    ctx: &Context<'_>,
    session: Uuid,
    include_deleted: bool,
    args: PageArgs,
) -> Result<ChatConnection> {
    let session = Key::new(session, session);
    if include_deleted {
        let loader = &loaders(ctx).chat_pages_with_deleted;
        page_of(ctx, loader, session, args, decode_record_cursor).await
    } else {
        let loader = &loaders(ctx).chat_pages;
        page_of(ctx, loader, session, args, decode_record_cursor).await
    }
}

/// A page of the questions of a chat.
pub(crate) async fn questions(
    ctx: &Context<'_>,
    chat: Key,
    args: PageArgs,
) -> Result<ChatQuestionConnection> {
    let loader = &loaders(ctx).question_pages_by_chat;
    page_of(ctx, loader, chat, args, decode_question_cursor).await
}

/// A page of MCP interactions across sessions, newest first.
#[derive(SimpleObject)]
#[graphql(complex)]
pub struct McpInteractionSearchConnection {
    /// The interactions of this page, each with its cursor.
    edges: Vec<McpInteractionEdge>,
    /// Where this page is: whether interactions lie before and after it, and the cursors to
    /// page on from either end.
    page_info: PageInfo,
    #[graphql(skip)]
    filter: McpSearchFilter,
}

#[ComplexObject]
impl McpInteractionSearchConnection {
    /// How many interactions match the filter, across all pages (counted only when asked
    /// for).
    #[graphql(complexity = "cost::aggregate(cost::COUNT, child_complexity)")]
    async fn total_count(&self, ctx: &Context<'_>) -> Result<i64> {
        Ok(ctx
            .data_unchecked::<Store>()
            .count_mcp_interactions(&self.filter)
            .await?)
    }
}

/// A page of the MCP interactions matching `filter`, newest first.
pub(crate) async fn search_mcp_interactions(
    ctx: &Context<'_>,
    filter: McpSearchFilter,
    args: PageArgs,
) -> Result<McpInteractionSearchConnection> {
    let slice = args.slice(ctx.data_unchecked::<Limits>(), decode_record_cursor)?;
    let page = ctx
        .data_unchecked::<Store>()
        .search_mcp_interactions(&filter, &slice)
        .await?;
    let (edges, page_info) = edges_of(
        page,
        |row| McpInteractionEdge {
            cursor: record_cursor((row.created_at, row.id)),
            node: McpInteraction(Arc::new(row)),
        },
        |e| &e.cursor,
    );
    Ok(McpInteractionSearchConnection {
        edges,
        page_info,
        filter,
    })
}

/// A page of chats across sessions, most recently active first.
#[derive(SimpleObject)]
#[graphql(complex)]
pub struct ChatListConnection {
    /// The chats of this page, each with its cursor.
    edges: Vec<ChatListEdge>,
    /// Where this page is: whether chats lie before and after it, and the cursors to page on
    /// from either end.
    page_info: PageInfo,
    #[graphql(skip)]
    filter: ChatListFilter,
}

/// A chat in the list of chats by activity, and its cursor.
#[derive(SimpleObject)]
pub struct ChatListEdge {
    /// Pass as `after` or `before` to page on after or before this chat (in this list only).
    cursor: String,
    /// The chat.
    node: Chat,
}

#[ComplexObject]
impl ChatListConnection {
    /// How many chats the list holds, across all pages (counted only when asked for).
    #[graphql(complexity = "cost::aggregate(cost::COUNT, child_complexity)")]
    async fn total_count(&self, ctx: &Context<'_>) -> Result<i64> {
        Ok(ctx
            .data_unchecked::<Store>()
            .count_chats(&self.filter)
            .await?)
    }
}

/// A page of the chats matching `filter`, most recently active first.
pub(crate) async fn list_chats(
    ctx: &Context<'_>,
    filter: ChatListFilter,
    args: PageArgs,
) -> Result<ChatListConnection> {
    let slice = args.slice(ctx.data_unchecked::<Limits>(), decode_chat_activity_cursor)?;
    let page = ctx
        .data_unchecked::<Store>()
        .list_chats(&filter, &slice)
        .await?;
    let (edges, page_info) = edges_of(
        page,
        |row| ChatListEdge {
            cursor: chat_activity_cursor((row.updated_at, row.id)),
            node: Chat(Arc::new(row)),
        },
        |e| &e.cursor,
    );
    Ok(ChatListConnection {
        edges,
        page_info,
        filter,
    })
}

/// A page of a session's audit trail.
pub(crate) async fn session_audit(
    ctx: &Context<'_>,
    session: Uuid,
    args: PageArgs,
) -> Result<SessionAuditConnection> {
    let loader = &loaders(ctx).session_audit_pages;
    let session = Key::new(session, session);
    page_of(ctx, loader, session, args, decode_record_cursor).await
}
