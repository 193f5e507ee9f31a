//! One set of limits for every transport: a query or mutation answered as a stream (SSE,
//! multipart, WebSocket) holds its place in flight and has the request timeout, as over a plain
//! POST; one caller cannot take every subscription, WebSocket connection or stream; the plain
//! event stream is checked like the GraphQL streams; and made-up credentials are looked up in
//! the database only within their address's rate.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use casefile::auth::AuthMode;
use casefile::cursor::FeedPosition;
use casefile::http::HttpOptions;
use casefile::model::Role;

use crate::common::fixtures::{self, NewSession};
use crate::common::multipart::MultipartSubscription;
use crate::common::sse::SseSubscription;
use crate::common::ws::Subscription;
use crate::common::{TestApp, statements};

const COUNT: &str = "{ sessions { totalCount } }";
const FEED: &str = "subscription { sessions { status } }";
/// The session feed from its beginning: "from now" would be wherever the server first ran it,
/// which may be after a write the test then waits for.
const FEED_FROM_START: &str =
    "subscription ($after: String) { sessions(after: $after) { status } }";
const CREATE: &str =
    "mutation { createSession(input: { alertType: \"A\", chainId: \"c\" }) { uuid } }";

fn from_start() -> Value {
    json!({ "after": FeedPosition { position: 0 }.encode() })
}

/// The first error's code: in a response, or in a WebSocket message (`next` or `error`).
fn code(value: &Value) -> &str {
    [
        &value["errors"][0],
        &value["payload"]["errors"][0],
        &value["payload"][0],
    ]
    .into_iter()
    .find_map(|error| error["extensions"]["code"].as_str())
    .unwrap_or("")
}

fn message(value: &Value) -> &str {
    [
        &value["errors"][0],
        &value["payload"]["errors"][0],
        &value["payload"][0],
    ]
    .into_iter()
    .find_map(|error| error["message"].as_str())
    .unwrap_or("")
}

fn bearer(secret: &str) -> String {
    format!("Bearer {secret}")
}

/// A WebSocket connection initialised with `secret` (none under `--auth none`).
async fn connected(app: &TestApp, secret: Option<&str>) -> Subscription {
    let mut socket = Subscription::connect(app.addr, false, &[]).await.unwrap();
    let init = match secret {
        Some(secret) => json!({ "Authorization": bearer(secret) }),
        None => json!({}),
    };
    let ack = socket.init(init).await;
    assert_eq!(ack["type"], "connection_ack", "{ack}");
    socket
}

/// The next message about operation `id` (others are skipped).
async fn message_of(socket: &mut Subscription, id: &str) -> Value {
    loop {
        let message = socket.message().await;
        if message["id"] == id {
            return message;
        }
    }
}

/// The next message about each of these operations, whichever order they come in.
async fn next_of_each(socket: &mut Subscription, ids: &[&str]) -> Vec<Value> {
    let mut found: Vec<Option<Value>> = vec![None; ids.len()];
    while found.iter().any(Option::is_none) {
        let message = socket.message().await;
        if let Some(at) = ids.iter().position(|id| message["id"] == *id)
            && found[at].is_none()
        {
            found[at] = Some(message);
        }
    }
    found.into_iter().flatten().collect()
}

