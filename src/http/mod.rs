//! The HTTP edge: GraphQL over HTTP (POST and GET), GraphiQL, health and readiness probes.

mod access;
mod graphiql;
mod graphql;
mod serve;
mod streaming;
mod throttle;
mod websocket;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::sync::watch;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::trace::TraceLayer;

use crate::api::{Runner, build_runner};
use crate::auth::{AuthMode, Authenticator};
use crate::config::{HttpOptions, Limits, LiveOptions};
use crate::live::{Hub, SubscriptionSlots};
use crate::store::Store;
use access::{HostPolicy, OriginPolicy};
pub use graphiql::EXAMPLE_QUERY;
pub use serve::serve;
use throttle::Throttle;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    /// Runs GraphQL operations.
    pub runner: Runner,
    pub store: Store,
    pub auth: Arc<Authenticator>,
    /// Browser origins that may open WebSocket and SSE streams.
    pub origins: Arc<OriginPolicy>,
    /// Interval of the server's WebSocket keepalive pings.
    pub ws_keepalive: Duration,
    /// The GraphiQL page.
    pub graphiql: graphiql::Page,
    pub limits: Limits,
    /// Turns true when the server stops: open streams close themselves.
    pub closing: watch::Receiver<bool>,
    pub throttle: Arc<Throttle>,
    pub live: LiveOptions,
}

pub use websocket::ConnectionInit;

/// The whole HTTP application, served on `listen`.
pub fn router(
    store: Store,
    hub: Arc<Hub>,
    auth: Arc<Authenticator>,
    options: &HttpOptions,
    closing: watch::Receiver<bool>,
) -> anyhow::Result<Router> {
    let limits = options.limits;
    let origins = Arc::new(OriginPolicy::new(options, auth.mode())?);
    let cors = cors(origins.cors_origins(), &options.cors_allow_headers)?;
    let state = AppState {
        runner: build_runner(
            store.clone(),
            hub,
            auth.clone(),
            SubscriptionSlots::new(options.live.max_subscriptions),
            limits,
        ),
        store,
        auth: auth.clone(),
        origins,
        ws_keepalive: options.ws_keepalive,
        graphiql: graphiql::Page::new(auth.mode()),
        limits,
        closing,
        throttle: Throttle::new(&options.throttle),
        live: options.live,
    };
    // Layers run outside in: the media type first, then the identity, both before the body
    // is read.
    let graphql_routes = || {
        get(graphql::get)
            .post(graphql::post)
            .layer(middleware::from_fn_with_state(
                state.clone(),
                throttle::admitted,
            ))
            .layer(middleware::from_fn_with_state(
                state.clone(),
                access::authenticated,
            ))
            .layer(middleware::from_fn(access::require_json))
    };
    let mut router = Router::new()
        .merge(graphiql::routes())
        .route("/graphql", graphql_routes())
        .route("/graphql/ws", get(websocket::upgrade))
        .route("/graphql/stream", graphql_routes())
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .layer(RequestBodyLimitLayer::new(limits.max_body_bytes))
        .layer(CatchPanicLayer::new())
        .layer(TraceLayer::new_for_http())
        .with_state(state.clone());
    // Without authentication, a page on another site could reach the server through DNS
    // rebinding; its requests name that site as Host.
    if auth.mode() == AuthMode::None {
        router = router.layer(middleware::from_fn_with_state(
            HostPolicy::new(&options.auth.allowed_hosts),
            access::check_host,
        ));
    }
    Ok(match cors {
        Some(cors) => router.layer(cors),
        None => router,
    })
}

/// Cross-origin access for browser apps served from other origins (none unless configured).
/// Credentials (cookies through an SSO proxy) only for listed origins, never for `*`.
fn cors(origins: &[String], allow_headers: &[String]) -> anyhow::Result<Option<CorsLayer>> {
    if origins.is_empty() {
        return Ok(None);
    }
    let headers = allow_headers
        .iter()
        .map(|h| h.trim())
        .filter(|h| !h.is_empty())
        .map(|h| HeaderName::try_from(h).with_context(|| format!("invalid CORS header {h:?}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let layer = CorsLayer::new()
        .allow_methods([Method::GET, Method::POST])
        .allow_headers(headers);
    if origins.iter().any(|o| o == "*") {
        return Ok(Some(layer.allow_origin(AllowOrigin::any())));
    }
    let values = origins
        .iter()
        .map(|o| HeaderValue::from_str(o).with_context(|| format!("invalid CORS origin {o:?}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Some(
        layer
            .allow_origin(AllowOrigin::list(values))
            .allow_credentials(true),
    ))
}

/// The process is up.
async fn healthz() -> &'static str {
    "ok"
}

/// The database answers.
async fn readyz(State(state): State<AppState>) -> Response {
    let ping = sqlx::query_scalar::<_, i32>("SELECT 1").fetch_one(state.store.pool());
    match tokio::time::timeout(Duration::from_secs(2), ping).await {
        Ok(Ok(_)) => "ready".into_response(),
        Ok(Err(err)) => {
            tracing::warn!("readiness check failed: {err}");
            (StatusCode::SERVICE_UNAVAILABLE, "database unavailable").into_response()
        }
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "database did not answer in time",
        )
            .into_response(),
    }
}
