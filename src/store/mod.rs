//! SQL access. Every query that reads many parents' children takes all parent keys at once
//! (`WHERE key = ANY($1)`, or joined to the keys asked for: `keys_relation!`), so the GraphQL
//! loaders above cost one statement per batch.

/// The keys a statement is asked for, as the relation `k (id, session_id)` of the parallel
/// arrays `$1` (ids) and `$2` (their sessions) that [`key_columns`] makes. Statements join it
/// to their table on both columns: PostgreSQL then probes an index once per key, where
/// `x = ANY($1) AND session_id = ANY($2)` intersects two index scans and returns the cross
/// product of the lists (measured on PostgreSQL 15: 0.32 ms against 0.10 for 8 stages).
macro_rules! keys_relation {
    () => {
        "unnest($1::uuid[], $2::uuid[]) AS k (id, session_id)"
    };
}

/// The sessions of `$1`, each once, as the relation `k (session_id)`.
macro_rules! sessions_relation {
    () => {
        "(SELECT DISTINCT unnest($1::uuid[])) AS k (session_id)"
    };
}

/// Each key of [`keys_relation!`] joined to the rows `$select` reads for it (by `k.id` and
/// `k.session_id`), the select run once per key. On a table partitioned (or sharded) by
/// session, each run reads only its key's session's partition, whatever the table's size; a
/// plain join may be planned as a hash join over every partition, and `session_id = ANY($1)`
/// never prunes (PostgreSQL prunes by an array only when it is a constant, and casefile binds
/// its arrays). `OFFSET 0` keeps PostgreSQL from flattening the select into a join. On one
/// table it is the plan a join of few keys gets anyway: one index probe per key.
macro_rules! per_key {
    ($select:expr) => {
        concat!(
            keys_relation!(),
            " CROSS JOIN LATERAL (",
            $select,
            " OFFSET 0)"
        )
    };
}

/// [`per_key!`] for keys of one session: `$1` the ids (`k.id`), `$2` their session, which the
/// select names as `$2` itself. A session bound as a parameter lets a table partitioned (or
/// sharded) by session be pruned to its partition once, as the statement starts; a session
/// per key prunes for each key, after every partition's scan was set up (measured with
/// pgbench: a sixth fewer statements a second at 8 partitions, docs/scale-out.md).
macro_rules! per_key_in_session {
    ($select:expr) => {
        concat!(
            "unnest($1::uuid[]) AS k (id) CROSS JOIN LATERAL (",
            $select,
            " OFFSET 0)"
        )
    };
}

/// The same for each session of [`sessions_relation!`] (by `k.session_id`).
macro_rules! per_session {
    ($select:expr) => {
        concat!(
            sessions_relation!(),
            " CROSS JOIN LATERAL (",
            $select,
            " OFFSET 0)"
        )
    };
}

mod agents;
pub mod audit;
pub mod catalog;
pub mod chains;
pub mod change_log;
pub mod chats;
pub mod child_pages;
mod children;
mod event_runs;
pub mod export;
mod feed;
mod health;
mod lease;
mod live_timeline;
pub mod mcp_search;
pub mod notifications;
pub mod page;
pub mod partitioning;
pub mod prices;
mod records;
pub mod retention;
mod rollups;
mod search;
pub mod search_words;
pub mod session_events;
pub mod sessions;
pub mod share_links;
pub mod stats;
pub mod tickets;
mod timeline;
pub mod tokens;
mod tool_calls;
mod traced;
pub mod tree;
pub mod write;

use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, PgPool, Postgres};
use uuid::Uuid;

use lease::{Lease, Leased};
use traced::Traced;
use write::append_groups::{AppendGroupOptions, AppendGroups};

use crate::error::Result;
use crate::observe::metrics::WaitingForConnection;
pub use child_pages::{
    CountedPage, MessageKey, MessagePageKey, Payloads, RecordKey, RecordPageKey,
};
pub use health::SchemaState;
pub use records::*;
pub use search::{HIGHLIGHT_END, HIGHLIGHT_START, MatchedField, SearchMatchKey, SearchMatchRow};
pub use timeline::{TimelineFilter, TimelinePageKey, TimelineReplay};
pub use tool_calls::{CallEvents, CallKey, RequestedCall, requested_calls};

