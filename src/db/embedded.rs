//! PostgreSQL 17 compiled to WebAssembly (pglite-oxide), run in-process: no install, no download.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use pglite_oxide::{PgliteServer, extensions};

/// How long shutdown may take before we give up on it and let the process go on.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// A running embedded PostgreSQL, listening on a loopback port.
pub struct EmbeddedPostgres {
    /// Always `Some` until shutdown or drop takes it.
    server: Option<PgliteServer>,
    url: String,
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
        let server = tokio::task::spawn_blocking(move || {
            builder()
                .tcp("127.0.0.1:0".parse().expect("loopback address"))
                .extension(extensions::PG_TRGM)
                .start()
        })
        .await
        .context("embedded database start-up task")?
        .context("cannot start the embedded database")?;
        let url = server.database_url();
        tracing::info!(elapsed_ms = started.elapsed().as_millis() as u64, root = %server.root().display(), "embedded PostgreSQL started");
        Ok(Self {
            server: Some(server),
            url,
            _lock: None,
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Stops the database on a plain thread and waits at most [`SHUTDOWN_GRACE`]: a stop that
    /// hangs must never keep the process (or a test) from ending.
    pub async fn shutdown(mut self) {
        let Some(server) = self.server.take() else {
            return;
        };
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
fn lock(data_dir: &std::path::Path) -> anyhow::Result<std::fs::File> {
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

impl Drop for EmbeddedPostgres {
    /// Dropped without [`EmbeddedPostgres::shutdown`] (an error path, a failed test): stop it
    /// on a detached thread, since pglite's own drop joins its server thread and may block.
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            std::thread::spawn(move || drop(server));
        }
    }
}
