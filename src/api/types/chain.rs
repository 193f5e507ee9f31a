//! Chains and their versions (seed 000, Q4): a version's definition, stored once, and the
//! sessions that ran it.

use std::sync::Arc;

use async_graphql::connection::PageInfo;
use async_graphql::{ComplexObject, Context, ID, InputObject, Object, SimpleObject};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{Session, SessionConnection, SessionCount, SessionEdge, SessionStats, loaders};
use crate::api::Limits;
use crate::api::cost;
use crate::api::guards::across_sessions;
use crate::api::ids::{self, NodeType};
use crate::api::pagination::{PageArgs, edges_of};
use crate::api::scalars::{JsonRef, Text};
use crate::cursor::{chain_cursor, decode_chain_cursor, decode_session_cursor, session_cursor};
use crate::error::Error;
use crate::store::chains::{ChainListFilter, ChainSessions, ChainSessionsPageKey};
use crate::store::sessions::{SessionFilter, SessionKey, SessionSort, SortValue};
use crate::store::write::chains::check_key;
use crate::store::{ChainKey, ChainRow, Store};
use async_graphql::Result;

/// A registered chain version, by its chain's name and its version.
#[derive(InputObject, Clone)]
pub struct ChainVersionRef {
    /// The chain's name (1–200 characters; what `chainId` holds).
    pub name: String,
    /// The version (1–100 letters, digits, `.`, `_`, `+` or `-`, starting with a letter or
    /// digit).
    pub version: String,
}

impl ChainVersionRef {
    /// The key it names, checked; `field` is where it sits in the input (`chain`).
    pub fn key(self, field: &str) -> crate::error::Result<ChainKey> {
        let key = ChainKey {
            name: self.name,
            version: self.version,
        };
        check_key(&format!("{field}."), &key)?;
        Ok(key)
    }
}

pub struct Chain(pub Arc<ChainRow>);