/// Which parent a set of rows hangs from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    Session,
    Stage,
    Execution,
}

impl Scope {
    /// The column that holds the parent's id (every child table carries all three).
    fn column(self) -> &'static str {
        match self {
            Scope::Session => "session_id",
            Scope::Stage => "stage_id",
            Scope::Execution => "execution_id",
        }
    }
}

/// A connection from the pool, its wait counted (`casefile_db_pool_waiting`).
pub(crate) async fn connection(pool: &PgPool) -> Result<PoolConnection<Postgres>> {
    let _waiting = WaitingForConnection::start();
    Ok(pool.acquire().await?)
}

/// The database, seen as the queries casefile runs on it.
#[derive(Clone)]
pub struct Store {
    pool: PgPool,
    /// Where this operation's reads keep their connection between statements, if it has one.
    lease: Option<Arc<Lease>>,
    /// Where single appends wait to be stored together.
    appends: Arc<AppendGroups>,
}

/// A connection for one read: the operation's own, or one from the pool.
enum Reader {
    Leased(Leased),
    Pooled(PoolConnection<Postgres>),
}

impl Deref for Reader {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        match self {
            Reader::Leased(c) => c,
            Reader::Pooled(c) => c,
        }
    }
}

impl Reader {
    /// The connection, its statements traced.
    fn traced(&mut self) -> Traced<'_> {
        Traced(self)
    }
}

impl DerefMut for Reader {
    fn deref_mut(&mut self) -> &mut PgConnection {
        match self {
            Reader::Leased(c) => c,
            Reader::Pooled(c) => c,
        }
    }
}

impl Store {
    pub fn new(pool: PgPool) -> Self {
        let appends = AppendGroups::new(pool.clone(), AppendGroupOptions::default());
        Self {
            pool,
            lease: None,
            appends,
        }
    }

    /// The store whose single appends are grouped as `options` say, stored on `pool` when given
    /// (`db::pool_beside`) or else on the store's own (a server's own: every store cloned from it
    /// shares its groups).
    pub fn grouping_appends(&self, options: AppendGroupOptions, pool: Option<PgPool>) -> Store {
        Store {
            pool: self.pool.clone(),
            lease: self.lease.clone(),
            appends: AppendGroups::new(pool.unwrap_or_else(|| self.pool.clone()), options),
        }
    }

    /// Where single appends are stored together.
    pub fn append_groups(&self) -> &AppendGroups {
        &self.appends
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The store for one operation (not a stream: it would hold a connection for as long as it
    /// runs), whose reads keep one connection between statements (see [`lease`]).
    pub fn for_operation(&self) -> Store {
        Store {
            pool: self.pool.clone(),
            lease: Some(Lease::new(self.pool.clone())),
            appends: self.appends.clone(),
        }
    }

    /// A connection for one read.
    async fn reader(&self) -> Result<Reader> {
        Ok(match &self.lease {
            Some(lease) => Reader::Leased(lease.connection().await?),
            None => Reader::Pooled(connection(&self.pool).await?),
        })
    }

    /// A connection for a write of one statement, which commits on its own.
    pub async fn connection(&self) -> Result<PoolConnection<Postgres>> {
        connection(&self.pool).await
    }

    /// A transaction for a write: it feeds the status changes it records ([`write::feed`]).
    pub async fn begin(&self) -> Result<sqlx::Transaction<'static, Postgres>> {
        self.begin_with(write::feed::BEGIN).await
    }

    /// [`Store::begin`], naming who makes the transaction's changes and why, for the status
    /// history ([`write::begin_naming`]).
    pub async fn begin_naming(
        &self,
        actor: Option<&str>,
        reason: Option<&str>,
    ) -> Result<sqlx::Transaction<'static, Postgres>> {
        self.begin_with(write::begin_naming(actor, reason)?).await
    }

