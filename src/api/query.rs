//! The query root.

use async_graphql::{Context, Enum, ID, InputObject, Json, Object};
use chrono::{DateTime, Utc};

use super::cost;
use super::guards::{RoleGuard, SessionReaderGuard, caller, may_read};
use super::ids::{self, NodeType};
use super::pagination::{PageArgs, edges_of};
use super::types::{
    ApiToken, AuditLogFilter, AuditRecordConnection, Chain, ChainConnection, ChainVersionRef,
    ChatListConnection, EdgeSearch, McpInteractionSearchConnection, ModelPrice, Node,
    NotificationConnection, Purge, Session, SessionConnection, SessionCount, SessionEdge,
    SessionStats, Viewer, audit_log, list_chains, list_chats, list_notifications, loaders,
    search_mcp_interactions,
};
use crate::api::Limits;
use crate::cursor::{decode_session_cursor, session_cursor};
use crate::error::Error;
use crate::model::{NotificationStatus, NotificationType, Role, SessionStatus};
use crate::store::ChainKey;
use crate::store::Store;
use crate::store::chains::ChainListFilter;
use crate::store::chats::ChatListFilter;
use crate::store::mcp_search::McpSearchFilter;
use crate::store::notifications::NotificationFilter;
use crate::store::search_words::SearchWords;
use crate::store::sessions::{SessionFilter, SessionSort};
use crate::store::write::chains::check_key;
use crate::store::write::{check_json, check_optional, check_time, limits};
use async_graphql::Result;

/// Narrows the sessions list; all given conditions must hold.
#[derive(InputObject, Default)]
pub struct SessionFilterInput {
    /// Any of these statuses.
    status: Option<Vec<SessionStatus>>,
    /// Exactly this alert type (at most 200 characters).
    alert_type: Option<String>,
    /// Exactly this chain, by name (at most 200 characters): with or without a registered
    /// version.
    chain_id: Option<String>,
    /// Sessions that ran this registered chain version (impact analysis: every session that
    /// used chain X version Y), read along an index.
    chain: Option<ChainVersionRef>,
    /// Exactly this author (at most 200 characters).
    author: Option<String>,
    /// Created strictly after this instant.
    created_after: Option<DateTime<Utc>>,
    /// Created strictly before this instant.
    created_before: Option<DateTime<Utc>>,
    /// Words to find (at most 1,000 characters), as in a web search: `"exact phrase"`, `or`,
    /// `-excluded`. Matched as English (`crashing` finds `crashed`) in the alert type, final
    /// analysis, executive summary, alert data and the text of finished timeline events (an
    /// event is searchable once it finishes). Only the first 60,000 characters of a final
    /// analysis, 20,000 of an executive summary, 40,000 of the alert data (as JSON text) and
    /// 150,000 of an event are indexed, which keeps every document under PostgreSQL's 1 MB
    /// limit; words past those are not found. Order by `RELEVANCE` for the best matches first;
    /// each edge's `matches` says where a session matched. A search the full-text index cannot
    /// serve, or that would cost far more than its results, is refused (`BAD_USER_INPUT`,
    /// naming the rule): one with no word to find (words are letters and digits), one where
    /// all words are excluded (or all of one alternative of `or`), more than 32 words (every
    /// word of a phrase, every excluded and repeated word counts), more than 8 alternatives
    /// joined by `or`, more than 200 characters without a space, or `-` twice in a row.
    search: Option<String>,
    /// The alert data contains this JSON object: `{"cluster": "prod-eu"}` matches alerts whose
    /// data has that key with that value, whatever else they hold (nested objects and arrays
    /// match the same way, as PostgreSQL's `@>`).
    alert_data_contains: Option<Json<serde_json::Value>>,
    /// Include soft-deleted sessions.
    #[graphql(default = false)]
    include_deleted: bool,
    /// Created by this identity (`token:NAME`, or a person's user name from the SSO proxy; at
    /// most 200 characters).
    created_by: Option<String>,
    /// Whose cancellation request (or whose action that cancelled it) is in the status history
    /// (at most 200 characters).
    cancelled_by: Option<String>,
    /// Deleted by this identity, according to the status history (includes deleted sessions; at
    /// most 200 characters).
    deleted_by: Option<String>,
}

