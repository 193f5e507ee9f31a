//! The database: a sqlx pool on an external PostgreSQL, or on an embedded one (pglite).
//! Both speak the same SQL; everything above this module sees only a [`PgPool`].

mod embedded;
mod options;

use std::time::Duration;

use anyhow::Context as _;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions as _, Connection as _, PgPool};

pub use embedded::EmbeddedPostgres;
pub use options::{DatabaseArgs, DbTimeouts};

/// The migrations in `migrations/`, compiled into the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// How long a request waits for an external pool's connection before it is refused.
const EXTERNAL_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

/// A connection idle longer than this is pinged before it is used again: the server, or a proxy
/// on the way, may have dropped it meanwhile (HikariCP's window is half a second). sqlx's
/// default pings before every use: a round trip, and a task switch on each side, per statement.
const PING_IF_IDLE_FOR: Duration = Duration::from_secs(1);

/// Pool options both databases share.
fn pool_options() -> PgPoolOptions {
    PgPoolOptions::new()
        .test_before_acquire(false)
        .before_acquire(|connection, meta| {
            Box::pin(async move {
                if meta.idle_for > PING_IF_IDLE_FOR {
                    connection.ping().await?;
                }
                Ok(true)
            })
        })
}

/// A connection pool and, when embedded, the in-process PostgreSQL behind it.
pub struct Database {
    pool: PgPool,
    embedded: Option<EmbeddedPostgres>,
}

impl Database {
    /// Connects as configured: `DATABASE_URL` if set, else the embedded database in `data_dir`.
    pub async fn connect(args: &DatabaseArgs) -> anyhow::Result<Self> {
        match &args.database_url {
            Some(url) => Self::external(url, args.db_max_connections, &args.timeouts).await,
            None => {
                let server = EmbeddedPostgres::start_in(args.data_dir.clone()).await?;
                Self::embedded(server, &args.timeouts).await
            }
        }
    }

    /// A pool on an external PostgreSQL.
    pub async fn external(
        url: &str,
        max_connections: u32,
        timeouts: &DbTimeouts,
    ) -> anyhow::Result<Self> {
        let options: PgConnectOptions = url
            .parse()
            .context("DATABASE_URL is not a PostgreSQL URL")?;
        Self::external_with(options, max_connections, timeouts).await
    }

    /// A pool on an external PostgreSQL, from parsed options.
    pub async fn external_with(
        options: PgConnectOptions,
        max_connections: u32,
        timeouts: &DbTimeouts,
    ) -> anyhow::Result<Self> {
        let options = with_session_settings(options, timeouts);
        let pool = pool_options()
            .max_connections(max_connections.max(1))
            // Short: while the database is down, sqlx keeps retrying the connect until this
            // runs out, and a request should fail fast (SERVICE_UNAVAILABLE) rather than hang.
            .acquire_timeout(EXTERNAL_ACQUIRE_TIMEOUT)
            .connect_with(
                options.log_slow_statements(log::LevelFilter::Warn, Duration::from_secs(1)),
            )
            .await
            .context("cannot connect to DATABASE_URL")?;
        Ok(Self {
            pool,
            embedded: None,
        })
    }

    /// A pool of exactly one connection on an embedded PostgreSQL (it serves one client at a time).
    pub async fn embedded(server: EmbeddedPostgres, timeouts: &DbTimeouts) -> anyhow::Result<Self> {
        let options = with_session_settings(server.connect_options(), timeouts);
        let pool = pool_options()
            .max_connections(1)
            // Requests queue for the single connection; give them time rather than failing fast.
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options)
            .await
            .context("cannot connect to the embedded database")?;
        Ok(Self {
            pool,
            embedded: Some(server),
        })
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    pub fn is_embedded(&self) -> bool {
        self.embedded.is_some()
    }

    /// Applies pending migrations (safe to run from several processes at once: sqlx takes an
    /// advisory lock).
    pub async fn migrate(&self) -> anyhow::Result<()> {
        MIGRATOR
            .run(&self.pool)
            .await
            .context("applying migrations")
    }

    /// Closes the pool, then stops the embedded database. Callers drop every other clone of the
    /// pool first: pglite's shutdown can hang while any pool on it still exists.
    pub async fn shutdown(self) {
        let Self { pool, embedded } = self;
        pool.close().await;
        drop(pool);
        if let Some(server) = embedded {
            server.shutdown().await;
        }
    }
}

/// A pool of `size` connections of its own to `pool`'s database, with the same settings, for
/// work that must not queue for a connection behind `pool`'s other users; `None` when `pool` is
/// a single connection (the embedded database serves one). Single appends are stored on one:
/// writers waiting for a session's lock hold their pooled connections while they wait, and a
/// burst of them (every agent of a session finishing its event at once) would otherwise keep
/// the groups that serve every stream of the process from the database.
pub fn pool_beside(pool: &PgPool, size: u32) -> Option<PgPool> {
    if pool.options().get_max_connections() <= 1 {
        return None;
    }
    Some(
        pool_options()
            .max_connections(size.max(1))
            .acquire_timeout(EXTERNAL_ACQUIRE_TIMEOUT)
            .connect_lazy_with((*pool.connect_options()).clone()),
    )
}

/// Connection options that make each connection set the timeouts on itself at start-up, and
/// plan each prepared statement once.
///
/// Every statement casefile runs is prepared with its values bound, and its shape already says
/// which index serves it (the filters present are part of the SQL text). Left to choose,
/// PostgreSQL re-plans such a statement for each execution with the values inlined, which costs
/// more than running it (0.2 ms for a session page that runs in 0.1), and for a loader's
/// `= ANY($1)` on a small table it picks a sequential scan over the index. The generic plan,
/// made once per connection, reads the index every time.
///
/// JIT compilation is off: it starts on statements the planner prices high, which here are the
/// analytics groupings, and compiling them took longer than it saved (a usage grouping over
/// 100,000 sessions ran in 0.47 s with it, 0.19 s without).
fn with_session_settings(options: PgConnectOptions, timeouts: &DbTimeouts) -> PgConnectOptions {
    let ms = |d: Duration| d.as_millis().to_string();
    options.options([
        ("plan_cache_mode", "force_generic_plan".to_owned()),
        ("jit", "off".to_owned()),
        ("statement_timeout", ms(timeouts.statement)),
        ("lock_timeout", ms(timeouts.lock)),
        (
            "idle_in_transaction_session_timeout",
            ms(timeouts.idle_in_transaction),
        ),
    ])
}