    /// A transaction begun by `statement` (`BEGIN` and the settings it makes), its wait for a
    /// connection counted as such.
    async fn begin_with(
        &self,
        statement: impl Into<std::borrow::Cow<'static, str>>,
    ) -> Result<sqlx::Transaction<'static, Postgres>> {
        let _waiting = WaitingForConnection::start();
        Ok(self.pool.begin_with(statement).await?)
    }

    /// How PostgreSQL would run a statement built after the prefix `EXPLAIN `: its plan, one
    /// line per node, for tests that check an index serves it.
    async fn explain(&self, mut statement: sqlx::QueryBuilder<'_, Postgres>) -> Result<String> {
        let lines: Vec<String> = statement
            .build_query_scalar()
            .fetch_all(self.reader().await?.traced())
            .await?;
        Ok(lines.join("\n"))
    }

    /// How a connection runs statements: `EXPLAIN (VERBOSE) EXECUTE` of each, prepared, with its
    /// arguments as text (each a literal of its parameter's type). Connections keep one generic
    /// plan per prepared statement (`db::with_session_settings`), made without the arguments:
    /// this shows that plan, where `EXPLAIN` of a statement with bound arguments shows one made
    /// for them, which may read an index the kept one does not.
    async fn explain_generic<const N: usize>(
        &self,
        statements: [(&str, Vec<String>); N],
    ) -> Result<[String; N]> {
        use sqlx::Executor as _;
        let mut conn = self.connection().await?;
        let mut plans = Vec::with_capacity(N);
        let explained = async {
            for (sql, arguments) in statements {
                conn.execute(format!("PREPARE casefile_explained AS {sql}").as_str())
                    .await?;
                let literals: Vec<String> = arguments
                    .iter()
                    .map(|a| format!("'{}'", a.replace('\'', "''")))
                    .collect();
                let lines: Vec<String> = sqlx::query_scalar(&format!(
                    "EXPLAIN (VERBOSE) EXECUTE casefile_explained({})",
                    literals.join(", ")
                ))
                .fetch_all(&mut *conn)
                .await?;
                conn.execute("DEALLOCATE casefile_explained").await?;
                plans.push(lines.join("\n"));
            }
            Ok::<_, crate::error::Error>(())
        }
        .await;
        if let Err(error) = explained {
            // It may still hold the prepared statement; no later borrower should find it.
            conn.close_on_drop();
            return Err(error);
        }
        Ok(plans.try_into().expect("one plan per statement"))
    }

    /// Rows of one table by id; ids that do not exist are simply absent. On a table sharded by
    /// session this reads every shard: only for ids that come without their session (a global
    /// id), or for `sessions`, whose id is the session.
    pub async fn by_ids<R: Record>(&self, ids: &[Uuid]) -> Result<Vec<R>> {
        // An id looked up on its own, as a session's in `per_session!`: for `sessions`, whose
        // id is the session, that reads only its partition (and one id, a parameter, only its
        // partition's plan).
        let sql = match ids {
            [_] => format!(
                "SELECT {} FROM {} t WHERE id = $1",
                R::COLUMNS,
                R::source(None)
            ),
            _ => format!(
                concat!(
                    "SELECT r.* FROM ",
                    per_session!("SELECT {} FROM {} t WHERE id = k.session_id"),
                    " r"
                ),
                R::COLUMNS,
                R::source(None)
            ),
        };
        let query = sqlx::query_as::<_, R>(&sql);
        let query = match ids {
            [id] => query.bind(*id),
            _ => query.bind(ids),
        };
        Ok(query.fetch_all(self.reader().await?.traced()).await?)
    }

    /// Rows of one table by key (id within session); keys that do not exist are simply absent.
    /// Each key is one probe of the `(id, session_id)` primary key, which also limits a
    /// distributed read to the sessions' shards.
    pub async fn by_keys<R: InSession>(&self, keys: &[Key]) -> Result<Vec<R>> {
        let (ids, sessions) = key_columns(keys);
        let one = one_session(keys);
        let sql = match one {
            Some(_) => by_keys_in_session_statement::<R>(),
            None => by_keys_statement::<R>(""),
        };
        let query = sqlx::query_as(&sql).bind(ids);
        let query = match one {
            Some(session) => query.bind(session),
            None => query.bind(sessions),
        };
        Ok(query.fetch_all(self.reader().await?.traced()).await?)
    }

    /// How PostgreSQL reads rows of one table by key (`EXPLAIN` of [`Store::by_keys`]'s
    /// statement), for tests that check the primary key serves it.
    pub async fn explain_by_keys<R: InSession>(&self, keys: &[Key]) -> Result<String> {
        let (ids, sessions) = key_columns(keys);
        let lines: Vec<String> = sqlx::query_scalar(&by_keys_statement::<R>("EXPLAIN "))
            .bind(ids)
            .bind(sessions)
            .fetch_all(self.reader().await?.traced())
            .await?;
        Ok(lines.join("\n"))
    }
}

