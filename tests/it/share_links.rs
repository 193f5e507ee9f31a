//! Share links (issue 32, part 1): a secret that reads one session, read-only, and nothing
//! else, on every root field and transport, until it is revoked or expires.

use std::sync::Arc;

use casefile::api::loaders::{Dispatcher, Loaders};
use casefile::error::Error;
use casefile::model::Role;
use casefile::store::Key;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::common::ws::Subscription;
use crate::common::{TestApp, tokens_mode};
use crate::write_api::Agent;

/// Root fields a share link may use (each checks the session it names).
const OPEN_TO_LINKS: [&str; 4] = ["session", "node", "nodes", "viewer"];

async fn tokens_app() -> TestApp {
    let mut app = TestApp::start_with(tokens_mode()).await;
    app.token = Some(app.token("root", Role::Admin, None).await);
    app
}

/// POSTs `query` with `secret` as the bearer: the whole body.
async fn as_bearer(app: &TestApp, secret: &str, query: &str, variables: Value) -> Value {
    app.client
        .post(app.url("/graphql"))
        .bearer_auth(secret)
        .json(&json!({ "query": query, "variables": variables }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn code(body: &Value) -> &str {
    body["errors"][0]["extensions"]["code"]
        .as_str()
        .unwrap_or_default()
}

/// A session with a stage and an agent; (session, stage).
async fn session_with_stage(app: &TestApp) -> (String, String) {
    let agent = Agent { app };
    let session = agent.session().await;
    let stage = agent.stage(&session, 1, 1, None).await;
    agent.execution(&stage, 1, "Lead").await;
    (session, stage)
}

const CREATE: &str = "mutation ($s: ID!, $n: String) {
    createShareLink(sessionId: $s, expiresIn: \"1h\", note: $n) {
      secret url link { id sessionId note createdBy expiresAt revokedAt } } }";

/// A value of the introspected `type` that passes validation (what it means does not matter:
/// the field is refused before its arguments are read).
fn dummy(ty: &Value, types: &Value) -> String {
    match ty["kind"].as_str().unwrap() {
        "NON_NULL" => dummy(&ty["ofType"], types),
        "LIST" => "[]".to_owned(),
        "ENUM" => {
            let name = ty["name"].as_str().unwrap();
            let found = types
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["name"] == name)
                .unwrap();
            found["enumValues"][0]["name"].as_str().unwrap().to_owned()
        }
        "INPUT_OBJECT" => {
            let name = ty["name"].as_str().unwrap();
            let found = types
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["name"] == name)
                .unwrap();
            let fields: Vec<String> = found["inputFields"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|f| f["type"]["kind"] == "NON_NULL" && f["defaultValue"].is_null())
                .map(|f| {
                    format!(
                        "{}: {}",
                        f["name"].as_str().unwrap(),
                        dummy(&f["type"], types)
                    )
                })
                .collect();
            format!("{{ {} }}", fields.join(", "))
        }
        _ => match ty["name"].as_str().unwrap() {
            "Int" => "1".to_owned(),
            "Float" => "1.0".to_owned(),
            "Boolean" => "false".to_owned(),
            "JSON" => "{}".to_owned(),
            "DateTime" => "\"2026-01-01T00:00:00Z\"".to_owned(),
            "UUID" => "\"00000000-0000-7000-8000-000000000000\"".to_owned(),
            "Decimal" => "\"1\"".to_owned(),
            _ => "\"x\"".to_owned(),
        },
    }
}

/// The named type at the bottom of `ty`'s wrappers.
fn named(ty: &Value) -> &Value {
    if ty["ofType"].is_object() {
        named(&ty["ofType"])
    } else {
        ty
    }
}

