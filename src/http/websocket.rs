//! GraphQL over WebSocket: `graphql-transport-ws` and the legacy `graphql-ws` protocol on one
//! path, with keepalive. The `connection_init` payload reaches the schema as [`ConnectionInit`].

use std::time::Duration;

use async_graphql::Data;
use async_graphql::http::ALL_WEBSOCKET_PROTOCOLS;
use async_graphql_axum::{GraphQLProtocol, GraphQLWebSocket};
use axum::extract::State;
use axum::extract::ws::WebSocketUpgrade;
use axum::response::Response;

use super::AppState;
use crate::api::Loaders;

/// How long the server waits for a client's pong before it closes the connection.
const KEEPALIVE: Duration = Duration::from_secs(30);

/// The payload a client sent with `connection_init` (authentication will read it).
#[derive(Debug, Clone)]
pub struct ConnectionInit(pub serde_json::Value);

pub async fn upgrade(
    State(state): State<AppState>,
    protocol: GraphQLProtocol,
    upgrade: WebSocketUpgrade,
) -> Response {
    upgrade
        // Small buffers: most connections idle between updates, and thousands of them add up.
        .read_buffer_size(8 * 1024)
        .write_buffer_size(8 * 1024)
        // Clients only send subscribe requests and pings.
        .max_message_size(1024 * 1024)
        .protocols(ALL_WEBSOCKET_PROTOCOLS)
        .on_upgrade(move |socket| async move {
            let mut data = Data::default();
            data.insert(Loaders::uncached(&state.store));
            GraphQLWebSocket::new(socket, state.schema.clone(), protocol)
                .with_data(data)
                .on_connection_init(|payload| async move {
                    let mut data = Data::default();
                    data.insert(ConnectionInit(payload));
                    Ok(data)
                })
                .keepalive_timeout(KEEPALIVE)
                .serve()
                .await
        })
}
