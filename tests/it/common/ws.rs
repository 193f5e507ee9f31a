//! A minimal GraphQL-over-WebSocket client (both protocols), as a browser library would speak it.

use futures::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::http::HeaderValue;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The upgrade request of a GraphQL WebSocket: the legacy `graphql-ws` protocol or
/// `graphql-transport-ws`.
pub fn upgrade_request(
    addr: std::net::SocketAddr,
    legacy: bool,
) -> tokio_tungstenite::tungstenite::handshake::client::Request {
    let mut request = format!("ws://{addr}/graphql/ws")
        .into_client_request()
        .unwrap();
    let protocol = if legacy {
        "graphql-ws"
    } else {
        "graphql-transport-ws"
    };
    request
        .headers_mut()
        .insert("sec-websocket-protocol", HeaderValue::from_static(protocol));
    request
}

pub struct Subscription {
    socket: Socket,
    legacy: bool,
}

impl Subscription {
    /// Connects, initializes with `init`, and subscribes to `query`.
    pub async fn start(
        addr: std::net::SocketAddr,
        legacy: bool,
        init: Value,
        query: &str,
        variables: Value,
    ) -> Subscription {
        let mut subscription = Self::connect(addr, legacy, &[])
            .await
            .expect("websocket connects");
        let ack = subscription.init(init).await;
        assert_eq!(ack["type"], "connection_ack", "{ack}");
        subscription.subscribe(query, variables).await;
        subscription
    }

    /// As [`Subscription::start`] (`graphql-transport-ws`, no init payload), or why it could not:
    /// for clients that reconnect to a server that may be down.
    pub async fn open(
        addr: std::net::SocketAddr,
        query: &str,
        variables: Value,
    ) -> Result<Subscription, String> {
        let (socket, _) = tokio_tungstenite::connect_async(upgrade_request(addr, false))
            .await
            .map_err(|err| format!("connecting failed: {err}"))?;
        let mut subscription = Subscription {
            socket,
            legacy: false,
        };
        subscription
            .send(Message::text(
                json!({ "type": "connection_init", "payload": {} }).to_string(),
            ))
            .await?;
        let ack = subscription.receive().await?;
        if ack["type"] != "connection_ack" {
            return Err(format!("not acknowledged: {ack}"));
        }
        subscription
            .send(Message::text(
                json!({ "id": "1", "type": "subscribe", "payload": { "query": query, "variables": variables } })
                    .to_string(),
            ))
            .await?;
        Ok(subscription)
    }

    /// Opens the socket with extra upgrade-request headers; the HTTP status when refused.
    pub async fn connect(
        addr: std::net::SocketAddr,
        legacy: bool,
        headers: &[(&'static str, &str)],
    ) -> Result<Subscription, u16> {
        let mut request = upgrade_request(addr, legacy);
        for (name, value) in headers {
            request
                .headers_mut()
                .insert(*name, HeaderValue::from_str(value).unwrap());
        }
        match tokio_tungstenite::connect_async(request).await {
            Ok((socket, _)) => Ok(Subscription { socket, legacy }),
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                Err(response.status().as_u16())
            }
            Err(err) => panic!("websocket connect failed: {err}"),
        }
    }

    /// Sends `connection_init`; the answer (`connection_ack`, `connection_error`, or
    /// `{"type": "closed", "code": …}`).
    pub async fn init(&mut self, payload: Value) -> Value {
        self.socket
            .send(Message::text(
                json!({ "type": "connection_init", "payload": payload }).to_string(),
            ))
            .await
            .unwrap();
        self.message().await
    }

    /// Starts operation "1".
    pub async fn subscribe(&mut self, query: &str, variables: Value) {
        self.start_operation("1", query, variables).await;
    }

    /// Starts an operation with the given id.
    pub async fn start_operation(&mut self, id: &str, query: &str, variables: Value) {
        let start = if self.legacy { "start" } else { "subscribe" };
        self.socket
            .send(Message::text(
                json!({ "id": id, "type": start, "payload": { "query": query, "variables": variables } })
                    .to_string(),
            ))
            .await
            .unwrap();
    }

    /// Ends an operation (`complete`, or the legacy `stop`).
    pub async fn stop_operation(&mut self, id: &str) {
        let stop = if self.legacy { "stop" } else { "complete" };
        self.socket
            .send(Message::text(json!({ "id": id, "type": stop }).to_string()))
            .await
            .unwrap();
    }

    /// The next message after a `connection_error` or an error: the close frame's code.
    pub async fn closed_with(&mut self) -> Option<u16> {
        loop {
            let message = self.message().await;
            if message["type"] == "closed" {
                return message["code"].as_u64().map(|c| c as u16);
            }
        }
    }

    /// The next protocol message (pings answered, keepalives skipped).
    pub async fn message(&mut self) -> Value {
        self.receive().await.unwrap_or_else(|lost| panic!("{lost}"))
    }

    /// The next protocol message, or what went wrong with the connection (nothing within 20 s,
    /// the socket cut): for clients that reconnect.
    pub async fn receive(&mut self) -> Result<Value, String> {
        // One deadline for the message, however many keepalives come before it.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let frame = tokio::time::timeout_at(deadline, self.socket.next())
                .await
                .map_err(|_| "no message within 20 s".to_owned())?
                .ok_or("the socket ended")?
                .map_err(|err| format!("the socket failed: {err}"))?;
            let text = match frame {
                Message::Text(text) => text,
                Message::Ping(data) => {
                    self.send(Message::Pong(data)).await?;
                    continue;
                }
                Message::Close(frame) => {
                    let code = frame.as_ref().map(|f| u16::from(f.code));
                    return Ok(
                        json!({ "type": "closed", "code": code, "frame": format!("{frame:?}") }),
                    );
                }
                _ => continue,
            };
            let value: Value = serde_json::from_str(&text).unwrap();
            match value["type"].as_str() {
                Some("ka") => continue,
                Some("ping") => {
                    self.send(Message::text(json!({ "type": "pong" }).to_string()))
                        .await?;
                    continue;
                }
                _ => return Ok(value),
            }
        }
    }

    async fn send(&mut self, message: Message) -> Result<(), String> {
        self.socket
            .send(message)
            .await
            .map_err(|err| format!("sending failed: {err}"))
    }

    /// The next result's `data`, or `Err` with the message that ended the subscription.
    pub async fn next(&mut self) -> Result<Value, Value> {
        let message = self.message().await;
        self.result(message)
    }

    /// As [`Subscription::next`], or what went wrong with the connection.
    pub async fn try_next(&mut self) -> Result<Result<Value, Value>, String> {
        let message = self.receive().await?;
        Ok(self.result(message))
    }

    fn result(&self, message: Value) -> Result<Value, Value> {
        let data_type = if self.legacy { "data" } else { "next" };
        match message["type"].as_str() {
            Some(t) if t == data_type && message["payload"].get("errors").is_none() => {
                Ok(message["payload"]["data"].clone())
            }
            _ => Err(message),
        }
    }

    /// Drops the connection abruptly.
    pub async fn disconnect(mut self) {
        let _ = self.socket.close(None).await;
    }
}
