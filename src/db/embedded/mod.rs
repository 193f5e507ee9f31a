//! PostgreSQL 17 compiled to WebAssembly (pglite-oxide), run in-process: no install, no download.
//!
//! It listens on a Unix socket in a directory only this user can open (pglite has no
//! passwords, and a loopback port would let any local user in), behind a [`relay`] that keeps
//! a misbehaving connection from stopping it.

mod relay;

use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use pglite_oxide::{PgliteServer, extensions};
use sqlx::postgres::PgConnectOptions;

/// How long shutdown may take before we give up on it and let the process go on.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// A running embedded PostgreSQL, listening on a loopback port.
pub struct EmbeddedPostgres {
    /// Always `Some` until shutdown or drop takes it.
    server: Option<PgliteServer>,
    relay: tokio::task::JoinHandle<()>,
    sockets: SocketDir,
    /// An exclusive lock on the data directory, held while the database runs: pglite's files
    /// must never be opened by two processes at once.
    _lock: Option<std::fs::File>,
}

/// The lock file in a data directory.
const LOCK_FILE: &str = "casefile.lock";

impl EmbeddedPostgres {
    /// Starts (creating if needed) a persistent database in `data_dir`.
    pub async fn start_in(data_dir: PathBuf) -> anyhow::Result<Self> {
        std::fs::create_dir_all(&data_dir)
            .with_context(|| format!("cannot create data directory {}", data_dir.display()))?;
        let data_dir = std::fs::canonicalize(&data_dir)?;
        let lock = lock(&data_dir)?;
        let mut db = Self::start(move || PgliteServer::builder().path(data_dir)).await?;
        db._lock = Some(lock);
        Ok(db)
    }

    /// Starts a throw-away database in a temporary directory (for tests).
    pub async fn start_temporary() -> anyhow::Result<Self> {
        Self::start(|| PgliteServer::builder().temporary().relaxed_durability(true)).await
    }

    async fn start(
        builder: impl FnOnce() -> pglite_oxide::PgliteServerBuilder + Send + 'static,
    ) -> anyhow::Result<Self> {
        let started = Instant::now();
        let sockets = SocketDir::create()?;
        let pglite_socket = sockets.pglite_socket();
        let server = tokio::task::spawn_blocking(move || {
            builder()
                .unix(pglite_socket)
                .extension(extensions::PG_TRGM)
                .start()
        })
        .await
        .context("embedded database start-up task")?
        .context("cannot start the embedded database")?;
        let listener = tokio::net::UnixListener::bind(sockets.relay_socket())
            .context("cannot listen for the embedded database's connections")?;
        let relay = relay::spawn(listener, sockets.pglite_socket());
        tracing::info!(elapsed_ms = started.elapsed().as_millis() as u64, root = %server.root().display(), "embedded PostgreSQL started");
        Ok(Self {
            server: Some(server),
            relay,
            sockets,
            _lock: None,
        })
    }

    /// How to connect: through the relay's socket, as `postgres` to `postgres`.
    pub fn connect_options(&self) -> PgConnectOptions {
        PgConnectOptions::new()
            .socket(&self.sockets.0)
            .port(RELAY_PORT)
            .username("postgres")
            .database("postgres")
    }

    /// Stops the database on a plain thread and waits at most [`SHUTDOWN_GRACE`]: a stop that
    /// hangs must never keep the process (or a test) from ending.
    pub async fn shutdown(mut self) {
        let Some(server) = self.server.take() else {
            return;
        };
        self.relay.abort();
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let result = server.shutdown();
            let _ = done_tx.send(result);
        });
        match tokio::time::timeout(SHUTDOWN_GRACE, done_rx).await {
            Ok(Ok(Ok(()))) => tracing::info!("embedded PostgreSQL stopped"),
            Ok(Ok(Err(err))) => tracing::warn!("embedded PostgreSQL shutdown failed: {err:#}"),
            Ok(Err(_)) => {
                tracing::warn!("embedded PostgreSQL shutdown thread ended without a result")
            }
            Err(_) => tracing::warn!(
                "embedded PostgreSQL did not stop within {SHUTDOWN_GRACE:?}; leaving it"
            ),
        }
    }
}

/// Takes the data directory's lock, or says who has it.
fn lock(data_dir: &Path) -> anyhow::Result<std::fs::File> {
    let path = data_dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
            "the embedded database in {} is in use by another casefile process (a running \
             server?). Stop it first, or act through the running server: its GraphQL API, or \
             `casefile token … --url http://HOST:PORT/graphql --token <admin token>`",
            data_dir.display()
        ),
        Err(std::fs::TryLockError::Error(err)) => {
            Err(err).with_context(|| format!("cannot lock {}", path.display()))
        }
    }
}

/// pglite's socket is `.s.PGSQL.5432` in a subdirectory, the relay's `.s.PGSQL.5433` beside it
/// (PostgreSQL clients name a socket by its directory and port).
const RELAY_PORT: u16 = 5433;

/// A directory for the sockets that only this user can enter, removed when dropped. Short, in
/// the temporary directory: a socket's path must fit in 107 bytes.
struct SocketDir(PathBuf);

impl SocketDir {
    fn create() -> anyhow::Result<SocketDir> {
        let name = format!("casefile-{}", uuid::Uuid::new_v4().simple());
        let path = std::env::temp_dir().join(&name[..25]);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        Ok(SocketDir(path))
    }

    fn pglite_socket(&self) -> PathBuf {
        self.0.join("pglite").join(".s.PGSQL.5432")
    }

    fn relay_socket(&self) -> PathBuf {
        self.0.join(format!(".s.PGSQL.{RELAY_PORT}"))
    }
}

impl Drop for SocketDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Drop for EmbeddedPostgres {
    /// Dropped without [`EmbeddedPostgres::shutdown`] (an error path, a failed test): stop it
    /// on a detached thread, since pglite's own drop joins its server thread and may block.
    fn drop(&mut self) {
        self.relay.abort();
        if let Some(server) = self.server.take() {
            std::thread::spawn(move || drop(server));
        }
    }
}
