//! GraphQL over WebSocket: `graphql-transport-ws` and the legacy `graphql-ws` protocol on one
//! path, with keepalive both ways. The `connection_init` payload reaches the schema as
//! [`ConnectionInit`].
//!
//! async-graphql speaks the protocols; this module owns the connection around them. Its own
//! keepalive only closes clients that stay silent, and most clients never ping (the
//! `graphql-ws` library does not by default; legacy clients cannot), so the server pings
//! instead: every interval a WebSocket ping frame, which browsers answer by themselves, plus the
//! protocol's own keepalive (`ping`, answered with `pong`, or the legacy `ka`). A client heard
//! nothing from for two intervals is gone and is closed; so is one that never initializes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use async_graphql::http::{
    ALL_WEBSOCKET_PROTOCOLS, WebSocket as Protocol, WebSocketProtocols, WsMessage,
};
use async_graphql::{Data, Executor};
use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use futures::{SinkExt as _, StreamExt as _, future};
use tokio::time::Instant;

use super::AppState;
use crate::api::Loaders;

/// The payload a client sent with `connection_init` (authentication will read it).
#[derive(Debug, Clone)]
pub struct ConnectionInit(pub serde_json::Value);

/// Close code for a peer that stopped answering (IANA-registered "Timeout").
const CLOSE_TIMEOUT: u16 = 3008;
/// Close code for a connection never initialized in time (graphql-transport-ws).
const CLOSE_INIT_TIMEOUT: u16 = 4408;

pub async fn upgrade(
    State(state): State<AppState>,
    headers: HeaderMap,
    upgrade: WebSocketUpgrade,
) -> Response {
    let Some(protocol) = requested_protocol(&headers) else {
        return (
            StatusCode::BAD_REQUEST,
            "Sec-WebSocket-Protocol must name graphql-transport-ws or graphql-ws",
        )
            .into_response();
    };
    upgrade
        // Small buffers: most connections idle between updates, and thousands of them add up.
        .read_buffer_size(8 * 1024)
        .write_buffer_size(8 * 1024)
        // Clients only send subscribe requests and pings.
        .max_message_size(1024 * 1024)
        .protocols(ALL_WEBSOCKET_PROTOCOLS)
        .on_upgrade(move |socket| {
            let mut data = Data::default();
            data.insert(Loaders::uncached(&state.store));
            serve(socket, state.schema, protocol, data, state.ws_keepalive)
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
pub(crate) async fn serve<E: Executor>(
    socket: WebSocket,
    executor: E,
    protocol: WebSocketProtocols,
    data: Data,
    keepalive: Duration,
) {
    let silence_limit = keepalive * 2;
    let opened = Instant::now();
    // Milliseconds after `opened` at which the client was last heard from, in any way.
    let heard = Arc::new(AtomicU64::new(0));
    let initialized = Arc::new(AtomicBool::new(false));

    let (mut sink, stream) = socket.split();
    let input = {
        let heard = heard.clone();
        stream
            .take_while(|frame| future::ready(frame.is_ok()))
            .filter_map(move |frame| {
                heard.store(opened.elapsed().as_millis() as u64, Ordering::Relaxed);
                future::ready(match frame {
                    Ok(message @ (Message::Text(_) | Message::Binary(_))) => {
                        Some(message.into_data())
                    }
                    // Pings are answered by the WebSocket layer; pongs and closes only count
                    // as signs of life.
                    _ => None,
                })
            })
    };
    let on_init = {
        let initialized = initialized.clone();
        move |payload: serde_json::Value| async move {
            initialized.store(true, Ordering::Relaxed);
            let mut data = Data::default();
            data.insert(ConnectionInit(payload));
            Ok(data)
        }
    };
    let mut messages = Protocol::new(executor, input, protocol)
        .connection_data(data)
        .on_connection_init(on_init);

    let mut ticks = tokio::time::interval_at(opened + keepalive, keepalive);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let outgoing = tokio::select! {
            message = messages.next() => match message {
                Some(WsMessage::Text(text)) => vec![Message::Text(text.into())],
                Some(WsMessage::Close(code, reason)) => vec![close(code, &reason)],
                None => break,
            },
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
                _ => return,
            }
        }
    }
    let _ = sink.close().await;
}

fn close(code: u16, reason: &str) -> Message {
    Message::Close(Some(CloseFrame {
        code,
        reason: reason.into(),
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
    //! real WebSocket (the served schema has no such resolver until authentication lands).

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
                            serve(
                                socket,
                                schema,
                                protocol,
                                Data::default(),
                                Duration::from_secs(5),
                            )
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