/// A `sessions` filter given as JSON outside GraphQL (`casefile export --filter`): the
/// `filter` argument's fields, names and checks.
pub fn session_filter_from_json(json: &str) -> crate::error::Result<SessionFilter> {
    let value: serde_json::Value = serde_json::from_str(json)
        .map_err(|err| Error::bad_input(format!("the filter is not JSON: {err}")))?;
    let value = async_graphql::Value::from_json(value)
        .map_err(|err| Error::bad_input(format!("the filter is not a GraphQL value: {err}")))?;
    let input =
        <SessionFilterInput as async_graphql::InputType>::parse(Some(value)).map_err(|err| {
            Error::bad_input(format!(
                "the filter: {}",
                err.into_server_error(Default::default()).message
            ))
        })?;
    input.validate()
}

impl SessionFilterInput {
    fn validate(self) -> crate::error::Result<SessionFilter> {
        // Nothing longer than its column can match; a NUL cannot even be sent to the database.
        for (field, value, max) in [
            ("alertType", &self.alert_type, limits::NAME),
            ("chainId", &self.chain_id, limits::NAME),
            ("author", &self.author, limits::NAME),
            ("createdBy", &self.created_by, limits::NAME),
            ("cancelledBy", &self.cancelled_by, limits::NAME),
            ("deletedBy", &self.deleted_by, limits::NAME),
        ] {
            check_optional(field, value.as_deref(), max)?;
        }
        check_window(self.created_after, self.created_before)?;
        let chain = self.chain.map(|c| c.key("chain")).transpose()?;
        let search = self.search.as_deref().map(SearchWords::parse).transpose()?;
        let alert_data_contains = match self.alert_data_contains.map(|j| j.0) {
            Some(json) if !json.is_object() => {
                return Err(Error::bad_input(format!(
                    "`alertDataContains` must be a JSON object, got {json}"
                )));
            }
            Some(json) => {
                check_json("alertDataContains", &json, limits::SMALL_JSON)?;
                Some(json)
            }
            None => None,
        };
        Ok(SessionFilter {
            statuses: self.status.unwrap_or_default(),
            alert_type: self.alert_type,
            chain_id: self.chain_id,
            chain,
            author: self.author,
            created_after: self.created_after,
            created_before: self.created_before,
            search,
            alert_data_contains,
            include_deleted: self.include_deleted,
            created_by: self.created_by,
            cancelled_by: self.cancelled_by,
            deleted_by: self.deleted_by,
        })
    }
}

/// Narrows the list of chain versions.
#[derive(InputObject, Default)]
pub struct ChainFilter {
    /// Only this chain's versions (at most 200 characters).
    name: Option<String>,
    /// Deprecated versions too.
    #[graphql(default = false)]
    include_deprecated: bool,
}

impl ChainFilter {
    fn validate(self) -> crate::error::Result<ChainListFilter> {
        check_optional("name", self.name.as_deref(), limits::NAME)?;
        Ok(ChainListFilter {
            name: self.name,
            include_deprecated: self.include_deprecated,
        })
    }
}

/// Narrows the MCP interactions listed across sessions; all given conditions must hold.
#[derive(InputObject, Default)]
#[graphql(name = "MCPInteractionFilter")]
pub struct McpInteractionFilterInput {
    /// Exactly this MCP server (at most 200 characters).
    server_name: Option<String>,
    /// Exactly this tool (at most 200 characters).
    tool_name: Option<String>,
    /// Only those that succeeded (`true`) or failed (`false`: an error message was recorded).
    success: Option<bool>,
    /// Recorded strictly after this instant.
    created_after: Option<DateTime<Utc>>,
    /// Recorded strictly before this instant.
    created_before: Option<DateTime<Utc>>,
}

impl McpInteractionFilterInput {
    fn validate(self, include_deleted: bool) -> crate::error::Result<McpSearchFilter> {
        check_optional("serverName", self.server_name.as_deref(), limits::NAME)?;
        check_optional("toolName", self.tool_name.as_deref(), limits::NAME)?;
        check_window(self.created_after, self.created_before)?;
        Ok(McpSearchFilter {
            server_name: self.server_name,
            tool_name: self.tool_name,
            success: self.success,
            created_after: self.created_after,
            created_before: self.created_before,
            include_deleted,
        })
    }
}