/// A version of a chain: the stages an orchestrator runs for an alert, as registered with
/// `registerChain`. A version never changes (sessions are immutable, and so is what they ran):
/// its definition is stored once, however many sessions ran it. A deprecated version is left
/// out of `chains` unless asked for; the sessions that ran it keep it.
#[Object]
impl Chain {
    /// Global ID.
    pub async fn id(&self) -> ID {
        ids::encode(NodeType::Chain, self.0.id)
    }
    /// Database id (UUIDv7).
    async fn uuid(&self) -> Uuid {
        self.0.id
    }
    /// The chain's name (a session's `chainId`).
    async fn name(&self) -> Text<'_> {
        Text(&self.0.name)
    }
    /// The version.
    async fn version(&self) -> Text<'_> {
        Text(&self.0.version)
    }
    /// The definition as registered: a JSON object whose `stages` lists the chain's stages in
    /// order.
    async fn definition(&self) -> JsonRef<'_> {
        JsonRef(&self.0.definition)
    }
    /// How many stages the chain runs (the length of `definition.stages`): a session of this
    /// version is at stage `stageIndex + 1` of `stageCount` (chat stages come after them).
    async fn stage_count(&self) -> i32 {
        self.0.stage_count
    }
    /// When it was registered.
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    /// Who registered it (`token:NAME`, or a person's user from the SSO proxy; null without
    /// authentication).
    async fn created_by(&self) -> Option<Text<'_>> {
        self.0.created_by.as_deref().map(Text)
    }
    /// When it was deprecated (null while it is current).
    async fn deprecated_at(&self) -> Option<DateTime<Utc>> {
        self.0.deprecated_at
    }
    /// Who deprecated it.
    async fn deprecated_by(&self) -> Option<Text<'_>> {
        self.0.deprecated_by.as_deref().map(Text)
    }
    /// The sessions that ran this version, newest first, a page at a time (the same list as
    /// `sessions(filter: { chain: { name, version } })`, whose cursors these are).
    #[graphql(complexity = "cost::page(first, last, child_complexity)")]
    async fn sessions_connection(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "The first this many sessions after `after` (and before `before`); at most the server's maximum page size. Without `first` and `last`, the first 20. Give `first` or `last`, not both."
        )]
        first: Option<i32>,
        #[graphql(desc = "Only sessions after this cursor (older ones).")] after: Option<String>,
        #[graphql(
            desc = "The last this many sessions before `before` (and after `after`); at most the server's maximum page size. Give `first` or `last`, not both."
        )]
        last: Option<i32>,
        #[graphql(desc = "Only sessions before this cursor (newer ones).")] before: Option<String>,
        #[graphql(desc = "Include soft-deleted sessions.", default = false)] include_deleted: bool,
    ) -> Result<SessionConnection> {
        across_sessions(ctx)?;
        let args = PageArgs {
            first,
            after,
            last,
            before,
        };
        let slice = args.slice(ctx.data_unchecked::<Limits>(), |cursor| {
            let key = decode_session_cursor(cursor, SessionSort::CreatedAt)?;
            match key.value {
                SortValue::Time(at) => Ok((at, key.id)),
                _ => Err(Error::bad_input(format!(
                    "\"{cursor}\" is not a valid cursor"
                ))),
            }
        })?;
        let sessions = ChainSessions {
            chain: self.0.key(),
            include_deleted,
        };
        let page = loaders(ctx)
            .session_pages_by_chain
            .load_one(ChainSessionsPageKey {
                sessions: sessions.clone(),
                slice,
            })
            .await?
            .unwrap_or_default();
        let (edges, page_info) = edges_of(
            page,
            |row| SessionEdge {
                cursor: session_cursor(
                    SessionSort::CreatedAt,
                    SessionKey {
                        value: SortValue::Time(row.created_at),
                        id: row.id,
                    },
                ),
                node: Session(row),
                search: None,
            },
            |e| &e.cursor,
        );
        Ok(SessionConnection {
            edges,
            page_info,
            count: SessionCount::OfChain(sessions),
        })
    }
    /// Figures over the sessions that ran this version: outcomes, durations, LLM usage and
    /// cost, grouped as `sessionStats` groups them (its filter being this version).
    async fn stats(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "The time zone whose calendar days and weeks `DAY` and `WEEK` group by, such as \"Europe/Berlin\".",
            default_with = "String::from(\"UTC\")"
        )]
        time_zone: String,
        #[graphql(desc = "Include soft-deleted sessions.", default = false)] include_deleted: bool,
    ) -> Result<SessionStats> {
        across_sessions(ctx)?;
        let filter = SessionFilter {
            chain: Some(self.0.key()),
            include_deleted,
            ..SessionFilter::default()
        };
        Ok(SessionStats::new(filter, time_zone)?)
    }
}

/// A page of chain versions, latest registered first.
#[derive(SimpleObject)]
#[graphql(complex)]
pub struct ChainConnection {
    /// The chain versions of this page, each with its cursor.
    edges: Vec<ChainEdge>,
    /// Where this page is: whether chain versions lie before and after it, and the cursors to
    /// page on from either end.
    page_info: PageInfo,
    #[graphql(skip)]
    filter: ChainListFilter,
}

/// A chain version in the list of chains, and its cursor.
#[derive(SimpleObject)]
pub struct ChainEdge {
    /// Pass as `after` or `before` to page on after or before this chain version.
    cursor: String,
    /// The chain version.
    node: Chain,
}

#[ComplexObject]
impl ChainConnection {
    /// How many chain versions the list holds, across all pages (counted only when asked
    /// for).
    #[graphql(complexity = "cost::aggregate(cost::COUNT, child_complexity)")]
    async fn total_count(&self, ctx: &Context<'_>) -> Result<i64> {
        Ok(ctx
            .data_unchecked::<Store>()
            .count_chains(&self.filter)
            .await?)
    }
}

/// A page of the chain versions matching `filter`, latest registered first.
pub(crate) async fn list_chains(
    ctx: &Context<'_>,
    filter: ChainListFilter,
    args: PageArgs,
) -> Result<ChainConnection> {
    let slice = args.slice(ctx.data_unchecked::<Limits>(), decode_chain_cursor)?;
    let page = ctx
        .data_unchecked::<Store>()
        .list_chains(&filter, &slice)
        .await?;
    let (edges, page_info) = edges_of(
        page,
        |row| ChainEdge {
            cursor: chain_cursor((row.created_at, row.id)),
            node: Chain(Arc::new(row)),
        },
        |e| &e.cursor,
    );
    Ok(ChainConnection {
        edges,
        page_info,
        filter,
    })
}
