//! Access control over real HTTP, WebSocket (both protocols) and SSE: identities, roles,
//! tokens, the SSO proxy, cross-site protections and who-did-it records.

use std::time::Duration;

use chrono::Utc;
use reqwest::StatusCode;
use serde_json::{Value, json};

use casefile::auth::tokens::{generate_secret, hash};
use casefile::auth::{AuthMode, AuthOptions, ProxyOptions};
use casefile::http::HttpOptions;
use casefile::model::Role;
use casefile::server::Server;

use crate::common::sse::SseSubscription;
use crate::common::ws::Subscription;
use crate::common::{TestApp, TestDb, tokens_mode};

const PROXY_SECRET: &str = "proxy-shared-secret-0123456789";

fn proxy_mode(default_role: &str) -> HttpOptions {
    HttpOptions {
        auth: AuthOptions {
            mode: AuthMode::Proxy,
            proxy: ProxyOptions {
                proxy_secret: Some(PROXY_SECRET.to_owned()),
                proxy_group_roles: vec!["sre=operator".to_owned(), "platform=admin".to_owned()],
                proxy_default_role: default_role.to_owned(),
                proxy_stream_lifetime: Duration::from_secs(1),
                ..ProxyOptions::default()
            },
            ..AuthOptions::default()
        },
        ..HttpOptions::default()
    }
}

/// Stores a token the way `casefile token create` does; returns its secret.
async fn token(app: &TestApp, name: &str, role: Role) -> String {
    token_expiring(app, name, role, None).await
}

async fn token_expiring(
    app: &TestApp,
    name: &str,
    role: Role,
    expires_at: Option<chrono::DateTime<Utc>>,
) -> String {
    app.token(name, role, expires_at).await
}