/// Every field of the root `operation` type, each as a minimal document of that operation.
async fn every_root_field(app: &TestApp, root: &str, operation: &str) -> Vec<(String, String)> {
    let d = app
        .data(
            "{ __schema { types { name kind enumValues { name }
                 inputFields { name defaultValue type { ...T } } } }
               root: __type(name: $root) { fields { name args { name defaultValue type { ...T } }
                 type { ...T } } } }
             fragment T on __Type { kind name ofType { kind name ofType { kind name
               ofType { kind name ofType { kind name } } } } }"
                .replace("$root", &format!("\"{root}\""))
                .as_str(),
            json!({}),
        )
        .await;
    let types = &d["__schema"]["types"];
    d["root"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|field| {
            let name = field["name"].as_str().unwrap().to_owned();
            let args: Vec<String> = field["args"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|a| a["type"]["kind"] == "NON_NULL" && a["defaultValue"].is_null())
                .map(|a| {
                    format!(
                        "{}: {}",
                        a["name"].as_str().unwrap(),
                        dummy(&a["type"], types)
                    )
                })
                .collect();
            let args = if args.is_empty() {
                String::new()
            } else {
                format!("({})", args.join(", "))
            };
            let selection = match named(&field["type"])["kind"].as_str().unwrap() {
                "OBJECT" | "INTERFACE" | "UNION" => " { __typename }",
                _ => "",
            };
            (
                name.clone(),
                format!("{operation} {{ {name}{args}{selection} }}"),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_share_link_reads_its_one_session_and_nothing_else() {
    let app = tokens_app().await;
    let (shared, shared_stage) = session_with_stage(&app).await;
    let (other, other_stage) = session_with_stage(&app).await;
    let operator = app.token("ops", Role::Operator, None).await;
    let body = as_bearer(
        &app,
        &operator,
        CREATE,
        json!({ "s": shared, "n": "#incident" }),
    )
    .await;
    let created = &body["data"]["createShareLink"];
    let secret = created["secret"].as_str().expect("a secret").to_owned();
    assert!(secret.starts_with("cfs_") && secret.len() == 68, "{secret}");
    assert_eq!(created["link"]["createdBy"], "token:ops");
    assert_eq!(created["link"]["note"], "#incident");
    // The page that shows it: the secret in the fragment, which browsers never send.
    assert_eq!(
        created["url"],
        format!("http://{}/share/{shared}#{secret}", app.addr).as_str()
    );

    // Its session, its tree and its records.
    let read =
        "query ($s: ID!) { session(id: $s) { uuid stages { uuid executions { agentName } } } }";
    let body = as_bearer(&app, &secret, read, json!({ "s": shared })).await;
    assert_eq!(body["data"]["session"]["uuid"], shared.as_str(), "{body}");
    assert_eq!(
        body["data"]["session"]["stages"][0]["executions"][0]["agentName"],
        "Lead"
    );
    let node = "query ($id: ID!) { node(id: $id) { __typename } }";
    let stage_id = |uuid: &str| {
        casefile::api::ids::encode(casefile::api::ids::NodeType::Stage, uuid.parse().unwrap())
    };
    let body = as_bearer(
        &app,
        &secret,
        node,
        json!({ "id": stage_id(&shared_stage) }),
    )
    .await;
    assert_eq!(body["data"]["node"]["__typename"], "Stage", "{body}");
    let viewer = as_bearer(&app, &secret, "{ viewer { actor role } }", json!({})).await;
    assert_eq!(viewer["data"]["viewer"]["role"], "READER", "{viewer}");
    assert!(
        viewer["data"]["viewer"]["actor"]
            .as_str()
            .unwrap()
            .starts_with("share:")
    );

    // Another session, by any path: FORBIDDEN.
    let body = as_bearer(&app, &secret, read, json!({ "s": other })).await;
    assert_eq!(code(&body), "FORBIDDEN", "{body}");
    let body = as_bearer(&app, &secret, node, json!({ "id": stage_id(&other_stage) })).await;
    assert_eq!(code(&body), "FORBIDDEN", "{body}");
    let nodes = "query ($ids: [ID!]!) { nodes(ids: $ids) { __typename } }";
    let both = json!({ "ids": [stage_id(&shared_stage), stage_id(&other_stage)] });
    let body = as_bearer(&app, &secret, nodes, both).await;
    assert_eq!(code(&body), "FORBIDDEN", "{body}");
    // The chain a session ran leads to no other session.
    app.data(
        "mutation { registerChain(input: { name: \"triage\", version: \"1\",
            definition: { stages: [{ name: \"Only\" }] } }) { uuid } }",
        json!({}),
    )
    .await;
    let chained_session = app
        .data(
            "mutation { createSession(input: { alertType: \"A\", chain: { name: \"triage\",
                version: \"1\" } }) { uuid } }",
            json!({}),
        )
        .await["createSession"]["uuid"]
        .clone();
    let body = as_bearer(&app, &operator, CREATE, json!({ "s": chained_session })).await;
    let chained_secret = body["data"]["createShareLink"]["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    let chained = "query ($s: ID!) { session(id: $s) { chain { version
        sessionsConnection { totalCount } } } }";
    let body = as_bearer(
        &app,
        &chained_secret,
        chained,
        json!({ "s": chained_session }),
    )
    .await;
    assert_eq!(code(&body), "FORBIDDEN", "{body}");
    let chain = "query ($s: ID!) { session(id: $s) { chain { version stats { usage { nodes { llmCalls } } } } } }";
    let body = as_bearer(
        &app,
        &chained_secret,
        chain,
        json!({ "s": chained_session }),
    )
    .await;
    assert_eq!(code(&body), "FORBIDDEN", "{body}");
    let version = "query ($s: ID!) { session(id: $s) { chain { version } } }";
    let body = as_bearer(
        &app,
        &chained_secret,
        version,
        json!({ "s": chained_session }),
    )
    .await;
    assert_eq!(body["data"]["session"]["chain"]["version"], "1", "{body}");

    // Every other root field, query and mutation: FORBIDDEN.
    let mut refused = 0;
    for (root, operation) in [("Query", "query"), ("Mutation", "mutation")] {
        for (name, document) in every_root_field(&app, root, operation).await {
            if root == "Query" && (OPEN_TO_LINKS.contains(&name.as_str()) || name.starts_with("__"))
            {
                continue;
            }
            let body = as_bearer(&app, &secret, &document, json!({})).await;
            assert_eq!(code(&body), "FORBIDDEN", "{name}: {document}\n{body}");
            refused += 1;
        }
    }
    assert!(refused > 40, "{refused}");

    // The plain event stream: its session's, not another's.
    for (session, status) in [(&shared, 200), (&other, 403)] {
        let response = app
            .client
            .get(app.url(&format!("/sessions/{session}/events")))
            .bearer_auth(&secret)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), status, "{session}");
    }
    // Subscriptions over WebSocket: its session's, not another's, nor the dashboard feed.
    let events = "subscription ($s: ID!) { events(sessionId: $s) { sequence } }";
    let mut own = Subscription::start(
        app.addr,
        false,
        json!({ "token": secret }),
        events,
        json!({ "s": shared }),
    )
    .await;
    assert_eq!(own.next().await.unwrap()["events"]["sequence"], 1);
    for (query, variables) in [
        (events, json!({ "s": other })),
        ("subscription { sessions { status } }", json!({})),
    ] {
        let mut refused = Subscription::start(
            app.addr,
            false,
            json!({ "token": secret }),
            query,
            variables,
        )
        .await;
        let error = refused.next().await.unwrap_err();
        assert!(error.to_string().contains("FORBIDDEN"), "{query}: {error}");
    }

    // Operators list the links; a revoked one stops at once and closes its streams.
    let list =
        "query ($s: ID!) { session(id: $s) { shareLinks { id note revokedAt lastUsedAt } } }";
    let mut body = as_bearer(&app, &operator, list, json!({ "s": shared })).await;
    // Its use is noted in the background.
    for _ in 0..100 {
        if body["data"]["session"]["shareLinks"][0]["lastUsedAt"].is_string() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        body = as_bearer(&app, &operator, list, json!({ "s": shared })).await;
    }
    assert!(
        body["data"]["session"]["shareLinks"][0]["lastUsedAt"].is_string(),
        "{body}"
    );
    let link = body["data"]["session"]["shareLinks"][0]["id"].clone();
    assert_eq!(link, created["link"]["id"], "{body}");
    let body = as_bearer(&app, &secret, list, json!({ "s": shared })).await;
    assert_eq!(code(&body), "FORBIDDEN", "a link lists no links: {body}");
    let revoke = "mutation ($id: UUID!) { revokeShareLink(id: $id) { revokedAt revokedBy } }";
    let body = as_bearer(&app, &operator, revoke, json!({ "id": link })).await;
    assert_eq!(
        body["data"]["revokeShareLink"]["revokedBy"], "token:ops",
        "{body}"
    );
    assert_eq!(own.closed_with().await, Some(4401));
    let response = app
        .client
        .post(app.url("/graphql"))
        .bearer_auth(&secret)
        .json(&json!({ "query": read, "variables": { "s": shared } }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 401);
    // Both changes are in the session's audit trail, without the secret.
    let trail: Vec<(String, String)> = sqlx::query_as(
        "SELECT action, changes::text FROM session_audit_records \
         WHERE target_type = 'ShareLink' AND session_id = $1::text::uuid ORDER BY at, id",
    )
    .bind(&shared)
    .fetch_all(app.store.pool())
    .await
    .unwrap();
    let actions: Vec<&str> = trail.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(actions, ["createShareLink", "revokeShareLink"]);
    assert!(trail.iter().all(|(_, changes)| !changes.contains(&secret)));
    app.stop().await;
}

#[tokio::test]
async fn share_links_are_for_operators_and_bounded() {
    let app = tokens_app().await;
    let (session, _) = session_with_stage(&app).await;
    let reader = app.token("eyes", Role::Reader, None).await;
    let body = as_bearer(&app, &reader, CREATE, json!({ "s": session })).await;
    assert_eq!(code(&body), "FORBIDDEN", "{body}");
    for expires in ["forever", "91d", "0d"] {
        let body = app
            .graphql(
                "mutation ($s: ID!, $e: String!) { createShareLink(sessionId: $s, expiresIn: $e) { secret } }",
                json!({ "s": session, "e": expires }),
            )
            .await;
        assert_eq!(code(&body), "BAD_USER_INPUT", "{expires}: {body}");
    }
    let body = app
        .graphql(CREATE, json!({ "s": uuid::Uuid::now_v7(), "n": "x" }))
        .await;
    assert_eq!(code(&body), "NOT_FOUND", "{body}");
    let body = app.graphql(CREATE, json!({ "s": session, "n": " " })).await;
    assert_eq!(code(&body), "BAD_USER_INPUT", "{body}");
    app.stop().await;
}

/// The second wall: a link's loaders read its session alone, whichever field asks, so a field
/// that forgot its guard still could not show another session's rows.
#[tokio::test]
async fn a_links_loaders_read_its_session_alone() {
    let app = tokens_app().await;
    let (shared, shared_stage) = session_with_stage(&app).await;
    let (other, other_stage) = session_with_stage(&app).await;
    let uuid = |text: &str| Uuid::parse_str(text).unwrap();
    let (shared, shared_stage) = (uuid(&shared), uuid(&shared_stage));
    let (other, other_stage) = (uuid(&other), uuid(&other_stage));
    let dispatcher = Arc::new(Dispatcher::default());
    let loaders = Loaders::new(&app.store, &dispatcher, true, Some(shared));

    // A session, by id; its children, by the session's id; a record, by key and by global id.
    assert!(loaders.sessions.load_one(shared).await.unwrap().is_some());
    assert!(forbidden(loaders.sessions.load_one(other).await));
    let stages = loaders.stages_by_session.load_one(shared).await.unwrap();
    assert_eq!(stages.map(|s| s.len()), Some(1));
    assert!(forbidden(loaders.stages_by_session.load_one(other).await));
    let key = |session, id| Key::new(session, id);
    assert!(
        loaders
            .stages
            .load_one(key(shared, shared_stage))
            .await
            .unwrap()
            .is_some()
    );
    assert!(forbidden(
        loaders.stages.load_one(key(other, other_stage)).await
    ));
    assert!(
        loaders
            .nodes
            .stages
            .load_one(shared_stage)
            .await
            .unwrap()
            .is_some()
    );
    assert!(forbidden(loaders.nodes.stages.load_one(other_stage).await));
    assert!(forbidden(
        loaders
            .executions_by_stage
            .load_one(key(other, other_stage))
            .await
    ));

    // Without a link, the same loaders read both.
    let unbound = Loaders::new(&app.store, &dispatcher, true, None);
    assert!(
        unbound
            .nodes
            .stages
            .load_one(other_stage)
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        unbound
            .stages_by_session
            .load_one(other)
            .await
            .unwrap()
            .is_some()
    );
    app.stop().await;
}

/// Whether a load was refused as beyond the link.
fn forbidden<T>(result: Result<T, Arc<Error>>) -> bool {
    result.is_err_and(|err| matches!(*err, Error::Forbidden(_)))
}

/// Behind a proxy, the page's URL is at the origin browsers see (`--public-origin`), whatever
/// host the request named.
#[tokio::test]
async fn a_links_url_is_at_the_public_origin() {
    let mut options = tokens_mode();
    options.public_origin = Some("https://casefile.example.com/".to_owned());
    let mut app = TestApp::start_with(options).await;
    app.token = Some(app.token("root", Role::Admin, None).await);
    let (session, _) = session_with_stage(&app).await;
    let body = app.graphql(CREATE, json!({ "s": session })).await;
    let created = &body["data"]["createShareLink"];
    let secret = created["secret"].as_str().expect("a secret");
    assert_eq!(
        created["url"],
        format!("https://casefile.example.com/share/{session}#{secret}").as_str()
    );
    app.stop().await;
}

/// A revoked link stops on every replica of the database within moments, and an expired one
/// when it expires.
#[tokio::test]
async fn a_revoked_or_expired_link_stops_on_every_replica() {
    let Some((a, _url)) = TestApp::start_external("a link's revocation across two servers").await
    else {
        return;
    };
    let tokens = tokens_mode();
    let b =
        casefile::server::Server::start(a.store.clone(), &tokens, "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
    let (session, _) = session_with_stage(&a).await;
    let link = |expires: &'static str| {
        let a = &a;
        let session = session.clone();
        async move {
            a.data(
                "mutation ($s: ID!, $e: String!) { createShareLink(sessionId: $s, expiresIn: $e) {
                   secret link { id } } }",
                json!({ "s": session, "e": expires }),
            )
            .await["createShareLink"]
                .clone()
        }
    };
    let on_b = |secret: String| {
        let client = a.client.clone();
        let url = format!("http://{}/graphql", b.addr());
        let session = session.clone();
        async move {
            client
                .post(url)
                .bearer_auth(secret)
                .json(
                    &json!({ "query": "query ($s: ID!) { session(id: $s) { uuid } }",
                               "variables": { "s": session } }),
                )
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    let revoked = link("1h").await;
    let expiring = link("2s").await;
    let secret = |link: &Value| link["secret"].as_str().unwrap().to_owned();
    assert_eq!(
        on_b(secret(&revoked)).await,
        200,
        "b verified and cached it"
    );
    assert_eq!(on_b(secret(&expiring)).await, 200);
    a.data(
        "mutation ($id: UUID!) { revokeShareLink(id: $id) { revokedAt } }",
        json!({ "id": revoked["link"]["id"] }),
    )
    .await;
    let started = std::time::Instant::now();
    while on_b(secret(&revoked)).await != 401 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "b still accepts a revoked link"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    assert_eq!(on_b(secret(&expiring)).await, 401, "expired");
    b.stop().await;
    a.stop().await;
}
