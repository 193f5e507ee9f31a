//! Bounded use: rates and requests in flight per identity and per process, request and
//! header-read timeouts, subscription caps, stream lifetimes and a graceful stop.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use casefile::auth::AuthMode;
use casefile::http::HttpOptions;
use casefile::model::Role;

use crate::common::TestApp;
use crate::common::sse::SseSubscription;
use crate::common::ws::Subscription;

fn code(body: &Value) -> &str {
    body["errors"][0]["extensions"]["code"]
        .as_str()
        .unwrap_or("")
}

async fn token(app: &TestApp, name: &str) -> String {
    app.token(name, Role::Writer, None).await
}

fn query(app: &TestApp, secret: Option<&str>) -> reqwest::RequestBuilder {
    let request = app
        .client
        .post(app.url("/graphql"))
        .json(&json!({ "query": "{ sessions { totalCount } }" }));
    match secret {
        Some(secret) => request.bearer_auth(secret),
        None => request,
    }
}

#[tokio::test]
async fn each_identity_has_its_own_rate() {
    let mut options = HttpOptions::default();
    options.auth.mode = AuthMode::Tokens;
    options.throttle.rate_limit_per_second = 5;
    let app = TestApp::start_with(options).await;
    let (busy, calm) = (token(&app, "busy").await, token(&app, "calm").await);
    let mut limited = None;
    for _ in 0..20 {
        let response = query(&app, Some(&busy)).send().await.unwrap();
        if response.status() == StatusCode::TOO_MANY_REQUESTS {
            limited = Some(response);
            break;
        }
    }
    let limited = limited.expect("20 requests at once exceed 5 per second");
    let retry_after: u64 = limited.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=2).contains(&retry_after), "{retry_after}");
    let body: Value = limited.json().await.unwrap();
    assert_eq!(code(&body), "RATE_LIMITED", "{body}");
    // Another identity is not slowed down by it.
    assert_eq!(
        query(&app, Some(&calm)).send().await.unwrap().status(),
        StatusCode::OK
    );

    // Operations over a WebSocket count like requests: no way around the rate. The one over
    // it gets an error with the code and the wait; the connection stays.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let mut socket = Subscription::connect(app.addr, false, &[]).await.unwrap();
    let init = json!({ "Authorization": format!("Bearer {busy}") });
    assert_eq!(socket.init(init).await["type"], "connection_ack");
    for id in 0..20 {
        socket
            .start_operation(
                &id.to_string(),
                "{ sessions(first: 1) { totalCount } }",
                json!({}),
            )
            .await;
    }
    let mut refused = None;
    for _ in 0..40 {
        let message = socket.message().await;
        if message["type"] == "error" {
            refused = Some(message);
            break;
        }
    }
    let refused = refused.expect("20 operations at once exceed 5 per second");
    assert_eq!(
        refused["payload"][0]["extensions"]["code"], "RATE_LIMITED",
        "{refused}"
    );
    assert!(refused["payload"][0]["extensions"]["retryAfter"].as_u64() >= Some(1));
    tokio::time::sleep(Duration::from_millis(1100)).await;
    socket
        .start_operation("later", "{ sessions(first: 1) { totalCount } }", json!({}))
        .await;
    loop {
        let message = socket.message().await;
        if message["id"] == "later" {
            assert_eq!(message["type"], "next", "{message}");
            break;
        }
    }
    app.stop().await;
}

