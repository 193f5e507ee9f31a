//! GraphQL over WebSocket: `graphql-transport-ws` and the legacy `graphql-ws` protocol on one
//! path, with keepalive both ways. The upgrade is refused (403) from another site's page; the
//! `connection_init` payload (or the upgrade's headers) authenticates the connection, which is
//! refused with 4401/4403 and closed with 4401 when its token is revoked or expires. The payload
//! reaches the schema as [`ConnectionInit`]. Each caller may have `--max-websockets-per-identity`
//! connections open: past it, the upgrade is refused with 429 when the caller is known then
//! (without authentication: its address), else `connection_init` is refused with 4429.
//!
//! async-graphql speaks the protocols; this module owns the connection around them. Its own
//! keepalive only closes clients that stay silent, and most clients never ping (the
//! `graphql-ws` library does not by default; legacy clients cannot), so the server pings
//! instead: every interval a WebSocket ping frame, which browsers answer by themselves, plus the
//! protocol's own keepalive (`ping`, answered with `pong`, or the legacy `ka`). A client heard
//! nothing from for two intervals is gone and is closed; so is one that never initializes.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_graphql::http::{
    ALL_WEBSOCKET_PROTOCOLS, WebSocket as Protocol, WebSocketProtocols, WsMessage,
};
use async_graphql::{Data, Executor};
use axum::Extension;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse as _, Response};
use futures::future::BoxFuture;
use futures::{FutureExt as _, SinkExt as _, StreamExt as _, future};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use super::AppState;
use super::access::OriginPolicy;
use super::bounded::BoundedRunner;
use super::serve::stopping;
use super::throttle::Refusal;
use crate::auth::{AuthMode, Caller, Identity, Rejection};
use crate::fair::{Full, Share};
use crate::observe::metrics::OpenStream;
use crate::observe::request::RequestInfo;

/// The payload a client sent with `connection_init`.
#[derive(Debug, Clone)]
pub struct ConnectionInit(pub serde_json::Value);

/// How long a connection reads on after sending its close frame, for the client's reply.
const CLOSE_LINGER: Duration = Duration::from_secs(1);
/// Close code for a peer that stopped answering (IANA-registered "Timeout").
const CLOSE_TIMEOUT: u16 = 3008;
/// Close code for a connection never initialized in time (graphql-transport-ws).
const CLOSE_INIT_TIMEOUT: u16 = 4408;
/// Close codes for a failed authentication (graphql-transport-ws reserves both).
const CLOSE_UNAUTHENTICATED: u16 = 4401;
const CLOSE_FORBIDDEN: u16 = 4403;
/// Close code when the server stops (RFC 6455 "Going Away"): clients reconnect elsewhere.
const CLOSE_GOING_AWAY: u16 = 1001;
/// Close code when credentials cannot be checked now (RFC 6455 "Try Again Later").
const CLOSE_TRY_AGAIN_LATER: u16 = 1013;
/// Close code for a caller over a fair-use limit at `connection_init` (its connections, or its
/// address's credential look-ups): graphql-transport-ws's "too many" code, which its clients
/// do not retry on their own.
const CLOSE_TOO_MANY: u16 = 4429;

/// How one connection is served.
pub(crate) struct Connection {
    pub protocol: WebSocketProtocols,
    /// Interval of the server's pings.
    pub keepalive: Duration,
    pub authorize: Authorize,
    /// Turns true when the server stops: the connection closes with 1001.
    pub closing: watch::Receiver<bool>,
    /// Most operations (subscriptions) running at once on the connection.
    pub max_operations: usize,
}

/// Accepts (or refuses) a connection's `connection_init` payload.
pub(crate) type Authorize =
    Box<dyn FnOnce(serde_json::Value) -> BoxFuture<'static, Result<Authorized, Rejection>> + Send>;

/// What an accepted `connection_init` gives the connection.
pub(crate) struct Authorized {
    /// What its operations run with.
    pub data: Data,
    /// Resolves when its credentials lapse.
    pub lapsed: BoxFuture<'static, ()>,
    /// Checks one more operation against its identity's rate: operations over a WebSocket
    /// count like requests.
    pub pace: Pace,
}

pub(crate) type Pace = Box<dyn Fn() -> Result<(), Refusal> + Send + Sync>;

