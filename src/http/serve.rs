//! The connection loop: hyper with a header-read timeout (a client trickling its request
//! headers is dropped), each request told its peer's address (for per-client limits), and a
//! graceful stop that lets in-flight requests finish.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower::ServiceExt as _;

/// Serves `app` on `listener` until `closing` turns true, then waits up to `grace` for the
/// connections still open.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    header_read_timeout: Duration,
    mut closing: watch::Receiver<bool>,
    grace: Duration,
) {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout);
    builder.http2().timer(TokioTimer::new());
    let graceful = GracefulShutdown::new();
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of file descriptors and the like: pause rather than spin.
                    tracing::warn!("cannot accept a connection: {err}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = stopping(&mut closing) => break,
        };
        // Streams write small frames one after another (a result, then `complete`; tokens at
        // 200 a second): with Nagle's algorithm each would wait for the last one's delayed ACK,
        // 40 ms on Linux.
        if let Err(err) = stream.set_nodelay(true) {
            tracing::debug!(%peer, "cannot set TCP_NODELAY: {err}");
        }
        let app = app.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            let app = app.clone();
            async move {
                let response = app
                    .oneshot(request)
                    .await
                    .unwrap_or_else(|never| match never {});
                Ok::<_, Infallible>(response)
            }
        });
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), service)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!(%peer, "connection ended: {err}");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after {grace:?}; dropping them");
    }
}

/// Resolves once `closing` turns true. A dropped sender means no stop will ever be asked for:
/// then never (it must not read as a stop).
pub async fn stopping(closing: &mut watch::Receiver<bool>) {
    if closing.wait_for(|closing| *closing).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// The peer of a request served by [`serve`].
pub fn peer_of<B>(request: &axum::http::Request<B>) -> Option<SocketAddr> {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| *addr)
}
