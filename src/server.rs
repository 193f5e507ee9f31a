//! Running the HTTP server: bind, serve, and stop gracefully.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::config::HttpOptions;
use crate::http::router;
use crate::live::Hub;
use crate::store::Store;

/// How long in-flight requests may take to finish once shutdown starts.
const DRAIN_GRACE: Duration = Duration::from_secs(10);

/// A running server. Stop it with [`Server::stop`]; the database outlives it.
pub struct Server {
    addr: SocketAddr,
    hub: Arc<Hub>,
    shutdown: oneshot::Sender<()>,
    task: JoinHandle<std::io::Result<()>>,
}

impl Server {
    /// Binds `addr` (port 0 picks a free port) and starts serving.
    pub async fn start(
        store: Store,
        options: &HttpOptions,
        addr: SocketAddr,
    ) -> anyhow::Result<Self> {
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        let addr = listener.local_addr()?;
        let hub = Hub::start(store.clone(), options.subscriber_buffer).await?;
        let app = router(store, hub.clone(), options)?;
        let (shutdown, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
        });
        Ok(Self {
            addr,
            hub,
            shutdown,
            task,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting connections and lets in-flight requests finish (for a while). When this
    /// returns, the server holds no database connection any more.
    pub async fn stop(self) {
        self.hub.shutdown();
        let _ = self.shutdown.send(());
        let mut task = self.task;
        match tokio::time::timeout(DRAIN_GRACE, &mut task).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(err))) => tracing::warn!("server ended with an error: {err}"),
            Ok(Err(err)) => tracing::error!("server task failed: {err}"),
            Err(_) => {
                tracing::warn!("requests still running after {DRAIN_GRACE:?}; dropping them");
                task.abort();
                let _ = task.await;
            }
        }
    }
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