/// The connection's place among its caller's WebSocket connections, kept in the connection's
/// data: freed when the connection ends.
struct OpenConnection {
    _share: Share,
}

pub async fn upgrade(
    State(state): State<AppState>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    info: Option<Extension<RequestInfo>>,
    headers: HeaderMap,
    uri: Uri,
    upgrade: WebSocketUpgrade,
) -> Response {
    let peer = peer.map(|Extension(ConnectInfo(peer))| peer);
    // Connections count against their client's rate like requests (its identity comes later).
    if let Some(peer) = peer
        && let Err(refused) = state.throttle.check_rate(&Caller::address(peer.ip()))
    {
        return refused.response();
    }
    // A page on another site must not read live data with the browser's credentials.
    if !state.origins.allows(&headers, &uri) {
        return OriginPolicy::refused();
    }
    let Some(protocol) = requested_protocol(&headers) else {
        return (
            StatusCode::BAD_REQUEST,
            "Sec-WebSocket-Protocol must name graphql-transport-ws or graphql-ws",
        )
            .into_response();
    };
    // Without authentication the caller is its address, known now; otherwise its identity comes
    // with `connection_init`, and so does its place among its connections.
    let early_share = if state.auth.mode() == AuthMode::None {
        match state
            .websockets
            .take(&Caller::of(&Identity::anonymous(), peer))
        {
            Ok(share) => Some(share),
            Err(full) => return Refusal::from(full).response(),
        }
    } else {
        None
    };
    let auth = state.auth.clone();
    let throttle = state.throttle.clone();
    let websockets = state.websockets.clone();
    let info = info.map(|Extension(info)| info.with_transport("websocket"));
    // Credentials come in `connection_init` (or, failing that, the upgrade request's headers).
    let authorize: Authorize = Box::new(move |payload| {
        async move {
            let client = peer.map(|peer| peer.ip());
            let identity = auth.authenticate_init(&headers, &payload, client).await?;
            let caller = Caller::of(&identity, peer);
            let share = match early_share {
                Some(share) => share,
                None => websockets
                    .take(&caller)
                    .map_err(|Full(message)| Rejection::Limited {
                        message,
                        retry_after_secs: 1,
                    })?,
            };
            let mut data = Data::default();
            data.insert(ConnectionInit(payload));
            data.insert(identity.clone());
            data.insert(caller.clone());
            data.insert(OpenConnection { _share: share });
            if let Some(info) = info {
                data.insert(info);
            }
            let pace: Pace = Box::new(move || throttle.check_rate(&caller));
            let lapsed = async move { auth.until_lapsed(&identity).await }.boxed();
            Ok(Authorized { data, lapsed, pace })
        }
        .boxed()
    });
    upgrade
        // Small buffers: most connections idle between updates, and thousands of them add up.
        .read_buffer_size(8 * 1024)
        .write_buffer_size(8 * 1024)
        // Clients only send subscribe requests and pings.
        .max_message_size(1024 * 1024)
        .protocols(ALL_WEBSOCKET_PROTOCOLS)
        .on_upgrade(move |socket| async move {
            let _open = OpenStream::new("websocket");
            let connection = Connection {
                protocol,
                keepalive: state.ws_keepalive,
                authorize,
                closing: state.closing.clone(),
                max_operations: state.live.max_subscriptions_per_connection,
            };
            let runner = BoundedRunner {
                runner: state.runner.clone(),
                throttle: state.throttle.clone(),
            };
            serve(socket, runner, connection).await
        })
}

/// The first GraphQL subprotocol the client asks for.
pub(crate) fn requested_protocol(headers: &HeaderMap) -> Option<WebSocketProtocols> {
    headers
        .get(header::SEC_WEBSOCKET_PROTOCOL)?
        .to_str()
        .ok()?
        .split(',')
        .find_map(|p| p.trim().parse().ok())
}

