//! `/metrics` for Prometheus: on the main address without credentials (the default), behind a
//! bearer token (`--metrics-token`), or on an address of its own (`--metrics-listen`, which
//! keeps it off the public port).

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get};
use sqlx::PgPool;
use subtle::ConstantTimeEq as _;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::AppState;
use super::options::MetricsOptions;
use super::serve::stopping;
use crate::observe::metrics::{
    DB_POOL_CONNECTIONS, DB_POOL_MAX_CONNECTIONS, DB_POOL_WAITING, handle,
};
use crate::store::Store;

/// Prometheus's text format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What a scrape needs.
#[derive(Clone)]
struct Scrape {
    store: Store,
    token: Option<Arc<str>>,
}

/// `GET /metrics` on the main router.
pub fn route(options: &MetricsOptions) -> MethodRouter<AppState> {
    let token = options.token.as_deref().map(Arc::from);
    get(move |State(state): State<AppState>, headers: HeaderMap| {
        let scrape = Scrape {
            store: state.store.clone(),
            token,
        };
        async move { render(&scrape, &headers) }
    })
}

/// Serves `/metrics` alone on `addr` until `closing`.
pub async fn serve_apart(
    addr: SocketAddr,
    options: &MetricsOptions,
    store: Store,
    mut closing: watch::Receiver<bool>,
) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen for metrics on {addr}"))?;
    let addr = listener.local_addr()?;
    let scrape = Scrape {
        store,
        token: options.token.as_deref().map(Arc::from),
    };
    let app = Router::new()
        .route(
            "/metrics",
            get(
                |State(scrape): State<Scrape>, headers: HeaderMap| async move {
                    render(&scrape, &headers)
                },
            ),
        )
        .with_state(scrape);
    let task = tokio::spawn(async move {
        let stopped = async move { stopping(&mut closing).await };
        if let Err(err) = axum::serve(listener, app)
            .with_graceful_shutdown(stopped)
            .await
        {
            tracing::error!("the metrics listener failed: {err}");
        }
    });
    Ok((addr, task))
}

fn render(scrape: &Scrape, headers: &HeaderMap) -> Response {
    if let Some(token) = &scrape.token {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or_default();
        if !bool::from(given.as_bytes().ct_eq(token.as_bytes())) {
            let mut refused =
                (StatusCode::UNAUTHORIZED, "/metrics needs its bearer token").into_response();
            refused.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"metrics\""),
            );
            return refused;
        }
    }
    pool_gauges(scrape.store.pool());
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(TEXT_FORMAT))],
        handle().render(),
    )
        .into_response()
}

/// The pool as it is at the scrape.
fn pool_gauges(pool: &PgPool) {
    let size = pool.size() as f64;
    let idle = pool.num_idle() as f64;
    metrics::gauge!(DB_POOL_CONNECTIONS, "state" => "idle").set(idle);
    metrics::gauge!(DB_POOL_CONNECTIONS, "state" => "in_use").set((size - idle).max(0.0));
    metrics::gauge!(DB_POOL_MAX_CONNECTIONS).set(pool.options().get_max_connections() as f64);
    // Registered even before anyone waited, so the series exists from the first scrape.
    metrics::gauge!(DB_POOL_WAITING).increment(0.0);
}