/// The statement of [`Store::by_keys`], after `prefix`.
fn by_keys_statement<R: InSession>(prefix: &str) -> String {
    format!(
        concat!(
            "{prefix}SELECT r.* FROM ",
            per_key!("SELECT {} FROM {} t WHERE id = k.id AND session_id = k.session_id"),
            " r"
        ),
        R::COLUMNS,
        R::source(Some("k.session_id")),
        prefix = prefix
    )
}

/// The statement of [`Store::by_keys`] for keys of one session.
fn by_keys_in_session_statement<R: InSession>() -> String {
    format!(
        concat!(
            "SELECT r.* FROM ",
            per_key_in_session!("SELECT {} FROM {} t WHERE id = k.id AND session_id = $2"),
            " r"
        ),
        R::COLUMNS,
        R::source(Some("$2")),
    )
}

/// The session of every one of `keys`, when they have one.
pub(crate) fn one_session(keys: &[Key]) -> Option<Uuid> {
    the_one_session(keys.iter().map(|k| k.session))
}

/// The session every one of `sessions` is, when they are one.
pub(crate) fn the_one_session(sessions: impl IntoIterator<Item = Uuid>) -> Option<Uuid> {
    let mut sessions = sessions.into_iter();
    let first = sessions.next()?;
    sessions.all(|s| s == first).then_some(first)
}

/// The ids of `keys` and, in the same places, their sessions (each key once), bound as `$1`
/// and `$2` of a statement that reads [`keys_relation!`].
pub(crate) fn key_columns(keys: &[Key]) -> (Vec<Uuid>, Vec<Uuid>) {
    let keys: BTreeSet<&Key> = keys.iter().collect();
    keys.into_iter().map(|k| (k.id, k.session)).unzip()
}

/// Groups rows by their parent's key (its id, `parent_of`, within the row's session), keeping
/// their order; every requested key gets an entry (maybe empty).
pub fn group_by_key<R: InSession>(
    keys: &[Key],
    rows: Vec<R>,
    parent_of: impl Fn(&R) -> Uuid,
) -> HashMap<Key, Vec<Arc<R>>> {
    let mut groups: HashMap<Key, Vec<Arc<R>>> = keys.iter().map(|k| (*k, Vec::new())).collect();
    for row in rows {
        if let Some(group) = groups.get_mut(&Key::new(row.session_id(), parent_of(&row))) {
            group.push(Arc::new(row));
        }
    }
    groups
}

/// Groups rows by a key, keeping their order; every requested key gets an entry (maybe empty).
pub fn group_by<K, R>(keys: &[K], rows: Vec<R>, key_of: impl Fn(&R) -> K) -> HashMap<K, Vec<Arc<R>>>
where
    K: Eq + Hash + Clone,
{
    let mut groups: HashMap<K, Vec<Arc<R>>> =
        keys.iter().map(|k| (k.clone(), Vec::new())).collect();
    for row in rows {
        groups.entry(key_of(&row)).or_default().push(Arc::new(row));
    }
    groups
}