/// Runs one GraphQL WebSocket connection until either side ends it.
pub(crate) async fn serve<E: Executor>(socket: WebSocket, executor: E, connection: Connection) {
    let Connection {
        protocol,
        keepalive,
        authorize,
        mut closing,
        max_operations,
    } = connection;

    let silence_limit = keepalive * 2;
    let opened = Instant::now();
    // Milliseconds after `opened` at which the client was last heard from, in any way.
    let heard = Arc::new(AtomicU64::new(0));
    let initialized = Arc::new(AtomicBool::new(false));
    // Why `connection_init` was refused, to close with the right code.
    let refused: Arc<Mutex<Option<Rejection>>> = Arc::default();
    let (lapse_tx, lapse_rx) = oneshot::channel::<BoxFuture<'static, ()>>();

    let (mut sink, stream) = socket.split();
    let running = Arc::new(Running::new(protocol, max_operations));
    // Set once `connection_init` is accepted.
    let pace: Arc<OnceLock<Pace>> = Arc::default();
    let (refuse_tx, mut refuse_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let input = {
        let heard = heard.clone();
        let running = running.clone();
        let pace = pace.clone();
        stream
            .take_while(|frame| future::ready(frame.is_ok()))
            .filter_map(move |frame| {
                heard.store(opened.elapsed().as_millis() as u64, Ordering::Relaxed);
                future::ready(match frame {
                    Ok(message @ (Message::Text(_) | Message::Binary(_))) => {
                        let data = message.into_data();
                        match running.admit(&data, pace.get()) {
                            Ok(()) => Some(data),
                            Err(error) => {
                                // Over a limit: this operation gets an error, the
                                // connection stays.
                                let _ = refuse_tx.send(error);
                                None
                            }
                        }
                    }
                    // Pings are answered by the WebSocket layer; pongs and closes only count
                    // as signs of life.
                    _ => None,
                })
            })
    };
    let on_init = {
        let initialized = initialized.clone();
        let refused = refused.clone();
        move |payload: serde_json::Value| async move {
            match authorize(payload).await {
                Ok(Authorized {
                    data,
                    lapsed,
                    pace: paced,
                }) => {
                    initialized.store(true, Ordering::Relaxed);
                    let _ = lapse_tx.send(lapsed);
                    let _ = pace.set(paced);
                    Ok(data)
                }
                Err(rejection) => {
                    let message = rejection.message().to_owned();
                    *refused.lock().expect("not poisoned") = Some(rejection);
                    Err(async_graphql::Error::new(message))
                }
            }
        }
    };
    let mut messages = Protocol::new(executor, input, protocol).on_connection_init(on_init);
    // Resolves once the credentials the connection was initialized with lapse.
    let lapsed = async move {
        match lapse_rx.await {
            Ok(lapsed) => lapsed.await,
            Err(_) => future::pending().await,
        }
    };
    futures::pin_mut!(lapsed);
    let refusal = |refused: &Mutex<Option<Rejection>>| {
        refused
            .lock()
            .expect("not poisoned")
            .as_ref()
            .map(|rejection| {
                let code = match rejection {
                    Rejection::Unauthenticated => CLOSE_UNAUTHENTICATED,
                    Rejection::Forbidden(_) => CLOSE_FORBIDDEN,
                    Rejection::Unavailable => CLOSE_TRY_AGAIN_LATER,
                    Rejection::Limited { .. } => CLOSE_TOO_MANY,
                };
                close(code, rejection.message())
            })
    };

    let mut ticks = tokio::time::interval_at(opened + keepalive, keepalive);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let outgoing = tokio::select! {
                    message = messages.next() => match message {
        Some(WsMessage::Text(text)) => {
                    running.note_sent(&text);
                    vec![Message::Text(text.into())]
                }
                        // A refused `connection_init` closes with 4401/4403, not async-graphql's 1002.
                        Some(WsMessage::Close(code, reason)) => {
                            vec![refusal(&refused).unwrap_or_else(|| close(code, &reason))]
                        }
                        None => break,
                    },
        Some(error) = refuse_rx.recv() => vec![Message::Text(error.into())],
            () = stopping(&mut closing) => {vec![close(CLOSE_GOING_AWAY, "the server is shutting down")]
                    }
                    () = &mut lapsed => {
                        let message = "the credentials of this connection were revoked or expired";
                        let mut outgoing = Vec::new();
                        if protocol == WebSocketProtocols::SubscriptionsTransportWS {
                            outgoing.push(Message::Text(
                                serde_json::json!({ "type": "connection_error", "payload": { "message": message } })
                                    .to_string()
                                    .into(),
                            ));
                        }
                        outgoing.push(close(CLOSE_UNAUTHENTICATED, message));
                        outgoing
                    }
                    _ = ticks.tick() => {
                        let silent = opened.elapsed()
                            .saturating_sub(Duration::from_millis(heard.load(Ordering::Relaxed)));
                        if !initialized.load(Ordering::Relaxed) && opened.elapsed() >= silence_limit {
                            vec![close(CLOSE_INIT_TIMEOUT, "connection initialisation timeout")]
                        } else if silent >= silence_limit {
                            vec![close(CLOSE_TIMEOUT, "keepalive timeout")]
                        } else {
                            vec![Message::Ping(Default::default()), protocol_keepalive(protocol)]
                        }
                    }
                };
        for message in outgoing {
            let closing = matches!(message, Message::Close(_));
            // A client that stops reading cannot hold the connection (and its buffers) forever.
            match tokio::time::timeout(silence_limit, sink.send(message)).await {
                Ok(Ok(())) if !closing => {}
                Ok(Ok(())) => {
                    // The closing handshake: read what the client still sends (its pongs, its
                    // close frame) before hanging up. Closing a socket with unread data resets
                    // the connection, and a reset can destroy our close frame before the client
                    // reads its code.
                    let drain = async { while messages.next().await.is_some() {} };
                    let _ = tokio::time::timeout(CLOSE_LINGER, drain).await;
                    return;
                }
                _ => return,
            }
        }
    }
    // The legacy protocol refuses with `connection_error` and ends; close with the code too.
    if let Some(close) = refusal(&refused) {
        let _ = tokio::time::timeout(silence_limit, sink.send(close)).await;
        return;
    }
    let _ = sink.close().await;
}