/// A plain event stream request.
async fn events(
    app: &TestApp,
    session: uuid::Uuid,
    query: &str,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let mut request = app
        .client
        .get(app.url(&format!("/sessions/{session}/events{query}")));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

/// Status and body of a refused response.
async fn refused(response: reqwest::Response) -> (StatusCode, Value) {
    (response.status(), response.json().await.unwrap_or_default())
}

#[tokio::test]
async fn one_caller_at_its_caps_leaves_room_for_another() {
    let mut options = HttpOptions::default();
    options.auth.mode = AuthMode::Tokens;
    options.live.max_subscriptions_per_identity = Some(2);
    options.live.max_websockets_per_identity = 2;
    let mut app = TestApp::start_with(options).await;
    let greedy = app.token("greedy", Role::Reader, None).await;
    let other = app.token("other", Role::Reader, None).await;
    app.token = Some(app.token("writer", Role::Writer, None).await);

    // Two connections, two subscriptions: all this caller may have.
    let mut first = connected(&app, Some(&greedy)).await;
    first
        .start_operation("a", FEED_FROM_START, from_start())
        .await;
    first
        .start_operation("b", FEED_FROM_START, from_start())
        .await;
    // Both deliver, so both hold their places (connections are served concurrently: one
    // opened later could otherwise subscribe first).
    app.data(CREATE, json!({})).await;
    for delivered in next_of_each(&mut first, &["a", "b"]).await {
        assert_eq!(delivered["type"], "next", "{delivered}");
    }
    let mut second = connected(&app, Some(&greedy)).await;
    second.start_operation("c", FEED, json!({})).await;
    let refused_here = message_of(&mut second, "c").await;
    assert_eq!(
        code(&refused_here),
        "TOO_MANY_SUBSCRIPTIONS",
        "{refused_here}"
    );
    assert!(
        message(&refused_here).contains("--max-subscriptions-per-identity"),
        "{refused_here}"
    );
    // Its identity is known at `connection_init`: a third connection is closed there.
    let mut third = Subscription::connect(app.addr, false, &[]).await.unwrap();
    let closed = third
        .init(json!({ "Authorization": bearer(&greedy) }))
        .await;
    assert_eq!(closed["type"], "closed", "{closed}");
    assert_eq!(closed["code"], 4429, "{closed}");
    assert!(
        closed["frame"]
            .as_str()
            .unwrap()
            .contains("--max-websockets-per-identity"),
        "{closed}"
    );
    // The other transports count against the same share.
    let auth = bearer(&greedy);
    let mut over_sse =
        SseSubscription::start_with(app.addr, &[("authorization", &auth)], FEED, json!({}))
            .await
            .unwrap();
    let ended = over_sse.next().await.unwrap_err();
    assert_eq!(code(&ended), "TOO_MANY_SUBSCRIPTIONS", "{ended}");
    let session = fixtures::session(app.store.pool(), NewSession::default()).await;
    let (status, body) =
        refused(events(&app, session, "", &[("authorization", &auth)]).await).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(code(&body), "TOO_MANY_SUBSCRIPTIONS", "{body}");

    // Another caller connects and subscribes on every transport.
    let mut others = connected(&app, Some(&other)).await;
    others
        .start_operation("mine", FEED_FROM_START, from_start())
        .await;
    let auth = bearer(&other);
    let mut others_sse = SseSubscription::start_with(
        app.addr,
        &[("authorization", &auth)],
        FEED_FROM_START,
        from_start(),
    )
    .await
    .unwrap();
    app.data(CREATE, json!({})).await;
    let delivered = message_of(&mut others, "mine").await;
    assert_eq!(delivered["type"], "next", "{delivered}");
    assert_eq!(
        delivered["payload"]["data"]["sessions"]["status"],
        "PENDING"
    );
    assert_eq!(
        others_sse.next().await.unwrap()["sessions"]["status"],
        "PENDING"
    );
    // The greedy caller's own subscriptions carry on.
    for delivered in next_of_each(&mut first, &["a", "b"]).await {
        assert_eq!(delivered["type"], "next", "{delivered}");
    }

    // A closed connection returns its place.
    second.disconnect().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut again = Subscription::connect(app.addr, false, &[]).await.unwrap();
        let answer = again
            .init(json!({ "Authorization": bearer(&greedy) }))
            .await;
        if answer["type"] == "connection_ack" {
            break;
        }
        assert_eq!(answer["code"], 4429, "{answer}");
        assert!(
            Instant::now() < deadline,
            "the closed connection's place never returned"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    app.stop().await;
}

#[tokio::test]
async fn streams_and_connections_are_capped_per_caller() {
    let mut options = HttpOptions::default();
    options.live.max_streams_per_identity = 1;
    options.live.max_websockets_per_identity = 1;
    let app = TestApp::start_with(options).await;
    // Without authentication the caller is its address: this test's, 127.0.0.1.
    let open = SseSubscription::start(app.addr, FEED, json!({})).await;
    let (status, body) = SseSubscription::start_with(app.addr, &[], FEED, json!({}))
        .await
        .err()
        .expect("a second stream is refused");
    assert_eq!(status, 429, "{body}");
    assert_eq!(code(&body), "RATE_LIMITED", "{body}");
    assert!(
        message(&body).contains("--max-streams-per-identity"),
        "{body}"
    );
    let (status, body) = MultipartSubscription::start_with(app.addr, &[], COUNT, json!({}))
        .await
        .err()
        .expect("a multipart stream is refused");
    assert_eq!((status, code(&body)), (429, "RATE_LIMITED"), "{body}");
    let session = fixtures::session(app.store.pool(), NewSession::default()).await;
    let (status, body) = refused(events(&app, session, "", &[]).await).await;
    assert_eq!(
        (status.as_u16(), code(&body)),
        (429, "RATE_LIMITED"),
        "{body}"
    );

    // Another address is another caller.
    let elsewhere = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .build()
        .unwrap();
    let response = elsewhere
        .get(app.url(&format!("/sessions/{session}/events")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    drop(response);

    // Its address is known at the upgrade: a second connection is refused there.
    let _socket = connected(&app, None).await;
    assert_eq!(
        Subscription::connect(app.addr, false, &[]).await.err(),
        Some(429)
    );

    // A closed stream returns its place.
    drop(open);
    let deadline = Instant::now() + Duration::from_secs(10);
    while let Err((status, body)) =
        SseSubscription::start_with(app.addr, &[], FEED, json!({})).await
    {
        assert_eq!(status, 429, "{body}");
        assert!(
            Instant::now() < deadline,
            "the closed stream's place never returned"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    app.stop().await;
}

/// A count of sessions, or (once it waited longer than an external database's pool waits for a
/// connection) the retryable refusal.
fn answered_or_unavailable(result: &Result<Value, Value>) -> bool {
    match result {
        Ok(data) => data["sessions"]["totalCount"].is_number(),
        Err(response) => code(response) == "SERVICE_UNAVAILABLE",
    }
}

#[tokio::test]
async fn stream_queries_count_as_requests_in_flight() {
    let mut options = HttpOptions::default();
    options.auth.mode = AuthMode::Tokens;
    options.throttle.max_concurrent_per_identity = 1;
    options.throttle.max_concurrent_requests = 2;
    let app = TestApp::start_with(options).await;
    let (a, b, c) = (
        app.token("a", Role::Reader, None).await,
        app.token("b", Role::Reader, None).await,
        app.token("c", Role::Reader, None).await,
    );
    let (auth_a, auth_b, auth_c) = (bearer(&a), bearer(&b), bearer(&c));
    // Connected (and so verified, and cached) before the pool is held: authentication then
    // needs no connection.
    let mut socket_a = connected(&app, Some(&a)).await;
    let mut socket_c = connected(&app, Some(&c)).await;
    for auth in [&auth_a, &auth_b, &auth_c] {
        let response = app
            .client
            .post(app.url("/graphql"))
            .header("authorization", auth)
            .json(&json!({ "query": COUNT }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }
    let held = app.hold_the_pool().await;

    // a's query over SSE waits for a database connection: its stream is open, and it is in
    // flight.
    let mut waiting_a =
        SseSubscription::start_with(app.addr, &[("authorization", &auth_a)], COUNT, json!({}))
            .await
            .unwrap();
    for over in [
        MultipartSubscription::start_with(
            app.addr,
            &[("authorization", &auth_a)],
            COUNT,
            json!({}),
        )
        .await
        .err(),
        SseSubscription::start_with(app.addr, &[("authorization", &auth_a)], COUNT, json!({}))
            .await
            .err(),
    ] {
        let (status, body) = over.expect("a has a query in flight");
        assert_eq!((status, code(&body)), (429, "RATE_LIMITED"), "{body}");
        assert!(
            message(&body).contains("--max-concurrent-per-identity"),
            "{body}"
        );
    }
    socket_a.start_operation("q", COUNT, json!({})).await;
    let over = message_of(&mut socket_a, "q").await;
    assert_eq!(code(&over), "RATE_LIMITED", "{over}");

    // b's multipart query takes the process's second place.
    let mut waiting_b = MultipartSubscription::start_with(
        app.addr,
        &[("authorization", &auth_b)],
        COUNT,
        json!({}),
    )
    .await
    .unwrap();
    let (status, body) =
        SseSubscription::start_with(app.addr, &[("authorization", &auth_c)], COUNT, json!({}))
            .await
            .err()
            .expect("the process is at its limit");
    assert_eq!((status, code(&body)), (503, "SERVER_BUSY"), "{body}");
    socket_c.start_operation("q", COUNT, json!({})).await;
    let busy = message_of(&mut socket_c, "q").await;
    assert_eq!(code(&busy), "SERVER_BUSY", "{busy}");
    assert_eq!(message_of(&mut socket_c, "q").await["type"], "complete");

    // Once the database answers, the held queries end (answered, or refused if they waited
    // longer than the pool waits for a connection) and free their places.
    drop(held);
    let answer = waiting_a.try_next().await.expect("a's query is answered");
    assert!(answered_or_unavailable(&answer), "{answer:?}");
    let ended = waiting_a.try_next().await.unwrap().unwrap_err();
    assert_eq!(ended["event"], "complete", "{ended}");
    let answer = waiting_b.try_next().await.expect("b's query is answered");
    assert!(answered_or_unavailable(&answer), "{answer:?}");
    let mut again =
        SseSubscription::start_with(app.addr, &[("authorization", &auth_a)], COUNT, json!({}))
            .await
            .expect("a's place is free again");
    assert!(again.next().await.unwrap()["sessions"]["totalCount"].is_number());
    socket_c.start_operation("again", COUNT, json!({})).await;
    let answered = message_of(&mut socket_c, "again").await;
    assert_eq!(answered["type"], "next", "{answered}");
    assert!(
        answered["payload"]["data"]["sessions"]["totalCount"].is_number(),
        "{answered}"
    );
    app.stop().await;
}

#[tokio::test]
async fn stream_queries_end_at_the_request_timeout_and_subscriptions_do_not() {
    let mut options = HttpOptions::default();
    options.throttle.request_timeout = Duration::from_secs(1);
    let app = TestApp::start_with(options).await;
    let subscribed = Instant::now();
    let mut subscription = SseSubscription::start(app.addr, FEED_FROM_START, from_start()).await;
    let mut socket = connected(&app, None).await;
    socket
        .start_operation("live", FEED_FROM_START, from_start())
        .await;
    let held = app.hold_the_pool().await;

    // Each query waits for a database connection until the request timeout ends it (all at
    // once: the subscriptions may be waiting for a connection too, and must not wait long).
    let mut over_sse = SseSubscription::start(app.addr, COUNT, json!({})).await;
    let mut over_multipart = MultipartSubscription::start_with(app.addr, &[], COUNT, json!({}))
        .await
        .unwrap();
    socket.start_operation("slow", COUNT, json!({})).await;

    let ended = over_sse.next().await.unwrap_err();
    assert_eq!(code(&ended), "TIMEOUT", "{ended}");
    assert!(
        message(&ended).contains("--request-timeout-secs"),
        "{ended}"
    );
    assert_eq!(over_sse.next().await.unwrap_err()["event"], "complete");
    let ended = over_multipart.try_next().await.unwrap().unwrap_err();
    assert_eq!(code(&ended), "TIMEOUT", "{ended}");
    assert_eq!(
        over_multipart.try_next().await.unwrap_err(),
        "the stream completed"
    );

    // Over a WebSocket the operation ends with the error; the connection stays.
    let ended = message_of(&mut socket, "slow").await;
    assert_eq!(ended["type"], "next", "{ended}");
    assert_eq!(code(&ended), "TIMEOUT", "{ended}");
    assert_eq!(message_of(&mut socket, "slow").await["type"], "complete");

    // The subscriptions, open longer than the timeout, still deliver.
    drop(held);
    assert!(subscribed.elapsed() > Duration::from_secs(1));
    app.data(CREATE, json!({})).await;
    assert_eq!(
        subscription.next().await.unwrap()["sessions"]["status"],
        "PENDING"
    );
    let delivered = message_of(&mut socket, "live").await;
    assert_eq!(delivered["type"], "next", "{delivered}");
    assert_eq!(
        delivered["payload"]["data"]["sessions"]["status"],
        "PENDING"
    );
    socket.start_operation("fast", COUNT, json!({})).await;
    let answered = message_of(&mut socket, "fast").await;
    assert_eq!(
        answered["payload"]["data"]["sessions"]["totalCount"], 1,
        "{answered}"
    );
    app.stop().await;
}

#[tokio::test]
async fn the_plain_event_stream_checks_the_origin_and_the_rate() {
    let mut options = HttpOptions::default();
    options.throttle.rate_limit_per_second = 2;
    let app = TestApp::start_with(options).await;
    let session = fixtures::session(app.store.pool(), NewSession::default()).await;
    let (status, body) =
        refused(events(&app, session, "", &[("origin", "https://evil.example")]).await).await;
    assert_eq!((status.as_u16(), code(&body)), (403, "FORBIDDEN"), "{body}");
    // The server's own pages may.
    let own = format!("http://{}", app.addr);
    let response = events(&app, session, "", &[("origin", &own)]).await;
    assert_eq!(response.status(), StatusCode::OK);
    drop(response);

    let mut limited = None;
    for _ in 0..10 {
        let response = events(&app, session, "", &[]).await;
        if response.status() == StatusCode::TOO_MANY_REQUESTS {
            limited = Some(response);
            break;
        }
        assert_eq!(response.status(), StatusCode::OK);
    }
    let limited = limited.expect("10 streams at once exceed 2 per second");
    assert!(limited.headers().contains_key("retry-after"));
    let (_, body) = refused(limited).await;
    assert_eq!(code(&body), "RATE_LIMITED", "{body}");
    assert!(message(&body).contains("--rate-limit-per-second"), "{body}");
    app.stop().await;
}

/// Whether a statement looks an API token up by its secret's hash.
fn is_token_lookup(statement: &str) -> bool {
    statement.contains("api_tokens")
        && statement.contains("secret_hash")
        && statement.contains("expires_at")
}

/// Whether a statement looks a stream ticket up.
fn is_ticket_lookup(statement: &str) -> bool {
    statement.contains("event_stream_tickets") && statement.contains("ticket_hash")
}

#[tokio::test]
async fn made_up_credentials_are_looked_up_only_within_the_address_rate() {
    let mut options = HttpOptions::default();
    options.auth.mode = AuthMode::Tokens;
    options.throttle.auth_attempts_per_second_per_address = 2;
    let app = TestApp::start_with(options).await;
    // This test's runtime runs the server too: every statement it causes is recorded here.
    let _recording = statements::record_on_this_thread();
    let made_up = casefile::auth::tokens::generate_secret;
    statements::clear();

    // GraphQL over HTTP: refused without a look-up once over the rate.
    let mut unknown = 0;
    let limited = loop {
        let response = app
            .client
            .post(app.url("/graphql"))
            .bearer_auth(made_up())
            .json(&json!({ "query": COUNT }))
            .send()
            .await
            .unwrap();
        if response.status() == StatusCode::TOO_MANY_REQUESTS {
            break response;
        }
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        unknown += 1;
        assert!(unknown < 50, "never limited");
    };
    assert!(limited.headers().contains_key("retry-after"));
    let (_, body) = refused(limited).await;
    assert_eq!(code(&body), "RATE_LIMITED", "{body}");
    assert!(
        message(&body).contains("--auth-attempts-per-second-per-address"),
        "{body}"
    );

    // WebSocket `connection_init`: closed with 4429 instead of 4401.
    loop {
        let mut socket = Subscription::connect(app.addr, false, &[]).await.unwrap();
        let closed = socket
            .init(json!({ "Authorization": bearer(&made_up()) }))
            .await;
        assert_eq!(closed["type"], "closed", "{closed}");
        if closed["code"] == 4429 {
            break;
        }
        assert_eq!(closed["code"], 4401, "{closed}");
        unknown += 1;
        assert!(unknown < 100, "never limited");
    }
    assert_eq!(
        statements::settled_count(is_token_lookup).await,
        unknown,
        "one look-up per answer that was not limited"
    );

    // Stream tickets of the plain event stream.
    let mut unknown_tickets = 0;
    let session = uuid::Uuid::now_v7();
    loop {
        let ticket = format!("cfst_{}", &made_up()[3..]);
        let response = events(&app, session, &format!("?ticket={ticket}"), &[]).await;
        if response.status() == StatusCode::TOO_MANY_REQUESTS {
            let (_, body) = refused(response).await;
            assert_eq!(code(&body), "RATE_LIMITED", "{body}");
            break;
        }
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        unknown_tickets += 1;
        assert!(unknown_tickets < 50, "never limited");
    }
    assert_eq!(
        statements::settled_count(is_ticket_lookup).await,
        unknown_tickets
    );

    // Another address has a rate of its own.
    let elsewhere = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .build()
        .unwrap();
    let response = elsewhere
        .post(app.url("/graphql"))
        .bearer_auth(made_up())
        .json(&json!({ "query": COUNT }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    app.stop().await;
}
