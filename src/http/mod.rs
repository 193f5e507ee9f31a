//! The HTTP edge: GraphQL over HTTP (POST and GET), GraphiQL, health and readiness probes.

mod graphiql;
mod graphql;
mod streaming;
mod websocket;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::trace::TraceLayer;

use crate::api::{CasefileSchema, build_schema};
use crate::config::HttpOptions;
use crate::live::Hub;
use crate::store::Store;
pub use graphiql::EXAMPLE_QUERY;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    pub schema: CasefileSchema,
    pub store: Store,
    /// Interval of the server's WebSocket keepalive pings.
    pub ws_keepalive: Duration,
}

pub use websocket::ConnectionInit;

/// The whole HTTP application.
pub fn router(store: Store, hub: Arc<Hub>, options: &HttpOptions) -> anyhow::Result<Router> {
    let limits = options.limits;
    let state = AppState {
        schema: build_schema(store.clone(), hub, limits),
        store,
        ws_keepalive: options.ws_keepalive,
    };
    let router = Router::new()
        .route("/", get(graphiql))
        .route("/graphql", get(graphql::get).post(graphql::post))
        .route("/graphql/ws", get(websocket::upgrade))
        .route("/graphql/stream", get(graphql::get).post(graphql::post))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .layer(RequestBodyLimitLayer::new(limits.max_body_bytes))
        .layer(CatchPanicLayer::new())
        .layer(TraceLayer::new_for_http())
        .with_state(state);
    Ok(match cors(&options.cors_allow_origins)? {
        Some(cors) => router.layer(cors),
        None => router,
    })
}

/// Cross-origin access for browser apps served from other origins (none unless configured).
fn cors(origins: &[String]) -> anyhow::Result<Option<CorsLayer>> {
    let origins: Vec<&str> = origins
        .iter()
        .map(|o| o.trim())
        .filter(|o| !o.is_empty())
        .collect();
    if origins.is_empty() {
        return Ok(None);
    }
    let allow_origin = if origins.contains(&"*") {
        AllowOrigin::any()
    } else {
        let values = origins
            .iter()
            .map(|o| HeaderValue::from_str(o).with_context(|| format!("invalid CORS origin {o:?}")))
            .collect::<anyhow::Result<Vec<_>>>()?;
        AllowOrigin::list(values)
    };
    Ok(Some(
        CorsLayer::new()
            .allow_origin(allow_origin)
            .allow_methods([Method::GET, Method::POST])
            .allow_headers([header::CONTENT_TYPE, header::ACCEPT, header::AUTHORIZATION]),
    ))
}

async fn graphiql() -> Html<&'static str> {
    Html(graphiql::page())
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