/// The operations a client has running on a connection, bounded.
struct Running {
    ids: Mutex<HashSet<String>>,
    protocol: WebSocketProtocols,
    max: usize,
}

/// The parts of a protocol message that say which operation starts or ends.
#[derive(serde::Deserialize)]
struct Envelope {
    #[serde(rename = "type")]
    kind: String,
    id: Option<String>,
}

impl Running {
    fn new(protocol: WebSocketProtocols, max: usize) -> Running {
        Running {
            ids: Mutex::new(HashSet::new()),
            protocol,
            max,
        }
    }

    /// Notes a client message; `Err` with the error message to send for an operation that
    /// would be one too many for the connection, or over its identity's rate.
    fn admit(&self, message: &[u8], pace: Option<&Pace>) -> Result<(), String> {
        let Ok(Envelope { kind, id: Some(id) }) = serde_json::from_slice(message) else {
            return Ok(());
        };
        let mut ids = self.ids.lock().expect("not poisoned");
        match kind.as_str() {
            "subscribe" | "start" if !ids.contains(&id) => {
                if ids.len() >= self.max {
                    let error = serde_json::json!({
                        "message": format!("this connection already runs {} operations, its limit (--max-subscriptions-per-connection); complete one first", self.max),
                        "extensions": { "code": "TOO_MANY_SUBSCRIPTIONS" },
                    });
                    return Err(operation_error(self.protocol, &id, error));
                }
                if let Some(Err(refusal)) = pace.map(|pace| pace()) {
                    let error = serde_json::to_value(refusal.error()).unwrap_or_default();
                    return Err(operation_error(self.protocol, &id, error));
                }
                ids.insert(id);
            }
            "complete" | "stop" => {
                ids.remove(&id);
            }
            _ => {}
        }
        Ok(())
    }

    /// Notes a server message: an operation that completed or failed has ended.
    fn note_sent(&self, message: &str) {
        // Results can be large; only the short end-of-operation messages are read.
        if message.len() > 512 {
            return;
        }
        if let Ok(Envelope { kind, id: Some(id) }) = serde_json::from_str(message)
            && matches!(kind.as_str(), "complete" | "error")
        {
            self.ids.lock().expect("not poisoned").remove(&id);
        }
    }
}

/// The protocol's error message for an operation refused before it started.
fn operation_error(protocol: WebSocketProtocols, id: &str, error: serde_json::Value) -> String {
    let payload = match protocol {
        WebSocketProtocols::GraphQLWS => serde_json::json!([error]),
        WebSocketProtocols::SubscriptionsTransportWS => error,
    };
    serde_json::json!({ "id": id, "type": "error", "payload": payload }).to_string()
}