/// Narrows the notifications listed across sessions; all given conditions must hold. One
/// status and one type (not lists): each is read along its own index in the list's order.
#[derive(InputObject, Default)]
#[graphql(name = "NotificationFilter")]
pub struct NotificationFilterInput {
    /// Only this status (`FAILED`: what failed to deliver for good).
    status: Option<NotificationStatus>,
    /// Only this type.
    #[graphql(name = "type")]
    notification_type: Option<NotificationType>,
    /// Only this session's (its global ID or UUID).
    session_id: Option<ID>,
    /// Written strictly after this instant.
    created_after: Option<DateTime<Utc>>,
    /// Written strictly before this instant.
    created_before: Option<DateTime<Utc>>,
    /// Include the notifications of soft-deleted sessions.
    #[graphql(default = false)]
    include_deleted: bool,
}

impl NotificationFilterInput {
    fn validate(self) -> crate::error::Result<NotificationFilter> {
        check_window(self.created_after, self.created_before)?;
        let session_id = self
            .session_id
            .map(|id| ids::decode_as(NodeType::Session, &id))
            .transpose()?;
        Ok(NotificationFilter {
            status: self.status,
            notification_type: self.notification_type,
            session_id,
            created_after: self.created_after,
            created_before: self.created_before,
            include_deleted: self.include_deleted,
        })
    }
}

/// Checks a `createdAfter`/`createdBefore` pair: each a representable instant, in order.
fn check_window(
    after: Option<DateTime<Utc>>,
    before: Option<DateTime<Utc>>,
) -> crate::error::Result<()> {
    for (field, value) in [("createdAfter", after), ("createdBefore", before)] {
        value.map_or(Ok(()), |t| check_time(field, t))?;
    }
    if let (Some(after), Some(before)) = (after, before)
        && after >= before
    {
        return Err(Error::bad_input(
            "`createdAfter` must be earlier than `createdBefore`",
        ));
    }
    Ok(())
}

/// What to order sessions by.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
pub enum SessionOrderField {
    /// Creation time.
    CreatedAt,
    /// Status name, alphabetically.
    Status,
    /// Alert type, alphabetically.
    AlertType,
    /// Author, alphabetically (sessions without an author first).
    Author,
    /// Duration (unfinished sessions first).
    Duration,
    /// Time of the last change to the session itself (its status, analysis, deletion).
    UpdatedAt,
    /// Completion time (sessions that have not completed first).
    CompletedAt,
    /// How well the session matches the filter's `search`, by PostgreSQL's `ts_rank` (a match
    /// in the alert type counts most, then the analysis and summary, then the alert data, then
    /// timeline events): `DESC` for the best matches first. Needs a `search`.
    Relevance,
}

/// Sort direction.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
pub enum OrderDirection {
    /// Smallest first.
    Asc,
    /// Largest first.
    Desc,
}

/// How to order sessions; ties are broken by id, so pages never overlap or skip.
#[derive(InputObject)]
pub struct SessionOrder {
    /// Field to order by.
    #[graphql(default_with = "SessionOrderField::CreatedAt")]
    field: SessionOrderField,
    /// Direction.
    #[graphql(default_with = "OrderDirection::Desc")]
    direction: OrderDirection,
}

impl From<SessionOrderField> for SessionSort {
    fn from(f: SessionOrderField) -> Self {
        match f {
            SessionOrderField::CreatedAt => SessionSort::CreatedAt,
            SessionOrderField::Status => SessionSort::Status,
            SessionOrderField::AlertType => SessionSort::AlertType,
            SessionOrderField::Author => SessionSort::Author,
            SessionOrderField::Duration => SessionSort::Duration,
            SessionOrderField::UpdatedAt => SessionSort::UpdatedAt,
            SessionOrderField::CompletedAt => SessionSort::CompletedAt,
            SessionOrderField::Relevance => SessionSort::Relevance,
        }
    }
}

/// Whose chats to list.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
pub enum ChatOwner {
    /// The caller's own: the chats they opened.
    Me,
    /// Everyone's (admins only).
    Anyone,
}

/// The entry points for reading investigation sessions.
pub struct Query;