#[tokio::test]
async fn requests_in_flight_are_bounded_per_identity_and_in_all() {
    let mut options = HttpOptions::default();
    options.auth.mode = AuthMode::Tokens;
    options.throttle.max_concurrent_per_identity = 1;
    options.throttle.max_concurrent_requests = 2;
    options.throttle.request_timeout = Duration::from_millis(800);
    let app = TestApp::start_with(options).await;
    let (a, b, c) = (
        token(&app, "a").await,
        token(&app, "b").await,
        token(&app, "c").await,
    );
    // Verified once (and cached), so that authentication needs no connection below.
    for secret in [&a, &b, &c] {
        assert_eq!(
            query(&app, Some(secret)).send().await.unwrap().status(),
            StatusCode::OK
        );
    }
    let held = app.hold_the_pool().await;
    // Each waits for a database connection, in flight until the request timeout.
    let first = tokio::spawn(query(&app, Some(&a)).send());
    tokio::time::sleep(Duration::from_millis(100)).await;
    let second = query(&app, Some(&a)).send().await.unwrap();
    assert_eq!(
        second.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "a has one in flight"
    );
    let other = tokio::spawn(query(&app, Some(&b)).send());
    tokio::time::sleep(Duration::from_millis(100)).await;
    let third = query(&app, Some(&c)).send().await.unwrap();
    assert_eq!(
        third.status(),
        StatusCode::SERVICE_UNAVAILABLE,
        "two in flight in all"
    );
    assert_eq!(third.headers()["retry-after"], "1");
    let body: Value = third.json().await.unwrap();
    assert_eq!(code(&body), "SERVER_BUSY");

    // The ones in flight end at the request timeout, with a retryable code.
    let started = Instant::now();
    let first = first.await.unwrap().unwrap();
    assert_eq!(first.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body: Value = first.json().await.unwrap();
    assert_eq!(code(&body), "TIMEOUT", "{body}");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(
        other.await.unwrap().unwrap().status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    drop(held);
    assert_eq!(
        query(&app, Some(&a)).send().await.unwrap().status(),
        StatusCode::OK
    );
    app.stop().await;
}

#[tokio::test]
async fn a_client_trickling_its_headers_is_dropped() {
    let options = HttpOptions {
        header_read_timeout: Duration::from_millis(500),
        ..HttpOptions::default()
    };
    let app = TestApp::start_with(options).await;
    let mut socket = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    socket
        .write_all(b"POST /graphql HTTP/1.1\r\nHost: loc")
        .await
        .unwrap();
    let started = Instant::now();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), socket.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the server closed the connection");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // A prompt client is served on the same server.
    assert_eq!(
        query(&app, None).send().await.unwrap().status(),
        StatusCode::OK
    );
    app.stop().await;
}

#[tokio::test]
async fn subscriptions_are_capped_per_connection_and_per_process() {
    let mut options = HttpOptions::default();
    options.live.max_subscriptions_per_connection = 2;
    options.live.max_subscriptions = 3;
    // One caller here: its share must not be what runs out first.
    options.live.max_subscriptions_per_identity = Some(3);
    let app = TestApp::start_with(options).await;
    let create = |alert: &str| {
        format!(
            "mutation {{ createSession(input: {{ alertType: \"{alert}\", chainId: \"c\" }}) {{ uuid }} }}"
        )
    };
    // Every subscription here starts from the feed's beginning, so its first delivery (this
    // session) shows it holds its place: a place is taken when the server first runs the
    // stream, which may be after the client has sent it or seen the response's headers.
    app.data(&create("A"), json!({})).await;
    let from_start = "subscription ($after: String) { sessions(after: $after) { status } }";
    let start = json!({ "after": casefile::cursor::FeedPosition { position: 0 }.encode() });
    let mut socket = Subscription::connect(app.addr, false, &[]).await.unwrap();
    assert_eq!(socket.init(json!({})).await["type"], "connection_ack");
    for id in ["a", "b"] {
        socket.start_operation(id, from_start, start.clone()).await;
        let first = socket.message().await;
        assert_eq!(
            (&first["id"], &first["type"]),
            (&json!(id), &json!("next")),
            "{first}"
        );
    }
    socket.start_operation("c", from_start, start.clone()).await;
    let refused = socket.message().await;
    assert_eq!(refused["id"], "c", "{refused}");
    assert_eq!(refused["type"], "error");
    assert_eq!(
        refused["payload"][0]["extensions"]["code"],
        "TOO_MANY_SUBSCRIPTIONS"
    );

    // The connection stays; a third subscription elsewhere fills the process.
    let mut sse = SseSubscription::start(app.addr, from_start, start.clone()).await;
    assert_eq!(sse.next().await.unwrap()["sessions"]["status"], "PENDING");
    let refused = SseSubscription::start(app.addr, from_start, start.clone())
        .await
        .next()
        .await;
    let refused = refused.unwrap_err();
    assert_eq!(
        refused["errors"][0]["extensions"]["code"], "TOO_MANY_SUBSCRIPTIONS",
        "{refused}"
    );

    // Those open still deliver.
    app.data(&create("B"), json!({})).await;
    let mut delivered = std::collections::BTreeSet::new();
    while delivered.len() < 2 {
        let message = socket.message().await;
        assert_eq!(message["type"], "next", "{message}");
        delivered.insert(message["id"].as_str().unwrap().to_owned());
    }
    assert_eq!(sse.next().await.unwrap()["sessions"]["status"], "PENDING");

    // Completing one frees its place on the connection, and in the process at once: the SSE
    // stream, dropped too, may hold its place until the server sees its connection close.
    socket.stop_operation("a").await;
    drop(sse);
    socket.start_operation("d", from_start, start).await;
    app.data(&create("C"), json!({})).await;
    // `d` replays the feed (three sessions), `b` gets the third.
    let mut delivered = Vec::new();
    while delivered.len() < 4 {
        let message = socket.message().await;
        if message["type"] == "complete" {
            assert_eq!(message["id"], "a", "{message}");
            continue;
        }
        assert_eq!(message["type"], "next", "{message}");
        delivered.push(message["id"].as_str().unwrap().to_owned());
    }
    delivered.sort();
    assert_eq!(delivered, ["b", "d", "d", "d"]);
    app.stop().await;
}

#[tokio::test]
async fn idle_and_old_streams_end_with_a_code_to_resume_on() {
    let mut options = HttpOptions::default();
    options.live.stream_idle = Duration::from_millis(700);
    let app = TestApp::start_with(options).await;
    let started = Instant::now();
    let mut sse =
        SseSubscription::start(app.addr, "subscription { sessions { status } }", json!({})).await;
    let ended = sse.next().await.unwrap_err();
    assert_eq!(
        ended["errors"][0]["extensions"]["code"], "STREAM_EXPIRED",
        "{ended}"
    );
    assert!(started.elapsed() >= Duration::from_millis(600));
    app.stop().await;

    let mut options = HttpOptions::default();
    options.live.stream_lifetime = Duration::from_millis(1500);
    let app = TestApp::start_with(options).await;
    let started = Instant::now();
    let mut sse =
        SseSubscription::start(app.addr, "subscription { sessions { status } }", json!({})).await;
    // Busy, yet it ends at its lifetime: a writer keeps the feed moving until the stream ends,
    // however slowly this machine serves each write.
    let (client, url) = (app.client.clone(), app.url("/graphql"));
    let writer = tokio::spawn(async move {
        loop {
            let create =
                "mutation { createSession(input: { alertType: \"A\", chainId: \"c\" }) { uuid } }";
            let sent = client
                .post(&url)
                .json(&json!({ "query": create }))
                .send()
                .await;
            assert!(sent.unwrap().status().is_success());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let mut delivered = 0;
    let ended = loop {
        match sse.next().await {
            Ok(event) => {
                assert_eq!(event["sessions"]["status"], "PENDING", "{event}");
                delivered += 1;
            }
            Err(ended) => break ended,
        }
    };
    writer.abort();
    assert!(delivered > 0, "the stream was busy before it ended");
    assert_eq!(
        ended["errors"][0]["extensions"]["code"], "STREAM_EXPIRED",
        "{ended}"
    );
    assert!(started.elapsed() >= Duration::from_millis(1400));
    app.stop().await;
}

#[tokio::test]
async fn a_stopping_server_closes_its_streams_at_once() {
    let app = TestApp::start().await;
    let feed = "subscription { sessions { status } }";
    let mut socket = Subscription::connect(app.addr, false, &[]).await.unwrap();
    assert_eq!(socket.init(json!({})).await["type"], "connection_ack");
    socket.subscribe(feed, json!({})).await;
    let mut sse = SseSubscription::start(app.addr, feed, json!({})).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    let stopping = tokio::spawn(app.stop());
    assert_eq!(socket.closed_with().await, Some(1001));
    let ended = sse.next().await.unwrap_err();
    assert_eq!(ended["event"], "complete", "{ended}");
    stopping.await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}
