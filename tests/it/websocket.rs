//! The WebSocket connection itself: keepalive both ways, dead and uninitialized clients closed.

use std::time::Duration;

use futures::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::common::TestApp;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

const KEEPALIVE: Duration = Duration::from_millis(500);

async fn app() -> TestApp {
    TestApp::start_with(casefile::http::HttpOptions {
        ws_keepalive: KEEPALIVE,
        ..Default::default()
    })
    .await
}

async fn connect(app: &TestApp, protocol: &str) -> Socket {
    let mut request = format!("ws://{}/graphql/ws", app.addr)
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("sec-websocket-protocol", protocol.parse().unwrap());
    let (socket, response) = tokio_tungstenite::connect_async(request).await.unwrap();
    assert_eq!(response.headers()["sec-websocket-protocol"], protocol);
    socket
}

async fn send(socket: &mut Socket, message: Value) {
    socket
        .send(Message::text(message.to_string()))
        .await
        .unwrap();
}

/// The next frame (reading also answers ping frames, as browsers do).
async fn frame(socket: &mut Socket) -> Option<Message> {
    tokio::time::timeout(Duration::from_secs(10), socket.next())
        .await
        .expect("a frame within 10 s")
        .and_then(Result::ok)
}

fn message_type(frame: &Message) -> Option<String> {
    let Message::Text(text) = frame else {
        return None;
    };
    let value: Value = serde_json::from_str(text).unwrap();
    value["type"].as_str().map(str::to_owned)
}

/// Reads until a close frame arrives; returns its code. Reading answers the pings queued before
/// it, and answering one after the server has hung up fails: the close frame is still there to
/// read after that error.
async fn close_code(socket: &mut Socket) -> CloseCode {
    let mut failed_writes = 0;
    loop {
        let next = tokio::time::timeout(Duration::from_secs(10), socket.next())
            .await
            .expect("a frame within 10 s");
        match next {
            Some(Ok(Message::Close(Some(close)))) => return close.code,
            Some(Ok(_)) => continue,
            Some(Err(err)) if failed_writes < 3 => {
                failed_writes += 1;
                eprintln!("reading on after: {err}");
            }
            _ => panic!("the connection ended without a close frame"),
        }
    }
}

#[tokio::test]
async fn a_client_ping_is_answered_with_a_pong() {
    let app = app().await;
    let mut socket = connect(&app, "graphql-transport-ws").await;
    send(&mut socket, json!({ "type": "connection_init" })).await;
    send(&mut socket, json!({ "type": "ping" })).await;
    let mut types = Vec::new();
    while types.len() < 2 {
        let frame = frame(&mut socket).await.expect("open");
        if let Some(t) = message_type(&frame).filter(|t| t != "ping") {
            types.push(t);
        }
    }
    assert_eq!(types, ["connection_ack", "pong"]);
    app.stop().await;
}

/// A client that only answers what the server sends stays connected, on both protocols, and
/// the server's keepalive is what it sees while idle.
#[tokio::test]
async fn the_server_pings_idle_clients_and_keeps_the_ones_that_answer() {
    let app = app().await;
    for (protocol, keepalive, subscribe) in [
        ("graphql-transport-ws", "ping", "subscribe"),
        ("graphql-ws", "ka", "start"),
    ] {
        let mut socket = connect(&app, protocol).await;
        send(&mut socket, json!({ "type": "connection_init" })).await;
        let idle = KEEPALIVE * 6;
        let started = tokio::time::Instant::now();
        let (mut ping_frames, mut keepalives) = (0, 0);
        while started.elapsed() < idle {
            let Ok(frame) = tokio::time::timeout(idle / 4, socket.next()).await else {
                continue;
            };
            let frame = frame.expect("still open").unwrap();
            match &frame {
                Message::Ping(_) => ping_frames += 1,
                Message::Close(close) => panic!("{protocol}: closed while answering: {close:?}"),
                _ => {}
            }
            let kind = message_type(&frame);
            if kind.as_deref() == Some(keepalive) {
                keepalives += 1;
            }
            // graphql-transport-ws pings want a pong; legacy clients send nothing at all (the
            // WebSocket layer answers ping frames by itself).
            if kind.as_deref() == Some("ping") {
                send(&mut socket, json!({ "type": "pong" })).await;
            }
        }
        assert!(ping_frames >= 3, "{protocol}: {ping_frames} ping frames");
        assert!(
            keepalives >= 3,
            "{protocol}: {keepalives} `{keepalive}` messages"
        );
        // Still a working connection.
        send(
            &mut socket,
            json!({ "id": "1", "type": subscribe, "payload": { "query": "{ __typename }" } }),
        )
        .await;
        loop {
            let frame = frame(&mut socket).await.expect("open");
            let Message::Text(text) = &frame else {
                continue;
            };
            let value: Value = serde_json::from_str(text).unwrap();
            if value["id"] == "1" {
                assert_eq!(value["payload"]["data"]["__typename"], "Query", "{value}");
                break;
            }
        }
    }
    app.stop().await;
}

#[tokio::test]
async fn a_client_that_stops_answering_is_closed() {
    let app = app().await;
    let mut socket = connect(&app, "graphql-transport-ws").await;
    send(&mut socket, json!({ "type": "connection_init" })).await;
    // Reads nothing (so answers no ping) for longer than two keepalive intervals.
    tokio::time::sleep(KEEPALIVE * 4).await;
    assert_eq!(close_code(&mut socket).await, CloseCode::from(3008));
    app.stop().await;
}

#[tokio::test]
async fn a_client_that_never_initializes_is_closed_with_4408() {
    let app = app().await;
    for protocol in ["graphql-transport-ws", "graphql-ws"] {
        let mut socket = connect(&app, protocol).await;
        // It answers pings (by reading) but never sends connection_init.
        assert_eq!(
            close_code(&mut socket).await,
            CloseCode::from(4408),
            "{protocol}"
        );
    }
    app.stop().await;
}