fn close(code: u16, reason: &str) -> Message {
    // A close frame's reason must fit in 123 bytes; cut on a character boundary.
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    Message::Close(Some(CloseFrame {
        code,
        reason: reason[..end].into(),
    }))
}

/// The protocol-level keepalive: a `ping` the client answers, or the legacy one-way `ka`.
fn protocol_keepalive(protocol: WebSocketProtocols) -> Message {
    Message::Text(
        match protocol {
            WebSocketProtocols::GraphQLWS => r#"{"type":"ping"}"#,
            WebSocketProtocols::SubscriptionsTransportWS => r#"{"type":"ka"}"#,
        }
        .into(),
    )
}

#[cfg(test)]
mod tests {
    //! The transport with a schema whose resolver reads the `connection_init` payload, over a
    //! real WebSocket.

    use async_graphql::{Context, EmptyMutation, EmptySubscription, Json, Object, Schema};
    use axum::Router;
    use axum::routing::get;
    use serde_json::{Value, json};
    use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
    use tokio_tungstenite::tungstenite::{self, http::HeaderValue};

    use super::*;

    struct Query;

    #[Object]
    impl Query {
        async fn init_payload(&self, ctx: &Context<'_>) -> Json<Value> {
            Json(ctx.data_unchecked::<ConnectionInit>().0.clone())
        }
    }

    async fn server() -> std::net::SocketAddr {
        let schema = Schema::new(Query, EmptyMutation, EmptySubscription);
        let app = Router::new().route(
            "/ws",
            get(
                move |headers: HeaderMap, upgrade: WebSocketUpgrade| async move {
                    let protocol = requested_protocol(&headers).unwrap();
                    upgrade
                        .protocols(ALL_WEBSOCKET_PROTOCOLS)
                        .on_upgrade(move |socket| {
                            let connection = Connection {
                                protocol,
                                keepalive: Duration::from_secs(5),
                                authorize: Box::new(|payload| {
                                    async move {
                                        let mut data = Data::default();
                                        data.insert(ConnectionInit(payload));
                                        Ok(Authorized {
                                            data,
                                            lapsed: future::pending().boxed(),
                                            pace: Box::new(|| Ok(())),
                                        })
                                    }
                                    .boxed()
                                }),
                                closing: watch::channel(false).1,
                                max_operations: 10,
                            };
                            serve(socket, schema, connection)
                        })
                },
            ),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        addr
    }

    async fn init_payload_seen(protocol: &'static str, payload: Value) -> Value {
        let addr = server().await;
        let mut request = format!("ws://{addr}/ws").into_client_request().unwrap();
        request
            .headers_mut()
            .insert("sec-websocket-protocol", HeaderValue::from_static(protocol));
        let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
        let send = |v: Value| tungstenite::Message::text(v.to_string());
        socket
            .send(send(
                json!({ "type": "connection_init", "payload": payload }),
            ))
            .await
            .unwrap();
        let start = if protocol == "graphql-ws" {
            "start"
        } else {
            "subscribe"
        };
        socket
            .send(send(
                json!({ "id": "1", "type": start, "payload": { "query": "{ initPayload }" } }),
            ))
            .await
            .unwrap();
        loop {
            let frame = tokio::time::timeout(Duration::from_secs(10), socket.next())
                .await
                .expect("an answer")
                .expect("open")
                .expect("a frame");
            let tungstenite::Message::Text(text) = frame else {
                continue;
            };
            let message: Value = serde_json::from_str(&text).unwrap();
            if message["id"] == "1" {
                assert_eq!(message["payload"]["errors"], Value::Null, "{message}");
                return message["payload"]["data"]["initPayload"].clone();
            }
        }
    }

    #[tokio::test]
    async fn connection_init_payload_reaches_resolvers() {
        let payload = json!({ "headers": { "Authorization": "Bearer t0ken" }, "client": "web" });
        for protocol in ["graphql-transport-ws", "graphql-ws"] {
            assert_eq!(
                init_payload_seen(protocol, payload.clone()).await,
                payload,
                "{protocol}"
            );
        }
    }
}