/// The entry points for reading investigation sessions.
#[Object]
impl Query {
    /// Any object by its global ID (null when it does not exist).
    #[graphql(guard = "SessionReaderGuard")]
    async fn node(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "A global ID, as returned in any object's `id`.")] id: ID,
    ) -> Result<Option<Node>> {
        Node::load_readable(ctx, &id).await
    }

    /// Several objects by their global IDs, in the same order (null where one does not exist).
    #[graphql(
        complexity = "cost::list(ids.len(), child_complexity)",
        guard = "SessionReaderGuard"
    )]
    async fn nodes(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Global IDs (at most the server's maximum page size).")] ids: Vec<ID>,
    ) -> Result<Vec<Option<Node>>> {
        let max = ctx.data_unchecked::<Limits>().max_page_size;
        if ids.len() > max {
            return Err(Error::bad_input(format!(
                "at most {max} ids per request, got {}",
                ids.len()
            ))
            .into());
        }
        futures::future::try_join_all(ids.iter().map(|id| Node::load_readable(ctx, id))).await
    }

    /// A session by its global ID or UUID (null when it does not exist; soft-deleted sessions
    /// are returned, with `deletedAt` set).
    #[graphql(guard = "SessionReaderGuard")]
    async fn session(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The session's global ID or its UUID.")] id: ID,
    ) -> Result<Option<Session>> {
        let uuid = ids::decode_as(NodeType::Session, &id)?;
        may_read(ctx, uuid)?;
        Ok(loaders(ctx).sessions.load_one(uuid).await?.map(Session))
    }

    /// Sessions, newest first unless ordered otherwise, a page at a time: forward with
    /// `first`/`after`, backward with `last`/`before` (or both cursors, for the sessions
    /// between them). Edges are always in the list's order, whichever way the page was taken;
    /// every cursor works as `after` and as `before`.
    #[graphql(
        complexity = "cost::page(first, last, child_complexity)",
        guard = "RoleGuard(Role::Reader)"
    )]
    #[expect(
        clippy::too_many_arguments,
        reason = "the field's GraphQL arguments: a Relay connection's four, filter and order"
    )]
    async fn sessions(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "The first this many sessions after `after` (and before `before`); at most the server's maximum page size. Without `first` and `last`, the first 20. Give `first` or `last`, not both."
        )]
        first: Option<i32>,
        #[graphql(
            desc = "Only sessions after this cursor (a session's cursor from the same ordering)."
        )]
        after: Option<String>,
        #[graphql(
            desc = "The last this many sessions before `before` (and after `after`): to page backward, the page just before `before`, or without it the end of the list; at most the server's maximum page size. Give `first` or `last`, not both."
        )]
        last: Option<i32>,
        #[graphql(
            desc = "Only sessions before this cursor (a session's cursor from the same ordering)."
        )]
        before: Option<String>,
        #[graphql(desc = "Which sessions (default: all that are not deleted).")] filter: Option<
            SessionFilterInput,
        >,
        #[graphql(desc = "Order (default: newest first).")] order_by: Option<SessionOrder>,
    ) -> Result<SessionConnection> {
        let (sort, descending) = match order_by {
            Some(o) => (
                SessionSort::from(o.field),
                o.direction == OrderDirection::Desc,
            ),
            None => (SessionSort::CreatedAt, true),
        };
        let args = PageArgs {
            first,
            after,
            last,
            before,
        };
        let slice = args.slice(ctx.data_unchecked::<Limits>(), |cursor| {
            decode_session_cursor(cursor, sort)
        })?;
        let filter = filter.unwrap_or_default().validate()?;
        if sort == SessionSort::Relevance && filter.search.is_none() {
            return Err(
                Error::bad_input("ordering by `RELEVANCE` needs a `search` in the filter").into(),
            );
        }
        let store = ctx.data_unchecked::<Store>();
        let page = store
            .list_sessions(&filter, sort, descending, &slice)
            .await?;
        let (edges, page_info) = edges_of(
            page,
            |listed| SessionEdge {
                cursor: session_cursor(sort, sort.key_of(&listed)),
                search: filter.search.clone().map(|words| EdgeSearch {
                    words,
                    rank: listed.search_rank.unwrap_or_default(),
                }),
                node: Session(listed.session.into()),
            },
            |e| &e.cursor,
        );
        Ok(SessionConnection {
            edges,
            page_info,
            count: SessionCount::Matching(Box::new(filter)),
        })
    }

    /// MCP interactions across all sessions, newest first, a page at a time (forward with
    /// `first`/`after`, backward with `last`/`before`): with `filter: { success: false }`, the
    /// audit of failed tool calls. Every combination of filters is read along an index. The
    /// interactions of soft-deleted sessions are left out unless `includeDeleted`.
    #[graphql(
        complexity = "cost::page(first, last, child_complexity)",
        guard = "RoleGuard(Role::Reader)"
    )]
    #[expect(
        clippy::too_many_arguments,
        reason = "the field's GraphQL arguments: a Relay connection's four, filter and includeDeleted"
    )]
    async fn mcp_interactions(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "The first this many interactions after `after` (and before `before`); at most the server's maximum page size. Without `first` and `last`, the first 20. Give `first` or `last`, not both."
        )]
        first: Option<i32>,
        #[graphql(desc = "Only interactions after this cursor (older ones).")] after: Option<
            String,
        >,
        #[graphql(
            desc = "The last this many interactions before `before` (and after `after`); at most the server's maximum page size. Give `first` or `last`, not both."
        )]
        last: Option<i32>,
        #[graphql(desc = "Only interactions before this cursor (newer ones).")] before: Option<
            String,
        >,
        #[graphql(desc = "Which interactions (default: all those of sessions not deleted).")]
        filter: Option<McpInteractionFilterInput>,
        #[graphql(
            desc = "Include the interactions of soft-deleted sessions.",
            default = false
        )]
        include_deleted: bool,
    ) -> Result<McpInteractionSearchConnection> {
        let filter = filter.unwrap_or_default().validate(include_deleted)?;
        let args = PageArgs {
            first,
            after,
            last,
            before,
        };
        search_mcp_interactions(ctx, filter, args).await
    }

    /// Notifications across sessions, newest first, a page at a time (forward with
    /// `first`/`after`, backward with `last`/`before`): with `filter: { status: FAILED }`, what
    /// failed to deliver for good. Every filter is read along an index. The notifications of
    /// soft-deleted sessions are left out unless `includeDeleted`.
    #[graphql(
        complexity = "cost::page(first, last, child_complexity)",
        guard = "RoleGuard(Role::Reader)"
    )]
    async fn notifications(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Which notifications (default: all those of sessions not deleted).")]
        filter: Option<NotificationFilterInput>,
        #[graphql(
            desc = "The first this many notifications after `after` (and before `before`); at most the server's maximum page size. Without `first` and `last`, the first 20. Give `first` or `last`, not both."
        )]
        first: Option<i32>,
        #[graphql(desc = "Only notifications after this cursor (older ones).")] after: Option<
            String,
        >,
        #[graphql(
            desc = "The last this many notifications before `before` (and after `after`); at most the server's maximum page size. Give `first` or `last`, not both."
        )]
        last: Option<i32>,
        #[graphql(desc = "Only notifications before this cursor (newer ones).")] before: Option<
            String,
        >,
    ) -> Result<NotificationConnection> {
        let filter = filter.unwrap_or_default().validate()?;
        let args = PageArgs {
            first,
            after,
            last,
            before,
        };
        list_notifications(ctx, filter, args).await
    }

    /// Chats across sessions, most recently active first (a question asked or an answer ended
    /// moves a chat to the top), a page at a time: forward with `first`/`after`, backward with
    /// `last`/`before`. By default the caller's own; admins may list anyone's. A chat that
    /// becomes active while you page moves to the front, so a later page no longer holds it.
    /// Deleted chats, and the chats of deleted sessions, are left out unless asked for.
    #[graphql(
        complexity = "cost::page(first, last, child_complexity)",
        guard = "RoleGuard(Role::Reader)"
    )]
    #[expect(
        clippy::too_many_arguments,
        reason = "the field's GraphQL arguments: a Relay connection's four and whose chats"
    )]
    async fn chats(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "Whose chats: `ME` (the default) for the caller's own, `ANYONE` for everyone's (admins only; it needs an identity, so under `--auth none` use `ANYONE`).",
            default_with = "ChatOwner::Me"
        )]
        owner: ChatOwner,
        #[graphql(
            desc = "With `owner: ANYONE`, only the chats this identity opened (`token:NAME` or a person's user; at most 200 characters)."
        )]
        created_by: Option<String>,
        #[graphql(
            desc = "Include deleted chats, and the chats of soft-deleted sessions.",
            default = false
        )]
        include_deleted: bool,
        #[graphql(
            desc = "The first this many chats after `after` (and before `before`); at most the server's maximum page size. Without `first` and `last`, the first 20. Give `first` or `last`, not both."
        )]
        first: Option<i32>,
        #[graphql(desc = "Only chats after this cursor (less recently active ones).")]
        after: Option<String>,
        #[graphql(
            desc = "The last this many chats before `before` (and after `after`); at most the server's maximum page size. Give `first` or `last`, not both."
        )]
        last: Option<i32>,
        #[graphql(desc = "Only chats before this cursor (more recently active ones).")]
        before: Option<String>,
    ) -> Result<ChatListConnection> {
        let identity = caller(ctx)?;
        check_optional("createdBy", created_by.as_deref(), limits::NAME)?;
        let created_by = match (owner, created_by) {
            (ChatOwner::Me, Some(_)) => {
                return Err(Error::bad_input(
                    "`createdBy` goes with `owner: ANYONE`; `owner: ME` already names the caller",
                )
                .into());
            }
            (ChatOwner::Me, None) => Some(identity.actor.clone().ok_or_else(|| {
                Error::bad_input(
                    "`owner: ME` needs an identity, and under `--auth none` there is none: \
                     list with `owner: ANYONE` (and `createdBy` for one person's chats)",
                )
            })?),
            (ChatOwner::Anyone, named) => {
                let own = named.is_some() && named == identity.actor;
                if identity.role < Role::Admin && !own {
                    return Err(Error::Forbidden(
                        "only an admin may list other people's chats; use `owner: ME` for your own"
                            .to_owned(),
                    )
                    .into());
                }
                named
            }
        };
        let filter = ChatListFilter {
            created_by,
            include_deleted,
        };
        let args = PageArgs {
            first,
            after,
            last,
            before,
        };
        list_chats(ctx, filter, args).await
    }

    /// Chain versions, latest registered first, a page at a time (forward with `first`/`after`,
    /// backward with `last`/`before`); deprecated ones only when asked for.
    #[graphql(
        complexity = "cost::page(first, last, child_complexity)",
        guard = "RoleGuard(Role::Reader)"
    )]
    async fn chains(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Which chain versions (default: every one not deprecated).")]
        filter: Option<ChainFilter>,
        #[graphql(
            desc = "The first this many chain versions after `after` (and before `before`); at most the server's maximum page size. Without `first` and `last`, the first 20. Give `first` or `last`, not both."
        )]
        first: Option<i32>,
        #[graphql(desc = "Only chain versions after this cursor (registered earlier).")]
        after: Option<String>,
        #[graphql(
            desc = "The last this many chain versions before `before` (and after `after`); at most the server's maximum page size. Give `first` or `last`, not both."
        )]
        last: Option<i32>,
        #[graphql(desc = "Only chain versions before this cursor (registered later).")]
        before: Option<String>,
    ) -> Result<ChainConnection> {
        let filter = filter.unwrap_or_default().validate()?;
        let args = PageArgs {
            first,
            after,
            last,
            before,
        };
        list_chains(ctx, filter, args).await
    }

    /// The audit trail of every control-plane change, newest first: who made it, from which
    /// request and client, and the fields it changed. Admin.
    #[graphql(guard = "RoleGuard(Role::Admin)")]
    async fn audit_log(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Which records (default: all).")] filter: Option<AuditLogFilter>,
        #[graphql(
            desc = "The first this many records after `after` (and before `before`); at most the server's maximum page size. Without `first` and `last`, the first 20. Give `first` or `last`, not both."
        )]
        first: Option<i32>,
        #[graphql(desc = "Only records after this cursor (made earlier).")] after: Option<String>,
        #[graphql(
            desc = "The last this many records before `before` (and after `after`); at most the server's maximum page size. Give `first` or `last`, not both."
        )]
        last: Option<i32>,
        #[graphql(desc = "Only records before this cursor (made later).")] before: Option<String>,
    ) -> Result<AuditRecordConnection> {
        let filter = filter.unwrap_or_default().validate()?;
        let args = PageArgs {
            first,
            after,
            last,
            before,
        };
        audit_log(ctx, filter, args).await
    }

    /// A chain version by its chain's name and its version, deprecated or not (null when it is
    /// not registered).
    #[graphql(guard = "RoleGuard(Role::Reader)")]
    async fn chain(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The chain's name.")] name: String,
        #[graphql(desc = "The version.")] version: String,
    ) -> Result<Option<Chain>> {
        let key = ChainKey { name, version };
        check_key("", &key)?;
        Ok(loaders(ctx).chains_by_key.load_one(key).await?.map(Chain))
    }

    /// Analytics over the sessions `filter` matches (the same filter as `sessions`): session
    /// counts, outcomes and durations, and LLM usage and cost, each grouped as its field asks.
    /// Days and weeks are those of `timeZone`, an IANA name (default UTC).
    #[graphql(guard = "RoleGuard(Role::Reader)")]
    async fn session_stats(
        &self,
        #[graphql(desc = "Which sessions (default: all that are not deleted).")] filter: Option<
            SessionFilterInput,
        >,
        #[graphql(
            desc = "The time zone whose calendar days and weeks `DAY` and `WEEK` group by, such as \"Europe/Berlin\".",
            default_with = "String::from(\"UTC\")"
        )]
        time_zone: String,
    ) -> Result<SessionStats> {
        let filter = filter.unwrap_or_default().validate()?;
        Ok(SessionStats::new(filter, time_zone)?)
    }

    /// The price list: the price of each model (and provider) in effect at `at`, by model, then
    /// provider (the price for any provider first). What LLM interactions recorded at that
    /// instant without a cost of their own are priced with.
    #[graphql(
        guard = "RoleGuard(Role::Reader)",
        complexity = "cost::groups(first, child_complexity)"
    )]
    async fn model_prices(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The instant (default: now); a later one shows prices set to come.")]
        at: Option<DateTime<Utc>>,
        #[graphql(desc = "Only this model's prices.")] model: Option<String>,
        #[graphql(desc = "Most prices returned (1 to 1,000).", default = 100)] first: i32,
    ) -> Result<Vec<ModelPrice>> {
        if !(1..=1000).contains(&first) {
            return Err(
                Error::bad_input(format!("`first` must be 1 to 1,000, got {first}")).into(),
            );
        }
        if let Some(at) = at {
            check_time("at", at)?;
        }
        check_optional("model", model.as_deref(), limits::NAME)?;
        let store = ctx.data_unchecked::<Store>();
        let rows = store
            .prices_in_effect(at, model.as_deref(), i64::from(first))
            .await?;
        Ok(rows.into_iter().map(ModelPrice).collect())
    }

    /// Who is asking: the identity and role this request was authenticated as.
    #[graphql(guard = "SessionReaderGuard")]
    async fn viewer(&self, ctx: &Context<'_>) -> Result<Viewer> {
        Ok(Viewer(caller(ctx)?.clone()))
    }

    /// The latest purges (retention), newest first: who hard-deleted how many sessions and
    /// receipts, when, by which policy (admin only).
    #[graphql(guard = "RoleGuard(Role::Admin)")]
    async fn purges(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "How many (1 to 100).", default = 20)] first: i32,
    ) -> Result<Vec<Purge>> {
        if !(1..=100).contains(&first) {
            return Err(Error::bad_input(format!("`first` must be 1 to 100, got {first}")).into());
        }
        let store = ctx.data_unchecked::<Store>();
        Ok(store
            .purges(i64::from(first))
            .await?
            .into_iter()
            .map(Purge)
            .collect())
    }

    /// API tokens, oldest first (admin only; secrets are never shown).
    #[graphql(guard = "RoleGuard(Role::Admin)")]
    async fn api_tokens(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Include revoked tokens.", default = false)] include_revoked: bool,
    ) -> Result<Vec<ApiToken>> {
        let store = ctx.data_unchecked::<Store>();
        Ok(store
            .tokens(include_revoked)
            .await?
            .into_iter()
            .map(ApiToken)
            .collect())
    }
}
