//! The HTTP edge: GraphQL over HTTP (POST and GET), GraphiQL, Prometheus metrics, liveness and
//! readiness probes.

mod access;
mod bounded;
mod events;
mod export;
mod graphql;
mod metrics;
mod observed;
mod options;
mod pages;
mod probes;
mod refusal;
mod serve;
mod session_reader;
mod streaming;
mod throttle;
mod websocket;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use axum::http::{HeaderName, HeaderValue, Method};
use axum::middleware;
use axum::routing::get;
use tokio::sync::watch;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::compression::CompressionLayer;
use tower_http::compression::predicate::{
    DefaultPredicate, NotForContentType, Predicate, SizeAbove,
};
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::limit::RequestBodyLimitLayer;

use crate::api::{Limits, PublicOrigin, Runner, build_runner};
use crate::auth::{AuthMode, Authenticator};
use crate::fair::Shares;
use crate::live::{Hub, LiveOptions, SubscriptionSlots};
use crate::store::Store;
use access::{HostPolicy, OriginPolicy};
pub use metrics::serve_apart as serve_metrics_apart;
pub use options::{HttpOptions, MetricsOptions, ThrottleOptions};
pub use pages::EXAMPLE_QUERY;
pub use serve::serve;
use throttle::Throttle;

/// What every handler shares, behind one pointer: axum clones the state for every extractor
/// and middleware that takes it, so a clone must cost one reference count, not one per field.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The parts of [`AppState`].
pub struct Shared {
    /// Runs GraphQL operations.
    pub runner: Runner,
    pub store: Store,
    pub hub: Arc<Hub>,
    pub auth: Arc<Authenticator>,
    /// Browser origins that may open WebSocket and SSE streams.
    pub origins: Arc<OriginPolicy>,
    /// Interval of the server's WebSocket keepalive pings.
    pub ws_keepalive: Duration,
    /// The GraphiQL page.
    pub graphiql: pages::Page,
    /// The page a share link opens.
    pub share: pages::Page,
    pub limits: Limits,
    /// Turns true when the server stops: open streams close themselves.
    pub closing: watch::Receiver<bool>,
    pub throttle: Arc<Throttle>,
    pub live: LiveOptions,
    /// The subscriptions this process holds open, shared by every transport.
    pub slots: Arc<SubscriptionSlots>,
    /// Each caller's open SSE, multipart and event streams.
    pub streams: Arc<Shares>,
    /// Each caller's open WebSocket connections.
    pub websockets: Arc<Shares>,
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
    let groups_pool =
        crate::db::pool_beside(store.pool(), options.append_groups.append_groups_in_flight);
    let store = store.grouping_appends(options.append_groups, groups_pool);
    let origins = Arc::new(OriginPolicy::new(options, auth.mode())?);
    let cors = cors(origins.cors_origins(), &options.cors_allow_headers)?;
    let live = options.live;
    let slots = SubscriptionSlots::new(live.max_subscriptions, live.subscriptions_per_identity());
    let state = AppState(Arc::new(Shared {
        runner: build_runner(
            store.clone(),
            hub.clone(),
            auth.clone(),
            slots.clone(),
            limits,
            options.notifications,
            PublicOrigin(origins.public_origin().map(Arc::from)),
        ),
        slots,
        store,
        hub,
        auth: auth.clone(),
        origins,
        ws_keepalive: options.ws_keepalive,
        graphiql: pages::Page::graphiql(auth.mode()),
        share: pages::Page::share(),
        limits,
        closing,
        throttle: Throttle::new(&options.throttle),
        live,
        streams: Shares::new(
            live.max_streams_per_identity,
            "streams open",
            "--max-streams-per-identity",
            "close one first",
        ),
        websockets: Shares::new(
            live.max_websockets_per_identity,
            "WebSocket connections open",
            "--max-websockets-per-identity",
            "close one first",
        ),
    }));
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
        .merge(pages::routes())
        .route("/graphql", graphql_routes())
        .route("/graphql/ws", get(websocket::upgrade))
        .route("/graphql/stream", graphql_routes())
        .route("/sessions/{id}/events", get(events::stream))
        .route("/sessions/{id}/export", get(export::export))
        .route("/livez", get(probes::livez))
        .route("/healthz", get(probes::livez))
        .route("/readyz", get(probes::readyz));
    if options.metrics.listen.is_none() {
        router = router.route("/metrics", metrics::route(&options.metrics));
    }
    let mut router = router
        .layer(CompressionLayer::new().compress_when(worth_compressing()))
        .layer(RequestBodyLimitLayer::new(limits.max_body_bytes))
        .layer(middleware::map_response(move |response| async move {
            access::body_too_large(limits.max_body_bytes, response)
        }))
        .layer(CatchPanicLayer::new())
        .with_state(state.clone());
    // Without authentication, a page on another site could reach the server through DNS
    // rebinding; its requests name that site as Host.
    if auth.mode() == AuthMode::None {
        router = router.layer(middleware::from_fn_with_state(
            HostPolicy::new(&options.auth.allowed_hosts),
            access::check_host,
        ));
    }
    if let Some(cors) = cors {
        router = router.layer(cors);
    }
    // Outermost: every response is counted and carries its request id.
    Ok(router.layer(middleware::from_fn(observed::observed)))
}

/// Responses of a kilobyte or more, except streams (SSE and multipart: each event must reach
/// the client as it is sent, not when a compressor's block fills) and images.
fn worth_compressing() -> impl Predicate {
    DefaultPredicate::new()
        .and(NotForContentType::const_new("multipart/mixed"))
        .and(SizeAbove::new(1024))
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