/// POSTs an operation with the given headers; the status and the body.
async fn post(
    app: &TestApp,
    headers: &[(&str, &str)],
    query: &str,
    variables: Value,
) -> (StatusCode, Value) {
    let mut request = app.client.post(app.url("/graphql"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request
        .json(&json!({ "query": query, "variables": variables }))
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.unwrap())
}

async fn as_token(
    app: &TestApp,
    secret: &str,
    query: &str,
    variables: Value,
) -> (StatusCode, Value) {
    let bearer = format!("Bearer {secret}");
    post(app, &[("authorization", &bearer)], query, variables).await
}

fn code(body: &Value) -> &str {
    body["errors"][0]["extensions"]["code"]
        .as_str()
        .unwrap_or("")
}

const CREATE_SESSION: &str =
    "mutation { createSession(input: { alertType: \"Disk\", chainId: \"c\" }) { uuid createdBy } }";

/// A finished session, created (and failed) as `writer`.
async fn finished_session(app: &TestApp, writer: &str) -> String {
    let (_, body) = as_token(app, writer, CREATE_SESSION, json!({})).await;
    let id = body["data"]["createSession"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, body) = as_token(
        app,
        writer,
        "mutation ($s: ID!) { failSession(input: { id: $s, errorMessage: \"boom\" }) { status } }",
        json!({ "s": id }),
    )
    .await;
    assert_eq!(body["data"]["failSession"]["status"], "FAILED", "{body}");
    id
}

#[tokio::test]
async fn each_role_may_do_what_it_should_and_nothing_more() {
    let app = TestApp::start_with(tokens_mode()).await;
    let reader = token(&app, "reader", Role::Reader).await;
    let operator = token(&app, "operator", Role::Operator).await;
    let writer = token(&app, "writer", Role::Writer).await;
    let admin = token(&app, "admin", Role::Admin).await;
    let session = finished_session(&app, &writer).await;
    let (_, body) = as_token(&app, &writer, CREATE_SESSION, json!({})).await;
    let running = body["data"]["createSession"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let ingest = "mutation ($s: ID!, $i: Int!) { ingest(operations: [{ createStage: { sessionId: $s, stageIndex: $i, name: \"Triage\" } }]) { __typename } }";
    let cancel =
        "mutation ($s: ID!) { requestSessionCancellation(id: $s, reason: \"noise\") { status } }";
    let delete = "mutation ($s: ID!) { deleteSession(id: $s) { uuid } }";
    let mint =
        "mutation ($n: String!) { createApiToken(input: { name: $n, role: READER }) { secret } }";

    // (role, secret, may record, may cancel, may administer)
    let cases = [
        ("reader", &reader, false, false, false),
        ("operator", &operator, false, true, false),
        ("writer", &writer, true, true, false),
        ("admin", &admin, true, true, true),
    ];
    for (i, (role, secret, records, cancels, administers)) in cases.into_iter().enumerate() {
        let (status, body) = as_token(
            &app,
            secret,
            "{ sessions { totalCount } viewer { actor role } }",
            json!({}),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{role}: {body}");
        assert!(
            body["data"]["sessions"]["totalCount"].as_i64() >= Some(2),
            "{role}: {body}"
        );
        assert_eq!(body["data"]["viewer"]["actor"], format!("token:{role}"));
        assert_eq!(body["data"]["viewer"]["role"], role.to_uppercase());

        let expect = |allowed: bool, body: &Value, what: &str| {
            if allowed {
                assert!(body.get("errors").is_none(), "{role} may {what}: {body}");
            } else {
                assert_eq!(code(body), "FORBIDDEN", "{role} may not {what}: {body}");
                assert_eq!(body["data"], Value::Null, "{role}: {body}");
            }
        };
        let (_, body) = as_token(&app, secret, CREATE_SESSION, json!({})).await;
        expect(records, &body, "record");
        let (_, body) = as_token(&app, secret, ingest, json!({ "s": running, "i": i })).await;
        expect(records, &body, "ingest");
        let (_, body) = as_token(&app, secret, cancel, json!({ "s": session })).await;
        if cancels {
            // Allowed, and refused only by the lifecycle: the session has ended.
            assert_eq!(code(&body), "CONFLICT", "{role}: {body}");
        } else {
            expect(false, &body, "cancel");
        }
        let (_, body) = as_token(
            &app,
            secret,
            mint,
            json!({ "n": format!("minted-by-{role}") }),
        )
        .await;
        expect(administers, &body, "create tokens");
        let (_, body) = as_token(&app, secret, "{ apiTokens { name } }", json!({})).await;
        expect(administers, &body, "list tokens");

        // Every role may subscribe, over both WebSocket protocols and SSE.
        for legacy in [false, true] {
            let mut socket = Subscription::connect(app.addr, legacy, &[]).await.unwrap();
            let ack = socket
                .init(json!({ "Authorization": format!("Bearer {secret}") }))
                .await;
            assert_eq!(ack["type"], "connection_ack", "{role}: {ack}");
            socket
                .subscribe(
                    "subscription ($s: ID!) { session(id: $s) { kind } }",
                    json!({ "s": session }),
                )
                .await;
            assert_eq!(
                socket.next().await.unwrap()["session"]["kind"],
                "SESSION",
                "{role}"
            );
        }
        let bearer = format!("Bearer {secret}");
        let mut sse = SseSubscription::start_with(
            app.addr,
            &[("authorization", &bearer)],
            "subscription ($s: ID!) { session(id: $s) { kind } }",
            json!({ "s": session }),
        )
        .await
        .unwrap();
        assert_eq!(
            sse.next().await.unwrap()["session"]["kind"],
            "SESSION",
            "{role}"
        );
    }

    // Deleting is an admin's; in a batch, each operation is judged on its own.
    let batch = json!([
        { "query": delete, "variables": { "s": session } },
        { "query": "{ viewer { role } }" }
    ]);
    let response = app
        .client
        .post(app.url("/graphql"))
        .bearer_auth(&writer)
        .json(&batch)
        .send()
        .await
        .unwrap();
    let body: Value = response.json().await.unwrap();
    assert_eq!(code(&body[0]), "FORBIDDEN", "{body}");
    assert_eq!(body[1]["data"]["viewer"]["role"], "WRITER", "{body}");
    let (_, body) = as_token(&app, &admin, delete, json!({ "s": session })).await;
    assert!(body.get("errors").is_none(), "{body}");
    app.stop().await;
}

#[tokio::test]
async fn requests_without_a_usable_token_get_401_and_the_same_message() {
    let app = TestApp::start_with(tokens_mode()).await;
    let expired = token_expiring(
        &app,
        "expired",
        Role::Admin,
        Some(Utc::now() - chrono::Duration::seconds(1)),
    )
    .await;
    let revoked = token(&app, "revoked", Role::Admin).await;
    let admin = token(&app, "admin", Role::Admin).await;
    let (_, body) = as_token(
        &app,
        &admin,
        "mutation { revokeApiToken(name: \"revoked\") { revokedAt revokedBy } }",
        json!({}),
    )
    .await;
    assert_eq!(
        body["data"]["revokeApiToken"]["revokedBy"], "token:admin",
        "{body}"
    );

    // Refused before the body is even read: an unauthenticated client cannot make the server
    // parse anything.
    let response = app
        .client
        .post(app.url("/graphql"))
        .header("content-type", "application/json")
        .body("{ this is not JSON")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);

    let unknown = generate_secret();
    let mut messages = Vec::new();
    for headers in [
        vec![],
        vec![("authorization", format!("Bearer {unknown}"))],
        vec![("authorization", format!("Bearer {expired}"))],
        vec![("authorization", format!("Bearer {revoked}"))],
        vec![("authorization", "Basic YWRtaW46YWRtaW4=".to_owned())],
    ] {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let (status, body) = post(&app, &headers, "{ sessions { totalCount } }", json!({})).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{headers:?}: {body}");
        assert_eq!(code(&body), "UNAUTHENTICATED", "{body}");
        messages.push(body["errors"][0]["message"].clone());
    }
    assert!(
        messages.windows(2).all(|w| w[0] == w[1]),
        "one message for every failure: {messages:?}"
    );

    // GET queries and SSE are refused the same way; probes and GraphiQL need no identity.
    let response = app
        .client
        .get(app.url("/graphql?query={sessions{totalCount}}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    let refused = SseSubscription::start_with(
        app.addr,
        &[],
        "subscription { sessions { status } }",
        json!({}),
    )
    .await;
    assert_eq!(refused.err().map(|(status, _)| status), Some(401));
    let response = app
        .client
        .get(app.url("/graphql?query={viewer{role}}"))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.json::<Value>().await.unwrap()["data"]["viewer"]["role"],
        "ADMIN"
    );
    // Multipart subscriptions take the header too.
    let multipart = |token: Option<&str>| {
        let mut request = app
            .client
            .post(app.url("/graphql"))
            .header("accept", "multipart/mixed")
            .json(&json!({ "query": "subscription { sessions { status } }" }));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    assert_eq!(
        multipart(None).await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    let streaming = multipart(Some(&admin)).await.unwrap();
    assert_eq!(streaming.status(), StatusCode::OK);
    assert!(
        streaming.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("multipart/mixed")
    );
    drop(streaming);

    // A token minted through the admin mutation works at once; its secret is shown only then.
    let mint = "mutation ($at: DateTime) { createApiToken(input: { name: \"ci\", role: WRITER, expiresAt: $at }) { secret token { name role createdBy expiresAt } } }";
    let (_, body) = as_token(
        &app,
        &admin,
        mint,
        json!({ "at": Utc::now() - chrono::Duration::seconds(5) }),
    )
    .await;
    assert_eq!(code(&body), "BAD_USER_INPUT", "{body}");
    let (_, body) = as_token(
        &app,
        &admin,
        mint,
        json!({ "at": Utc::now() + chrono::Duration::days(1) }),
    )
    .await;
    let minted = &body["data"]["createApiToken"];
    assert_eq!(minted["token"]["createdBy"], "token:admin", "{body}");
    let secret = minted["secret"].as_str().unwrap();
    assert!(secret.starts_with("cf_"));
    let (status, body) = as_token(&app, secret, "{ viewer { actor role } }", json!({})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body["data"]["viewer"],
        json!({ "actor": "token:ci", "role": "WRITER" })
    );
    let stored: Vec<u8> =
        sqlx::query_scalar("SELECT secret_hash FROM api_tokens WHERE name = 'ci'")
            .fetch_one(app.store.pool())
            .await
            .unwrap();
    assert_eq!(stored, hash(secret).to_vec(), "only the hash is stored");
    let (_, body) = as_token(&app, &admin, mint, json!({ "at": null })).await;
    assert_eq!(code(&body), "CONFLICT", "names are never reused: {body}");

    for path in ["/healthz", "/readyz", "/"] {
        let response = app.client.get(app.url(path)).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
    }
    let page = app
        .client
        .get(app.url("/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // In the page's JSON settings, where `<` is written `\u003c`.
    assert!(
        page.contains("Bearer \\u003cyour casefile API token>"),
        "GraphiQL offers the header to fill in"
    );

    // The last use is written (at most once a minute).
    let used: Option<chrono::DateTime<Utc>> = {
        let _ = as_token(&app, &admin, "{ viewer { role } }", json!({})).await;
        let mut used = None;
        for _ in 0..50 {
            used = sqlx::query_scalar("SELECT last_used_at FROM api_tokens WHERE name = 'admin'")
                .fetch_one(app.store.pool())
                .await
                .unwrap();
            if used.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        used
    };
    assert!(used.is_some(), "last_used_at is recorded");
    app.stop().await;
}

#[tokio::test]
async fn websocket_init_is_authenticated_on_both_protocols() {
    let app = TestApp::start_with(proxy_mode("none")).await;
    let reader = token(&app, "reader", Role::Reader).await;
    // graphql-transport-ws: 4401 unauthenticated, 4403 forbidden.
    let mut socket = Subscription::connect(app.addr, false, &[]).await.unwrap();
    let answer = socket
        .init(json!({ "Authorization": "Bearer cf_nope" }))
        .await;
    assert_eq!(answer["type"], "closed", "{answer}");
    assert_eq!(answer["code"], 4401, "{answer}");
    let headers = [
        ("x-casefile-proxy-secret", PROXY_SECRET),
        ("x-forwarded-user", "mallory"),
        ("x-forwarded-groups", "interns"),
    ];
    let mut socket = Subscription::connect(app.addr, false, &headers)
        .await
        .unwrap();
    let answer = socket.init(json!({})).await;
    assert_eq!(answer["code"], 4403, "a person without a role: {answer}");
    // The legacy protocol: connection_error, then close.
    let mut socket = Subscription::connect(app.addr, true, &[]).await.unwrap();
    let answer = socket.init(json!({ "token": "cf_nope" })).await;
    assert_eq!(answer["type"], "connection_error", "{answer}");
    assert_eq!(socket.closed_with().await, Some(4401));
    // Accepted: a token in the payload (any key), or one in the upgrade request's header.
    for payload in [
        json!({ "authorization": format!("Bearer {reader}") }),
        json!({ "token": reader }),
        json!({ "headers": { "Authorization": format!("Bearer {reader}") } }),
    ] {
        let mut socket = Subscription::connect(app.addr, false, &[]).await.unwrap();
        assert_eq!(
            socket.init(payload.clone()).await["type"],
            "connection_ack",
            "{payload}"
        );
    }
    let bearer = format!("Bearer {reader}");
    let mut socket = Subscription::connect(app.addr, true, &[("authorization", &bearer)])
        .await
        .unwrap();
    assert_eq!(socket.init(json!({})).await["type"], "connection_ack");
    app.stop().await;
}

#[tokio::test]
async fn a_revoked_token_closes_its_open_streams() {
    let app = TestApp::start_with(tokens_mode()).await;
    let admin = token(&app, "admin", Role::Admin).await;
    let agent = token(&app, "agent", Role::Writer).await;
    let expiring = token_expiring(
        &app,
        "short-lived",
        Role::Reader,
        Some(Utc::now() + chrono::Duration::seconds(4)),
    )
    .await;
    let subscription = "subscription { sessions { status } }";
    let mut modern = Subscription::connect(app.addr, false, &[]).await.unwrap();
    assert_eq!(
        modern
            .init(json!({ "Authorization": format!("Bearer {agent}") }))
            .await["type"],
        "connection_ack"
    );
    modern.subscribe(subscription, json!({})).await;
    let mut legacy = Subscription::connect(app.addr, true, &[]).await.unwrap();
    assert_eq!(
        legacy.init(json!({ "token": agent })).await["type"],
        "connection_ack"
    );
    legacy.subscribe(subscription, json!({})).await;
    let bearer = format!("Bearer {agent}");
    let mut sse = SseSubscription::start_with(
        app.addr,
        &[("authorization", &bearer)],
        subscription,
        json!({}),
    )
    .await
    .unwrap();
    let mut short = Subscription::connect(app.addr, false, &[]).await.unwrap();
    assert_eq!(
        short.init(json!({ "token": expiring })).await["type"],
        "connection_ack"
    );
    short.subscribe(subscription, json!({})).await;

    // Streams work until the revocation…
    let (_, body) = as_token(&app, &agent, CREATE_SESSION, json!({})).await;
    assert_eq!(body["data"]["createSession"]["createdBy"], "token:agent");
    assert_eq!(
        modern.next().await.unwrap()["sessions"]["status"],
        "PENDING"
    );
    assert_eq!(
        legacy.next().await.unwrap()["sessions"]["status"],
        "PENDING"
    );
    assert_eq!(sse.next().await.unwrap()["sessions"]["status"], "PENDING");

    let (_, body) = as_token(
        &app,
        &admin,
        "mutation { revokeApiToken(name: \"agent\") { name } }",
        json!({}),
    )
    .await;
    assert!(body.get("errors").is_none(), "{body}");
    let started = std::time::Instant::now();
    assert_eq!(modern.closed_with().await, Some(4401));
    let ended = legacy.next().await.unwrap_err();
    assert_eq!(ended["type"], "connection_error", "{ended}");
    let ended = sse.next().await.unwrap_err();
    assert_eq!(
        ended["errors"][0]["extensions"]["code"], "UNAUTHENTICATED",
        "{ended}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "closed at once: {:?}",
        started.elapsed()
    );
    let (status, _) = as_token(&app, &agent, "{ viewer { role } }", json!({})).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // …and a stream whose token expires is closed when it does.
    assert_eq!(short.closed_with().await, Some(4401));
    app.stop().await;
}

#[tokio::test]
async fn a_revocation_reaches_every_replica_on_the_database() {
    let Some((a, _url)) = TestApp::start_external("a revocation across two servers").await else {
        return;
    };
    let b = Server::start(
        a.store.clone(),
        &tokens_mode(),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let admin = token(&a, "admin", Role::Admin).await;
    let reader = token(&a, "reader", Role::Reader).await;
    let on_b = |secret: String| {
        let client = a.client.clone();
        let url = format!("http://{}/graphql", b.addr());
        async move {
            client
                .post(url)
                .bearer_auth(secret)
                .json(&json!({ "query": "{ viewer { role } }" }))
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(
        on_b(reader.clone()).await,
        StatusCode::OK,
        "b verified and cached it"
    );
    let (_, body) = as_token(
        &a,
        &admin,
        "mutation { revokeApiToken(name: \"reader\") { name } }",
        json!({}),
    )
    .await;
    assert!(body.get("errors").is_none(), "{body}");
    let started = std::time::Instant::now();
    loop {
        if on_b(reader.clone()).await == StatusCode::UNAUTHORIZED {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "b still accepts a revoked token"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    b.stop().await;
    a.stop().await;
}

#[tokio::test]
async fn proxy_identities_are_believed_only_with_the_shared_secret() {
    let app = TestApp::start_with(proxy_mode("reader")).await;
    let agent = token(&app, "agent", Role::Writer).await;
    let person = |groups: &'static str| {
        vec![
            ("x-casefile-proxy-secret", PROXY_SECRET),
            ("x-forwarded-user", "alice"),
            ("x-forwarded-email", "alice@example.com"),
            ("x-forwarded-groups", groups),
        ]
    };
    let viewer = "{ viewer { actor role } }";
    let (status, body) = post(&app, &person("sre,staff"), viewer, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["data"]["viewer"],
        json!({ "actor": "alice", "role": "OPERATOR" })
    );
    let (_, body) = post(&app, &person("staff"), viewer, json!({})).await;
    assert_eq!(body["data"]["viewer"]["role"], "READER", "the default role");
    let (_, body) = post(&app, &person("sre,platform"), viewer, json!({})).await;
    assert_eq!(
        body["data"]["viewer"]["role"], "ADMIN",
        "the highest of the groups'"
    );

    // Without the secret, or with a wrong one, the headers are not believed.
    let forged = [
        ("x-forwarded-user", "alice"),
        ("x-forwarded-groups", "platform"),
    ];
    let (status, body) = post(&app, &forged, viewer, json!({})).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNAUTHORIZED, "UNAUTHENTICATED")
    );
    let wrong = [
        ("x-casefile-proxy-secret", "proxy-shared-secret-0123456788"),
        ("x-forwarded-user", "alice"),
    ];
    let (status, _) = post(&app, &wrong, viewer, json!({})).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // A client's copy of a header the proxy appends to, instead of replacing, is not believed.
    let doubled = app
        .client
        .post(app.url("/graphql"))
        .header("x-casefile-proxy-secret", PROXY_SECRET)
        .header("x-forwarded-user", "mallory")
        .header("x-forwarded-user", "alice")
        .json(&json!({ "query": viewer }))
        .send()
        .await
        .unwrap();
    assert_eq!(doubled.status(), StatusCode::UNAUTHORIZED);
    // oauth2-proxy may pass the person's OIDC token along: it is not an API token, and the
    // proxy's headers still say who it is.
    let mut with_oidc = person("sre");
    with_oidc.push(("authorization", "Bearer eyJhbGciOiJSUzI1NiJ9.e30.sig"));
    let (status, body) = post(&app, &with_oidc, viewer, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["viewer"]["actor"], "alice");
    // A person cannot pass as a token.
    let as_token_name = [
        ("x-casefile-proxy-secret", PROXY_SECRET),
        ("x-forwarded-user", "token:agent"),
    ];
    let (status, _) = post(&app, &as_token_name, viewer, json!({})).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // Agents keep using tokens; people open chats and post in their own only.
    let session = finished_session(&app, &agent).await;
    let open = "mutation ($s: ID!) { openChat(input: { sessionId: $s }) { uuid createdBy } }";
    let (_, body) = post(&app, &person("sre"), open, json!({ "s": session })).await;
    assert_eq!(body["data"]["openChat"]["createdBy"], "alice", "{body}");
    let chat = body["data"]["openChat"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let ask = "mutation ($c: ID!) { postChatMessage(input: { chatId: $c, content: \"Why?\" }) { createdBy } }";
    let bob = vec![
        ("x-casefile-proxy-secret", PROXY_SECRET),
        ("x-forwarded-user", "bob"),
        ("x-forwarded-groups", "sre"),
    ];
    let (_, body) = post(&app, &bob, ask, json!({ "c": chat })).await;
    assert_eq!(
        code(&body),
        "FORBIDDEN",
        "bob does not own alice's chat: {body}"
    );
    let (_, body) = post(&app, &person("sre"), ask, json!({ "c": chat })).await;
    assert_eq!(
        body["data"]["postChatMessage"]["createdBy"], "alice",
        "{body}"
    );
    app.stop().await;
}

#[tokio::test]
async fn created_by_cannot_be_forged_once_authentication_is_on() {
    let app = TestApp::start_with(tokens_mode()).await;
    let writer = token(&app, "orchestrator", Role::Writer).await;
    let forged = "mutation { createSession(input: { alertType: \"Disk\", chainId: \"c\", createdBy: \"alice\" }) { uuid } }";
    let (_, body) = as_token(&app, &writer, forged, json!({})).await;
    assert_eq!(code(&body), "BAD_USER_INPUT", "{body}");
    let (_, body) = as_token(&app, &writer, "{ sessions { totalCount } }", json!({})).await;
    assert_eq!(
        body["data"]["sessions"]["totalCount"], 0,
        "nothing was written"
    );
    // An agent's `author` stays the alert's author.
    let (_, body) = as_token(
        &app,
        &writer,
        "mutation { createSession(input: { alertType: \"Disk\", chainId: \"c\", author: \"alertmanager\" }) { author createdBy } }",
        json!({}),
    )
    .await;
    assert_eq!(
        body["data"]["createSession"],
        json!({ "author": "alertmanager", "createdBy": "token:orchestrator" })
    );
    let (_, body) = as_token(
        &app,
        &writer,
        "{ sessions(filter: { createdBy: \"token:orchestrator\" }) { totalCount } }",
        json!({}),
    )
    .await;
    assert_eq!(body["data"]["sessions"]["totalCount"], 1, "{body}");
    app.stop().await;
}

#[tokio::test]
async fn the_status_history_says_who_did_what_and_why() {
    let app = TestApp::start_with(tokens_mode()).await;
    let writer = token(&app, "orchestrator", Role::Writer).await;
    let operator = token(&app, "oncall", Role::Operator).await;
    let admin = token(&app, "admin", Role::Admin).await;
    let (_, body) = as_token(&app, &writer, CREATE_SESSION, json!({})).await;
    let session = body["data"]["createSession"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let s = json!({ "s": session });
    // An agent is running, so the cancellation leaves the session cancelling; the agent ending
    // completes it.
    let (_, body) = as_token(&app, &writer, "mutation ($s: ID!) { createStage(input: { sessionId: $s, stageIndex: 0, name: \"Triage\" }) { uuid } }", s.clone()).await;
    let stage = body["data"]["createStage"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, body) = as_token(&app, &writer, "mutation ($st: ID!) { createAgentExecution(input: { stageId: $st, agentName: \"K8s\", agentIndex: 1, iterationStrategy: \"react\" }) { uuid } }", json!({ "st": stage })).await;
    let execution = body["data"]["createAgentExecution"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, body) = as_token(
        &app,
        &writer,
        "mutation ($e: ID!) { startAgentExecution(input: { id: $e }) { status } }",
        json!({ "e": execution }),
    )
    .await;
    assert!(body.get("errors").is_none(), "{body}");
    let (_, body) = as_token(&app, &operator, "mutation ($s: ID!) { requestSessionCancellation(id: $s, reason: \"duplicate alert\") { status } }", s.clone()).await;
    assert_eq!(
        body["data"]["requestSessionCancellation"]["status"], "CANCELLING",
        "{body}"
    );
    let (_, body) = as_token(&app, &writer, "mutation ($e: ID!) { finishAgentExecution(input: { id: $e, status: CANCELLED }) { status } }", json!({ "e": execution })).await;
    assert!(body.get("errors").is_none(), "{body}");
    let (_, body) = as_token(
        &app,
        &admin,
        // A reason that would end a statement's string constant is stored as it is.
        "mutation ($s: ID!) { deleteSession(id: $s, reason: \"clean\\\\up'; SET LOCAL casefile.actor = 'mallory\") { uuid } }",
        s.clone(),
    )
    .await;
    assert!(body.get("errors").is_none(), "{body}");
    let (_, body) = as_token(
        &app,
        &admin,
        "mutation ($s: ID!) { restoreSession(id: $s) { uuid } }",
        s.clone(),
    )
    .await;
    assert!(body.get("errors").is_none(), "{body}");

    let (_, body) = as_token(&app, &operator, "query ($s: ID!) { session(id: $s) { status statusHistory { action fromStatus toStatus actor reason at } } }", s.clone()).await;
    let history: Vec<Value> = body["data"]["session"]["statusHistory"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            json!([
                h["action"],
                h["fromStatus"],
                h["toStatus"],
                h["actor"],
                h["reason"]
            ])
        })
        .collect();
    assert_eq!(
        history,
        vec![
            json!(["CREATED", null, "PENDING", "token:orchestrator", null]),
            json!([
                "STATUS_CHANGED",
                "PENDING",
                "IN_PROGRESS",
                "token:orchestrator",
                null
            ]),
            json!([
                "STATUS_CHANGED",
                "IN_PROGRESS",
                "CANCELLING",
                "token:oncall",
                "duplicate alert"
            ]),
            json!([
                "STATUS_CHANGED",
                "CANCELLING",
                "CANCELLED",
                "token:orchestrator",
                null
            ]),
            json!([
                "DELETED",
                "CANCELLED",
                "CANCELLED",
                "token:admin",
                "clean\\up'; SET LOCAL casefile.actor = 'mallory"
            ]),
            json!(["RESTORED", "CANCELLED", "CANCELLED", "token:admin", null]),
        ],
        "{body}"
    );
    let times: Vec<&str> = body["data"]["session"]["statusHistory"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["at"].as_str().unwrap())
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "oldest first: {times:?}"
    );

    let count = |filter: Value| {
        let app = &app;
        let admin = admin.clone();
        async move {
            let (_, body) = as_token(
                app,
                &admin,
                "query ($f: SessionFilterInput) { sessions(filter: $f) { totalCount } }",
                json!({ "f": filter }),
            )
            .await;
            body["data"]["sessions"]["totalCount"].clone()
        }
    };
    assert_eq!(count(json!({ "cancelledBy": "token:oncall" })).await, 1);
    assert_eq!(count(json!({ "cancelledBy": "token:admin" })).await, 0);
    assert_eq!(count(json!({ "deletedBy": "token:admin" })).await, 1);
    assert_eq!(count(json!({ "deletedBy": "token:oncall" })).await, 0);
    // A reason too long is refused, and nothing changes.
    let (_, body) = as_token(
        &app,
        &admin,
        "mutation ($s: ID!, $r: String) { deleteSession(id: $s, reason: $r) { uuid } }",
        json!({ "s": session, "r": "x".repeat(2001) }),
    )
    .await;
    assert_eq!(code(&body), "BAD_USER_INPUT", "{body}");
    app.stop().await;
}

#[tokio::test]
async fn cross_site_requests_are_refused() {
    let options = HttpOptions {
        cors_allow_origins: vec!["https://dashboard.example.com".to_owned()],
        ..HttpOptions::default()
    };
    let app = TestApp::start_with(options).await;
    // Content types a browser sends cross-site without a preflight: 415 before parsing.
    for content_type in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        let response = app
            .client
            .post(app.url("/graphql"))
            .header("content-type", content_type)
            .body(json!({ "query": CREATE_SESSION }).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "{content_type}"
        );
        let body: Value = response.json().await.unwrap();
        assert_eq!(code(&body), "UNSUPPORTED_MEDIA_TYPE");
    }
    let (_, body) = post(&app, &[], "{ sessions { totalCount } }", json!({})).await;
    assert_eq!(
        body["data"]["sessions"]["totalCount"], 0,
        "nothing was created"
    );

    // WebSocket and SSE from another origin: 403; from ours or an allowed one: fine.
    let own = format!("http://{}", app.addr);
    assert_eq!(
        Subscription::connect(app.addr, false, &[("origin", "https://evil.example")])
            .await
            .err(),
        Some(403)
    );
    assert!(
        Subscription::connect(app.addr, false, &[("origin", &own)])
            .await
            .is_ok()
    );
    assert!(
        Subscription::connect(
            app.addr,
            true,
            &[("origin", "https://dashboard.example.com")]
        )
        .await
        .is_ok()
    );
    let refused = SseSubscription::start_with(
        app.addr,
        &[("origin", "https://evil.example")],
        "subscription { sessions { status } }",
        json!({}),
    )
    .await;
    assert_eq!(
        refused
            .err()
            .map(|(status, body)| (status, code(&body).to_owned())),
        Some((403, "FORBIDDEN".to_owned()))
    );
    assert!(
        SseSubscription::start_with(
            app.addr,
            &[("origin", &own)],
            "subscription { sessions { status } }",
            json!({})
        )
        .await
        .is_ok()
    );

    // CORS: credentials and the configured headers, for the listed origin only.
    let preflight = app
        .client
        .request(reqwest::Method::OPTIONS, app.url("/graphql"))
        .header("origin", "https://dashboard.example.com")
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization, content-type, traceparent",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(
        preflight.headers()["access-control-allow-origin"],
        "https://dashboard.example.com"
    );
    assert_eq!(
        preflight.headers()["access-control-allow-credentials"],
        "true"
    );
    let allowed = preflight.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_owned();
    for header in [
        "authorization",
        "content-type",
        "traceparent",
        "x-request-id",
        "apollographql-client-name",
    ] {
        assert!(allowed.contains(header), "{header} in {allowed}");
    }

    // DNS rebinding: without authentication on loopback, only loopback Host names are served.
    let response = app
        .client
        .get(app.url("/healthz"))
        .header("host", "attacker.example:8080")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let response = app
        .client
        .get(app.url("/healthz"))
        .header("host", "localhost")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    app.stop().await;
}

#[tokio::test]
async fn no_authentication_is_refused_on_a_public_address() {
    let db = TestDb::start().await;
    let everywhere = "0.0.0.0:0".parse().unwrap();
    let err = Server::start(db.store(), &HttpOptions::default(), everywhere)
        .await
        .err()
        .expect("refused");
    let message = format!("{err:#}");
    assert!(
        message.contains("--auth") && message.contains("--allow-anonymous"),
        "{message}"
    );
    let mut allowed = HttpOptions::default();
    allowed.auth.allow_anonymous = true;
    let server = Server::start(db.store(), &allowed, everywhere)
        .await
        .unwrap();
    server.stop().await;
    db.stop().await;

    // The binary says the same and exits.
    let dir = std::env::temp_dir().join(format!("casefile-anon-{}", uuid::Uuid::new_v4()));
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_casefile"))
        .args(["serve", "--listen", "0.0.0.0:0", "--data-dir"])
        .arg(&dir)
        .env_remove("DATABASE_URL")
        .env_remove("CASEFILE_AUTH")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--allow-anonymous"), "{stderr}");
}

#[tokio::test]
async fn without_authentication_created_by_is_taken_from_the_input() {
    let app = TestApp::start().await;
    let data = app
        .data(
            "mutation { createSession(input: { alertType: \"Disk\", chainId: \"c\", createdBy: \"alice\" }) { createdBy statusHistory { actor } } }",
            json!({}),
        )
        .await;
    assert_eq!(data["createSession"]["createdBy"], "alice");
    assert_eq!(
        data["createSession"]["statusHistory"],
        json!([{ "actor": null }])
    );
    let data = app.data("{ viewer { actor role } }", json!({})).await;
    assert_eq!(data["viewer"], json!({ "actor": null, "role": "ADMIN" }));
    app.stop().await;
}

/// A delivery worker's `notifier` token reads sessions and works the outbox (claims, reports),
/// and records or changes nothing else; a reader may not work the outbox, a writer may.
#[tokio::test]
async fn a_notifier_works_the_outbox_and_nothing_else() {
    let app = TestApp::start_with(tokens_mode()).await;
    let reader = token(&app, "reader", Role::Reader).await;
    let notifier = token(&app, "slack-worker", Role::Notifier).await;
    let writer = token(&app, "writer", Role::Writer).await;
    let (_, body) = as_token(&app, &writer, CREATE_SESSION, json!({})).await;
    let session = body["data"]["createSession"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, body) = as_token(
        &app,
        &writer,
        "mutation ($s: ID!) { failSession(input: { id: $s, errorMessage: \"boom\",
           notify: [{ type: SLACK, destination: \"#alerts\" }] }) { status } }",
        json!({ "s": session }),
    )
    .await;
    assert_eq!(body["data"]["failSession"]["status"], "FAILED", "{body}");
    let claim = "mutation ($c: UUID!) { claimNotifications(claimId: $c, limit: 10,
        leaseSeconds: 60) { id sessionId } }";
    let (_, body) = as_token(&app, &reader, claim, json!({ "c": uuid::Uuid::now_v7() })).await;
    assert_eq!(code(&body), "FORBIDDEN", "{body}");

    let (_, body) = as_token(
        &app,
        &notifier,
        "query ($s: ID!) { viewer { role } session(id: $s) { status } }",
        json!({ "s": session }),
    )
    .await;
    assert_eq!(body["data"]["viewer"]["role"], "NOTIFIER", "{body}");
    assert_eq!(
        body["data"]["session"]["status"], "FAILED",
        "a notifier reads: {body}"
    );
    let claim_id = uuid::Uuid::now_v7();
    let (_, body) = as_token(&app, &notifier, claim, json!({ "c": claim_id })).await;
    let claimed = &body["data"]["claimNotifications"][0];
    assert!(claimed["id"].is_string(), "a notifier claims: {body}");
    let (_, body) = as_token(
        &app,
        &notifier,
        "mutation ($n: NotificationRef!, $c: UUID!) { markNotificationSent(notification: $n,
           claimId: $c) { status } }",
        json!({ "n": { "sessionId": claimed["sessionId"], "id": claimed["id"] }, "c": claim_id }),
    )
    .await;
    assert_eq!(
        body["data"]["markNotificationSent"]["status"], "SENT",
        "{body}"
    );
    let (_, body) = as_token(&app, &notifier, CREATE_SESSION, json!({})).await;
    assert_eq!(
        code(&body),
        "FORBIDDEN",
        "a notifier records nothing: {body}"
    );
    let (_, body) = as_token(
        &app,
        &notifier,
        "mutation ($s: ID!) { requestSessionCancellation(id: $s, reason: \"noise\") { status } }",
        json!({ "s": session }),
    )
    .await;
    assert_eq!(
        code(&body),
        "FORBIDDEN",
        "a notifier cancels nothing: {body}"
    );
    let (_, body) = as_token(&app, &writer, claim, json!({ "c": uuid::Uuid::now_v7() })).await;
    assert!(body.get("errors").is_none(), "a writer may claim: {body}");
    app.stop().await;
}
