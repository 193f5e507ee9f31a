//! Running the HTTP server: bind, serve, and stop gracefully.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::auth::{AuthMode, AuthOptions, Authenticator};
use crate::http::{HttpOptions, router, serve, serve_metrics_apart};
use crate::live::{Hub, HubOptions};
use crate::store::Store;

/// How long in-flight requests may take to finish once shutdown starts.
const DRAIN_GRACE: Duration = Duration::from_secs(10);

/// A running server. Stop it with [`Server::stop`]; the database outlives it.
pub struct Server {
    addr: SocketAddr,
    hub: Arc<Hub>,
    /// Follows token changes made by other processes (external database only).
    token_follower: Option<JoinHandle<()>>,
    /// Turned true to stop: the accept loop ends, and open streams close themselves.
    closing: watch::Sender<bool>,
    task: JoinHandle<()>,
    /// `/metrics` on an address of its own, when configured.
    metrics: Option<(SocketAddr, JoinHandle<()>)>,
    /// The retention schedule.
    retention: JoinHandle<()>,
}

impl Server {
    /// Binds `addr` (port 0 picks a free port) and starts serving.
    pub async fn start(
        store: Store,
        options: &HttpOptions,
        addr: SocketAddr,
    ) -> anyhow::Result<Self> {
        check_anonymous_exposure(&options.auth, addr)?;
        check_retention(options)?;
        crate::observe::metrics::handle();
        if auth_needs_metrics_guard(options) {
            tracing::warn!(
                "/metrics is served without credentials on the main address (operation names, \
                 error codes, traffic): set --metrics-token or --metrics-listen to keep it private"
            );
        }
        let auth = Authenticator::new(
            store.clone(),
            &options.auth,
            options.throttle.auth_attempts_per_second_per_address,
        )?;
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        let addr = listener.local_addr()?;
        let hub = Hub::start_with(
            store.clone(),
            HubOptions {
                reader_timeout: options.change_log_reader_timeout,
                max_age: options
                    .retention
                    .change_log
                    .to_std()
                    .context("--retention-change-log is out of range")?,
                ..HubOptions::with_buffer(options.subscriber_buffer)
            },
        )
        .await?;
        // One process per embedded database: revocations happen in this process, which
        // forgets at once. Several processes share an external one and hear of them by NOTIFY.
        let token_follower =
            if auth.mode() != AuthMode::None && store.pool().options().get_max_connections() > 1 {
                let (listening, listens) = tokio::sync::oneshot::channel();
                let follower = tokio::spawn(auth.tokens().clone().follow_changes(listening));
                // Serve once revocations are heard (or after a while: a database that is slow to
                // answer must not keep the server from starting; the cache's TTL still bounds it).
                if tokio::time::timeout(Duration::from_secs(5), listens)
                    .await
                    .is_err()
                {
                    tracing::warn!("not yet listening for token changes; serving anyway");
                }
                Some(follower)
            } else {
                None
            };
        let closing = watch::Sender::new(false);
        let metrics = match options.metrics.listen {
            Some(at) => Some(
                serve_metrics_apart(at, &options.metrics, store.clone(), closing.subscribe())
                    .await?,
            ),
            None => None,
        };
        let app = router(
            store.clone(),
            hub.clone(),
            auth,
            options,
            closing.subscribe(),
        )?;
        let retention =
            crate::retention::spawn_schedule(store, options.retention.clone(), closing.subscribe());
        let task = tokio::spawn(serve(
            listener,
            app,
            options.header_read_timeout,
            closing.subscribe(),
            DRAIN_GRACE,
        ));
        Ok(Self {
            addr,
            hub,
            token_follower,
            closing,
            task,
            metrics,
            retention,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where `/metrics` is served when it has an address of its own.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().map(|(addr, _)| *addr)
    }

    /// Stops accepting connections, closes live streams (WebSocket with 1001, SSE and multipart
    /// by ending them) and lets in-flight requests finish (for a while). When this returns, the
    /// server holds no database connection any more.
    pub async fn stop(self) {
        self.hub.stop().await;
        if let Some(follower) = &self.token_follower {
            follower.abort();
        }
        self.closing.send_replace(true);
        if let Some((_, mut metrics)) = self.metrics
            && tokio::time::timeout(DRAIN_GRACE, &mut metrics)
                .await
                .is_err()
        {
            metrics.abort();
        }
        // A purge in progress ends after its current batch (a short transaction).
        let mut retention = self.retention;
        if tokio::time::timeout(DRAIN_GRACE, &mut retention)
            .await
            .is_err()
        {
            retention.abort();
        }
        let mut task = self.task;
        // The loop waits `DRAIN_GRACE` for connections itself; this only guards against a bug.
        if tokio::time::timeout(DRAIN_GRACE * 2, &mut task)
            .await
            .is_err()
        {
            tracing::error!("the server did not stop; dropping it");
            task.abort();
        }
    }
}

/// The change log's age limit must leave a live reader its timeout: a shorter one would send
/// every process that is merely a little slow back to the data.
fn check_retention(options: &HttpOptions) -> anyhow::Result<()> {
    let limit = options.retention.change_log.to_std().unwrap_or_default();
    if limit < options.change_log_reader_timeout {
        anyhow::bail!(
            "--retention-change-log ({}s) must be at least --change-log-reader-timeout-secs ({}s)",
            limit.as_secs(),
            options.change_log_reader_timeout.as_secs()
        );
    }
    Ok(())
}

/// Whether callers must authenticate while `/metrics`, on the same address, needs nothing.
fn auth_needs_metrics_guard(options: &HttpOptions) -> bool {
    options.auth.mode != AuthMode::None
        && options.metrics.token.is_none()
        && options.metrics.listen.is_none()
}

/// `--auth none` lets anyone who reaches the port do anything: allowed on a loopback address,
/// elsewhere only when explicitly asked for.
pub fn check_anonymous_exposure(auth: &AuthOptions, addr: SocketAddr) -> anyhow::Result<()> {
    if auth.mode != AuthMode::None || addr.ip().is_loopback() {
        return Ok(());
    }
    if !auth.allow_anonymous {
        anyhow::bail!(
            "refusing to serve without authentication on {addr}, a non-loopback address: anyone \
             who can reach it could read, change and delete every session. Choose an \
             authentication mode with --auth tokens or --auth proxy (CASEFILE_AUTH), or accept \
             the risk with --allow-anonymous (CASEFILE_ALLOW_ANONYMOUS)"
        );
    }
    tracing::warn!(
        "serving WITHOUT AUTHENTICATION on {addr} (--allow-anonymous): anyone who can reach it \
         may read, change and delete every session"
    );
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(err) => {
                tracing::warn!("cannot listen for SIGTERM: {err}");
                std::future::pending::<()>().await
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}
