//! Chains and their versions (seed 000, Q4): a version registered once and never changed,
//! sessions that name the version they ran, and finding them again by it (impact analysis),
//! through an index at volume.

use casefile::auth::{AuthMode, AuthOptions};
use casefile::http::HttpOptions;
use casefile::model::{PurgeTrigger, Role, SessionStatus};
use casefile::retention::{Cutoff, Policy, PurgeBatches, purge};
use casefile::store::chains::{ChainSessions, ChainSessionsPageKey};
use casefile::store::page::Slice;
use casefile::store::sessions::{SessionFilter, SessionSort};
use casefile::store::write::restore::{Records, restore};
use casefile::store::{ChainKey, raw_json};
use chrono::Utc;
use serde_json::{Value, json};

use crate::common::{TestApp, nodes, restorer, statements};

const REGISTER: &str = "mutation ($n: String!, $v: String!, $d: JSON!) {
    registerChain(input: { name: $n, version: $v, definition: $d }) {
      id uuid name version definition stageCount createdAt createdBy deprecatedAt } }";

const CREATE: &str = "mutation ($c: ChainVersionRef, $id: String, $o: JSON, $a: String) {
    createSession(input: { alertType: \"PodCrashLooping\", chain: $c, chainId: $id,
                           chainOverrides: $o, author: $a }) {
      uuid chainId chainOverrides chain { name version stageCount } } }";

fn definition(policy: &str) -> Value {
    json!({
        "stages": [
            { "name": "Initial Analysis", "agent": "KubernetesAgent" },
            { "name": "Deep Dive", "agents": ["KubernetesAgent", "ArgoCDAgent"],
              "success_policy": policy, "timeout_s": 600 },
            { "name": "Recommendations", "agent": "RemediationAgent" },
        ],
        "llm": { "model": "gemini-2.5-pro", "temperature": 0.2 },
    })
}

async fn register(app: &TestApp, name: &str, version: &str, definition: &Value) -> Value {
    app.data(
        REGISTER,
        json!({ "n": name, "v": version, "d": definition }),
    )
    .await["registerChain"]
        .clone()
}

async fn count(app: &TestApp, table: &str) -> i64 {
    sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
        .fetch_one(app.store.pool())
        .await
        .unwrap()
}

/// Creates a session on a chain version (or a name, with `version` null); its uuid.
async fn session(app: &TestApp, name: &str, version: Option<&str>, author: &str) -> String {
    let variables = match version {
        Some(v) => json!({ "c": { "name": name, "version": v }, "a": author }),
        None => json!({ "id": name, "a": author }),
    };
    app.data(CREATE, variables).await["createSession"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn a_version_is_registered_once_and_never_changes() {
    let app = TestApp::start().await;
    let first = register(&app, "kubernetes-deep-dive", "1.0.0", &definition("any")).await;
    assert_eq!(first["stageCount"], 3);
    assert_eq!(first["definition"], definition("any"));
    assert_eq!(first["deprecatedAt"], Value::Null);
    assert!(first["createdAt"].is_string());

    // The same content, however it is written: keys in another order, another spacing, a
    // number written otherwise. Equal as JSON values, so the same version: nothing is written.
    let same_text = r#"{ "llm" : {"temperature":0.20, "model":"gemini-2.5-pro"},
        "stages":[{"agent":"KubernetesAgent","name":"Initial Analysis"},
                  {"timeout_s":6e2,"success_policy":"any","name":"Deep Dive",
                   "agents":["KubernetesAgent","ArgoCDAgent"]},
                  {"name":"Recommendations","agent":"RemediationAgent"}] }"#;
    let same: Value = serde_json::from_str(same_text).unwrap();
    let again = register(&app, "kubernetes-deep-dive", "1.0.0", &same).await;
    assert_eq!(again["uuid"], first["uuid"]);
    assert_eq!(again["createdAt"], first["createdAt"]);
    assert_eq!(count(&app, "chains").await, 1);

    // Other content under the same name and version is refused: a version never changes.
    let mut reordered = definition("any");
    reordered["stages"].as_array_mut().unwrap().swap(0, 2);
    for other in [definition("all"), reordered] {
        let (code, message) = app
            .error(
                REGISTER,
                json!({ "n": "kubernetes-deep-dive", "v": "1.0.0", "d": other }),
            )
            .await;
        assert_eq!(code, "CONFLICT", "{message}");
        assert!(
            message.contains("already registered with another definition"),
            "{message}"
        );
    }
    let stored: Value = sqlx::query_scalar("SELECT definition FROM chains")
        .fetch_one(app.store.pool())
        .await
        .unwrap();
    assert_eq!(stored, definition("any"), "the first definition stands");

    // A new version is a new row; another chain may use the same version.
    let second = register(&app, "kubernetes-deep-dive", "1.1.0", &definition("all")).await;
    assert_ne!(second["uuid"], first["uuid"]);
    register(
        &app,
        "log-replicas",
        "1.0.0",
        &json!({ "stages": [{ "name": "Logs" }] }),
    )
    .await;
    assert_eq!(count(&app, "chains").await, 3);

    // What is not a version, a name or a definition is refused, and nothing is written.
    let big = json!({ "stages": [{ "name": "A", "prompt": "x".repeat(70_000) }] });
    let cases = [
        ("c", "1.0.0", json!({ "stages": [] }), "non-empty array"),
        (
            "c",
            "1.0.0",
            json!({ "steps": [{ "name": "A" }] }),
            "`definition.stages`",
        ),
        ("c", "1.0.0", json!([{ "name": "A" }]), "JSON object"),
        (
            "c",
            "1.0.0",
            json!({ "stages": [{ "agent": "A" }] }),
            "`definition.stages[0]`",
        ),
        (
            "c",
            "1.0.0",
            json!({ "stages": [{ "name": " " }] }),
            "stages[0].name",
        ),
        (
            "c",
            "1.0.0",
            json!({ "stages": ["A"] }),
            "`definition.stages[0]`",
        ),
        ("c", "1.0.0", big, "at most 65536"),
        ("c", "1.0 beta", definition("any"), "`version`"),
        ("c", ".1", definition("any"), "`version`"),
        ("c", "", definition("any"), "`version`"),
        ("c", &"1".repeat(101), definition("any"), "`version`"),
        (" ", "1.0.0", definition("any"), "`name`"),
        (&"n".repeat(201), "1.0.0", definition("any"), "`name`"),
    ];
    for (name, version, definition, expected) in cases {
        let (code, message) = app
            .error(
                REGISTER,
                json!({ "n": name, "v": version, "d": definition }),
            )
            .await;
        assert_eq!(code, "BAD_USER_INPUT", "{name} {version}: {message}");
        assert!(message.contains(expected), "{message}");
    }
    assert_eq!(count(&app, "chains").await, 3);
    app.stop().await;
}

#[tokio::test]
async fn a_session_names_the_version_it_ran_or_a_chain_name_only() {
    let app = TestApp::start().await;
    register(&app, "kubernetes-deep-dive", "1.0.0", &definition("any")).await;
    let deep_dive = json!({ "name": "kubernetes-deep-dive", "version": "1.0.0" });

    let overrides = json!({ "stages": { "Deep Dive": { "timeout_s": 1200 } } });
    let d = app
        .data(CREATE, json!({ "c": deep_dive, "o": overrides }))
        .await;
    let created = &d["createSession"];
    assert_eq!(created["chainId"], "kubernetes-deep-dive");
    assert_eq!(
        created["chain"],
        json!({ "name": "kubernetes-deep-dive", "version": "1.0.0", "stageCount": 3 })
    );
    assert_eq!(created["chainOverrides"], overrides);
    // `chainId` may come along when it is the version's chain.
    let d = app
        .data(
            CREATE,
            json!({ "c": deep_dive, "id": "kubernetes-deep-dive" }),
        )
        .await;
    assert_eq!(d["createSession"]["chain"]["version"], "1.0.0");
    assert_eq!(d["createSession"]["chainOverrides"], Value::Null);

    // A name alone is what it always was: the chain's name, no version.
    let d = app
        .data(CREATE, json!({ "id": "kubernetes-deep-dive" }))
        .await;
    assert_eq!(d["createSession"]["chainId"], "kubernetes-deep-dive");
    assert_eq!(d["createSession"]["chain"], Value::Null);
    // So does a session from before chain versions existed (written as they were then).
    let old = uuid::Uuid::now_v7();
    sqlx::query("INSERT INTO sessions (id, alert_type, chain_id) VALUES ($1, 'Disk', 'legacy')")
        .bind(old)
        .execute(app.store.pool())
        .await
        .unwrap();
    let d = app
        .data(
            "query ($id: ID!) { session(id: $id) { chainId chain { name } chainOverrides } }",
            json!({ "id": old }),
        )
        .await;
    assert_eq!(
        d["session"],
        json!({ "chainId": "legacy", "chain": null, "chainOverrides": null })
    );

    // Refused, with nothing written.
    let sessions = count(&app, "sessions").await;
    let cases = [
        (
            json!({ "c": { "name": "kubernetes-deep-dive", "version": "9.9.9" } }),
            "NOT_FOUND",
            "chain kubernetes-deep-dive version 9.9.9 is not registered",
        ),
        (
            json!({ "c": { "name": "nope", "version": "1.0.0" } }),
            "NOT_FOUND",
            "chain nope version 1.0.0 is not registered",
        ),
        (json!({}), "BAD_USER_INPUT", "give `chain`"),
        (
            json!({ "c": deep_dive, "id": "log-replicas" }),
            "BAD_USER_INPUT",
            "`chainId` names another chain",
        ),
        (
            json!({ "id": "kubernetes-deep-dive", "o": { "a": 1 } }),
            "BAD_USER_INPUT",
            "need `chain`",
        ),
        (
            json!({ "c": deep_dive, "o": [1, 2] }),
            "BAD_USER_INPUT",
            "`chainOverrides` must be a JSON object",
        ),
        (
            json!({ "c": deep_dive, "o": { "prompt": "x".repeat(17_000) } }),
            "BAD_USER_INPUT",
            "at most 16384",
        ),
        (
            json!({ "c": { "name": "kubernetes-deep-dive", "version": "1 0" } }),
            "BAD_USER_INPUT",
            "`chain.version`",
        ),
    ];
    for (variables, expected_code, expected) in cases {
        let (code, message) = app.error(CREATE, variables.clone()).await;
        assert_eq!(code, expected_code, "{variables}: {message}");
        assert!(message.contains(expected), "{message}");
    }
    assert_eq!(count(&app, "sessions").await, sessions);

    // A retry under the client's id returns the same session; another version under it is a
    // conflict.
    let retry = "mutation ($id: UUID!, $c: ChainVersionRef!) {
        createSession(input: { id: $id, alertType: \"A\", chain: $c }) { uuid chain { version } } }";
    register(&app, "kubernetes-deep-dive", "1.1.0", &definition("all")).await;
    let id = uuid::Uuid::now_v7();
    for _ in 0..2 {
        let d = app.data(retry, json!({ "id": id, "c": deep_dive })).await;
        assert_eq!(d["createSession"]["uuid"], id.to_string());
    }
    let newer = json!({ "name": "kubernetes-deep-dive", "version": "1.1.0" });
    let (code, _) = app.error(retry, json!({ "id": id, "c": newer })).await;
    assert_eq!(code, "CONFLICT");
    app.stop().await;
}

const CHAINS: &str = "query ($f: ChainFilter, $first: Int, $after: String, $last: Int,
    $before: String) {
    chains(filter: $f, first: $first, after: $after, last: $last, before: $before) {
      totalCount pageInfo { hasPreviousPage hasNextPage startCursor endCursor }
      edges { cursor node { name version deprecatedAt deprecatedBy } } } }";

fn versions(data: &Value) -> Vec<String> {
    nodes(&data["chains"])
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{}@{}",
                c["name"].as_str().unwrap(),
                c["version"].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test]
async fn chains_are_listed_newest_first_by_name_and_without_deprecated_ones() {
    let app = TestApp::start().await;
    let one = json!({ "stages": [{ "name": "Only" }] });
    let mut ids = Vec::new();
    for (name, version) in [("a", "1"), ("b", "1"), ("a", "2"), ("a", "3")] {
        ids.push(register(&app, name, version, &one).await["id"].clone());
    }
    let d = app.data(CHAINS, json!({})).await;
    assert_eq!(versions(&d), ["a@3", "a@2", "b@1", "a@1"]);
    assert_eq!(d["chains"]["totalCount"], 4);

    // Pages both ways.
    let d = app.data(CHAINS, json!({ "first": 2 })).await;
    assert_eq!(versions(&d), ["a@3", "a@2"]);
    assert_eq!(d["chains"]["pageInfo"]["hasNextPage"], true);
    let after = d["chains"]["pageInfo"]["endCursor"].clone();
    let d = app
        .data(CHAINS, json!({ "first": 2, "after": after }))
        .await;
    assert_eq!(versions(&d), ["b@1", "a@1"]);
    assert_eq!(d["chains"]["pageInfo"]["hasPreviousPage"], true);
    assert_eq!(d["chains"]["pageInfo"]["hasNextPage"], false);
    let before = d["chains"]["pageInfo"]["startCursor"].clone();
    let d = app
        .data(CHAINS, json!({ "last": 1, "before": before }))
        .await;
    assert_eq!(versions(&d), ["a@2"]);

    // One chain's versions.
    let d = app.data(CHAINS, json!({ "f": { "name": "a" } })).await;
    assert_eq!(versions(&d), ["a@3", "a@2", "a@1"]);
    assert_eq!(d["chains"]["totalCount"], 3);

    // Deprecated: out of the default list, in it when asked for; again changes nothing.
    let deprecate = "mutation ($c: ChainVersionRef!) {
        deprecateChain(chain: $c) { version deprecatedAt deprecatedBy } }";
    let first = app
        .data(deprecate, json!({ "c": { "name": "a", "version": "2" } }))
        .await;
    let at = first["deprecateChain"]["deprecatedAt"].clone();
    assert!(at.is_string(), "{first}");
    let again = app
        .data(deprecate, json!({ "c": { "name": "a", "version": "2" } }))
        .await;
    assert_eq!(again["deprecateChain"]["deprecatedAt"], at);
    let d = app.data(CHAINS, json!({ "f": { "name": "a" } })).await;
    assert_eq!(versions(&d), ["a@3", "a@1"]);
    assert_eq!(d["chains"]["totalCount"], 2);
    let d = app
        .data(
            CHAINS,
            json!({ "f": { "name": "a", "includeDeprecated": true } }),
        )
        .await;
    assert_eq!(versions(&d), ["a@3", "a@2", "a@1"]);
    let (code, message) = app
        .error(deprecate, json!({ "c": { "name": "a", "version": "9" } }))
        .await;
    assert_eq!(code, "NOT_FOUND", "{message}");

    // Looked up by name and version (deprecated too) and by global id.
    let d = app
        .data(
            "query ($id: ID!) {
               chain(name: \"a\", version: \"2\") { id version deprecatedAt }
               missing: chain(name: \"a\", version: \"7\") { id }
               node(id: $id) { ... on Chain { name version } } }",
            json!({ "id": ids[1] }),
        )
        .await;
    assert_eq!(d["chain"]["id"], ids[2]);
    assert_eq!(d["chain"]["deprecatedAt"], at);
    assert_eq!(d["missing"], Value::Null);
    assert_eq!(d["node"], json!({ "name": "b", "version": "1" }));

    // A cursor of another list is refused.
    session(&app, "a", None, "someone").await;
    let sessions = app
        .data(
            "{ sessions(first: 1) { pageInfo { endCursor } } }",
            json!({}),
        )
        .await;
    let cursor = sessions["sessions"]["pageInfo"]["endCursor"].clone();
    let (code, message) = app.error(CHAINS, json!({ "after": cursor })).await;
    assert_eq!(code, "BAD_USER_INPUT", "{message}");
    assert!(message.contains("not to the list of chains"), "{message}");
    app.stop().await;
}

const IMPACT: &str =
    "query ($c: ChainVersionRef!, $first: Int, $after: String, $d: Boolean! = false) {
    sessions(filter: { chain: $c, includeDeleted: $d }, first: $first, after: $after) {
      totalCount pageInfo { hasNextPage endCursor } edges { cursor node { author } } } }";

fn authors(connection: &Value) -> Vec<String> {
    nodes(connection)
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["author"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn the_sessions_of_a_version_are_found_by_it() {
    let app = TestApp::start().await;
    register(&app, "deep", "1.0.0", &definition("any")).await;
    register(&app, "deep", "1.1.0", &definition("all")).await;
    register(
        &app,
        "quick",
        "1.0.0",
        &json!({ "stages": [{ "name": "Look" }] }),
    )
    .await;
    for (version, author) in [
        (Some("1.0.0"), "old-1"),
        (Some("1.1.0"), "new-1"),
        (Some("1.0.0"), "old-2"),
        (None, "named"),
        (Some("1.1.0"), "new-2"),
        (Some("1.0.0"), "old-3"),
    ] {
        session(&app, "deep", version, author).await;
    }
    let v1 = json!({ "name": "deep", "version": "1.0.0" });

    // Impact analysis: every session that ran 1.0.0, newest first, a page at a time.
    let d = app.data(IMPACT, json!({ "c": v1, "first": 2 })).await;
    assert_eq!(authors(&d["sessions"]), ["old-3", "old-2"]);
    assert_eq!(d["sessions"]["totalCount"], 3);
    let after = d["sessions"]["pageInfo"]["endCursor"].clone();
    let d = app
        .data(IMPACT, json!({ "c": v1, "first": 2, "after": after }))
        .await;
    assert_eq!(authors(&d["sessions"]), ["old-1"]);
    assert_eq!(d["sessions"]["pageInfo"]["hasNextPage"], false);
    // By name alone, as before: every session of the chain, with a version or not.
    let d = app
        .data(
            "{ sessions(filter: { chainId: \"deep\" }) { totalCount } }",
            json!({}),
        )
        .await;
    assert_eq!(d["sessions"]["totalCount"], 6);

    // Each version's sessions from the chain list: one statement for every version's page, and
    // one counting them, whatever the number of versions.
    let _recording = statements::record_on_this_thread();
    statements::clear();
    let by_chain = "query ($d: Boolean! = false) { chains(filter: { name: \"deep\" }) { edges { node {
        version stageCount
        sessionsConnection(first: 2, includeDeleted: $d) {
          totalCount pageInfo { hasNextPage endCursor } edges { cursor node { author chain { version } } } }
      } } } }";
    let d = app.data(by_chain, json!({})).await;
    let pages: Vec<String> = statements::recorded()
        .into_iter()
        .filter(|s| s.contains("WITH k AS MATERIALIZED") && s.contains("chain_version"))
        .collect();
    assert_eq!(pages.len(), 1, "{pages:?}");
    let chains = nodes(&d["chains"]);
    let (newer, older) = (&chains[0], &chains[1]);
    assert_eq!(newer["version"], "1.1.0");
    assert_eq!(authors(&newer["sessionsConnection"]), ["new-2", "new-1"]);
    assert_eq!(newer["sessionsConnection"]["totalCount"], 2);
    assert_eq!(
        newer["sessionsConnection"]["pageInfo"]["hasNextPage"],
        false
    );
    assert_eq!(authors(&older["sessionsConnection"]), ["old-3", "old-2"]);
    assert_eq!(older["sessionsConnection"]["totalCount"], 3);
    assert_eq!(older["sessionsConnection"]["pageInfo"]["hasNextPage"], true);
    assert_eq!(
        nodes(&older["sessionsConnection"])[0]["chain"]["version"],
        "1.0.0"
    );
    // Its cursors are the sessions list's: one page on there.
    let after = older["sessionsConnection"]["pageInfo"]["endCursor"].clone();
    let d = app
        .data(IMPACT, json!({ "c": v1, "first": 5, "after": after }))
        .await;
    assert_eq!(authors(&d["sessions"]), ["old-1"]);

    // A deleted session is left out unless asked for, on both lists.
    let old_2: String = sqlx::query_scalar("SELECT id::text FROM sessions WHERE author = 'old-2'")
        .fetch_one(app.store.pool())
        .await
        .unwrap();
    for step in [
        "mutation ($s: ID!) { failSession(input: { id: $s, errorMessage: \"gone\" }) { status } }",
        "mutation ($s: ID!) { deleteSession(id: $s) { deletedAt } }",
    ] {
        app.data(step, json!({ "s": old_2 })).await;
    }
    let d = app.data(IMPACT, json!({ "c": v1 })).await;
    assert_eq!(authors(&d["sessions"]), ["old-3", "old-1"]);
    let d = app.data(IMPACT, json!({ "c": v1, "d": true })).await;
    assert_eq!(authors(&d["sessions"]), ["old-3", "old-2", "old-1"]);
    for (include_deleted, expected, total) in [
        (false, vec!["old-3", "old-1"], 2),
        (true, vec!["old-3", "old-2"], 3),
    ] {
        let d = app.data(by_chain, json!({ "d": include_deleted })).await;
        let older = &nodes(&d["chains"])[1]["sessionsConnection"];
        assert_eq!(authors(older), expected);
        assert_eq!(older["totalCount"], total);
    }
    // Paging the chain's sessions backward, and a cursor of another kind.
    let d = app
        .data(
            "{ chain(name: \"deep\", version: \"1.0.0\") {
                 sessionsConnection(last: 1, includeDeleted: true) { edges { node { author } }
                   pageInfo { hasPreviousPage hasNextPage } } } }",
            json!({}),
        )
        .await;
    let page = &d["chain"]["sessionsConnection"];
    assert_eq!(authors(page), ["old-1"]);
    assert_eq!(page["pageInfo"]["hasPreviousPage"], true);
    assert_eq!(page["pageInfo"]["hasNextPage"], false);
    let chain_cursor = app.data(CHAINS, json!({})).await["chains"]["edges"][0]["cursor"].clone();
    let (code, message) = app
        .error(
            "query ($a: String) { chain(name: \"deep\", version: \"1.0.0\") {
               sessionsConnection(after: $a) { totalCount } } }",
            json!({ "a": chain_cursor }),
        )
        .await;
    assert_eq!(code, "BAD_USER_INPUT", "{message}");

    // Figures by version: each version its group within its chain, name-only sessions their
    // chain's group without a version.
    let d = app
        .data(
            "{ sessionStats(filter: { includeDeleted: true }) {
                 groups(by: [CHAIN_VERSION]) { totalCount nodes { key { chainId chainVersion }
                   sessionCount failedCount } } } }",
            json!({}),
        )
        .await;
    let groups = &d["sessionStats"]["groups"];
    assert_eq!(groups["totalCount"], 3);
    let mut found: Vec<(Value, Value, i64, i64)> = groups["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["key"]["chainId"].clone(),
                g["key"]["chainVersion"].clone(),
                g["sessionCount"].as_i64().unwrap(),
                g["failedCount"].as_i64().unwrap(),
            )
        })
        .collect();
    found.sort_by_key(|g| g.1.to_string());
    assert_eq!(
        found,
        [
            (json!("deep"), json!("1.0.0"), 3, 1),
            (json!("deep"), json!("1.1.0"), 2, 0),
            (json!("deep"), Value::Null, 1, 0),
        ]
    );
    // A version's own figures.
    let d = app
        .data(
            "{ chain(name: \"deep\", version: \"1.0.0\") {
                 live: stats { groups(by: [STATUS]) { nodes { key { status } sessionCount } } }
                 all: stats(includeDeleted: true) { groups { nodes { sessionCount failedCount } } } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        d["chain"]["live"]["groups"]["nodes"],
        json!([{ "key": { "status": "PENDING" }, "sessionCount": 2 }])
    );
    assert_eq!(
        d["chain"]["all"]["groups"]["nodes"],
        json!([{ "sessionCount": 3, "failedCount": 1 }])
    );
    app.stop().await;
}

#[tokio::test]
async fn registering_is_a_writers_and_deprecating_an_admins() {
    let app = TestApp::start_with(HttpOptions {
        auth: AuthOptions {
            mode: AuthMode::Tokens,
            ..AuthOptions::default()
        },
        ..HttpOptions::default()
    })
    .await;
    let mut app = app;
    let deprecate = "mutation { deprecateChain(chain: { name: \"c\", version: \"1\" }) {
        deprecatedBy } }";
    let one = json!({ "stages": [{ "name": "Only" }] });
    let register_c = json!({ "n": "c", "v": "1", "d": one });
    for (role, name, registers, deprecates) in [
        (Role::Reader, "reader", false, false),
        (Role::Operator, "operator", false, false),
        (Role::Writer, "writer", true, false),
        (Role::Admin, "admin", true, true),
    ] {
        app.token = Some(app.token(name, role, None).await);
        let body = app.graphql(REGISTER, register_c.clone()).await;
        let code = &body["errors"][0]["extensions"]["code"];
        if registers {
            assert_eq!(
                body["data"]["registerChain"]["createdBy"], "token:writer",
                "{body}"
            );
        } else {
            assert_eq!(code, "FORBIDDEN", "{name}: {body}");
        }
        let body = app.graphql(deprecate, json!({})).await;
        if deprecates {
            assert_eq!(
                body["data"]["deprecateChain"]["deprecatedBy"], "token:admin",
                "{body}"
            );
        } else {
            assert_eq!(
                body["errors"][0]["extensions"]["code"], "FORBIDDEN",
                "{name}: {body}"
            );
        }
        // Every role reads them.
        let d = app
            .data(
                "{ chains(filter: { includeDeprecated: true }) { totalCount } }",
                json!({}),
            )
            .await;
        assert_eq!(d["chains"]["totalCount"], i64::from(registers), "{name}");
    }
    app.stop().await;
}

#[tokio::test]
async fn purging_sessions_keeps_the_versions_they_ran() {
    let app = TestApp::start().await;
    register(&app, "deep", "1.0.0", &definition("any")).await;
    let s = session(&app, "deep", Some("1.0.0"), "gone").await;
    for step in [
        "mutation ($s: ID!) { failSession(input: { id: $s, errorMessage: \"x\" }) { status } }",
        "mutation ($s: ID!) { deleteSession(id: $s) { deletedAt } }",
    ] {
        app.data(step, json!({ "s": s })).await;
    }
    let now = Utc::now() + chrono::Duration::seconds(1);
    let policy = Policy::new(Some(Cutoff::At(now)), None, None, now);
    let running = tokio::sync::watch::channel(false).1;
    let batches = PurgeBatches {
        size: 10,
        pause_ms: 0,
    };
    let purged = purge(
        &app.store,
        &policy,
        "cli:ops",
        PurgeTrigger::Command,
        batches,
        None,
        &running,
    )
    .await
    .unwrap();
    assert_eq!(purged.sessions, 1);
    assert_eq!(count(&app, "sessions").await, 0);
    let d = app
        .data(
            "{ chain(name: \"deep\", version: \"1.0.0\") { stageCount
                 sessionsConnection(includeDeleted: true) { totalCount } } }",
            json!({}),
        )
        .await;
    assert_eq!(d["chain"]["stageCount"], 3);
    assert_eq!(d["chain"]["sessionsConnection"]["totalCount"], 0);
    app.stop().await;
}

#[tokio::test]
async fn a_restore_registers_the_versions_its_sessions_ran() {
    let app = TestApp::start().await;
    let mut records = casefile::demo::records();
    let session = records
        .sessions
        .iter()
        .position(|s| s.chain_version.is_some())
        .unwrap();
    records.sessions[session].chain_overrides = Some(raw_json(&json!({ "timeout_s": 30 })));
    let restored = restore(&app.store, &records, &restorer()).await.unwrap();
    assert!(restored.new > records.chains.len());
    assert_eq!(count(&app, "chains").await, records.chains.len() as i64);
    let stored: Option<Value> =
        sqlx::query_scalar("SELECT chain_overrides FROM sessions WHERE id = $1")
            .bind(records.sessions[session].id)
            .fetch_one(app.store.pool())
            .await
            .unwrap();
    assert_eq!(stored, Some(json!({ "timeout_s": 30 })));
    // Again: nothing new, the versions included.
    assert_eq!(
        restore(&app.store, &records, &restorer())
            .await
            .unwrap()
            .new,
        0
    );

    // A version registered here with another definition is refused, naming it.
    let mut changed = records.clone();
    changed.chains[0].definition = raw_json(&json!({ "stages": [{ "name": "Other" }] }));
    let err = restore(&app.store, &changed, &restorer())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("already registered with another definition"),
        "{err}"
    );
    // A session naming a version that is registered nowhere is refused, naming the session.
    let mut orphan = Records::default();
    let pending = records
        .sessions
        .iter()
        .find(|s| s.chain_version.is_some() && s.status == SessionStatus::Pending)
        .unwrap();
    let mut row = pending.clone();
    row.id = uuid::Uuid::now_v7();
    row.chain_version = Some("0.0.1".into());
    orphan.sessions.push(row);
    let err = restore(&app.store, &orphan, &restorer())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("version 0.0.1 is not registered"), "{err}");
    assert!(
        err.contains(&format!("session {}", orphan.sessions[0].id)),
        "{err}"
    );
    app.stop().await;
}

#[tokio::test]
async fn the_sessions_of_a_version_are_read_along_its_index_at_volume() {
    let app = TestApp::start().await;
    let mut conn = app.store.pool().acquire().await.unwrap();
    // 60,000 sessions as an import would write them: 40 chains of 5 versions, and one session
    // in six names its chain only (as every session from before chain versions does).
    for statement in [
        "INSERT INTO chains (id, name, version, definition) \
         SELECT gen_random_uuid(), 'chain-' || c, v || '.0.0', \
                '{\"stages\": [{\"name\": \"Look\"}]}' \
         FROM generate_series(1, 40) c, generate_series(1, 5) v",
        "SET session_replication_role = replica",
        "INSERT INTO sessions (id, alert_type, chain_id, chain_version, created_at) \
         SELECT gen_random_uuid(), 'PodCrashLooping', 'chain-' || (1 + n % 40), \
                CASE WHEN n % 6 = 0 THEN NULL ELSE (1 + n / 40 % 5) || '.0.0' END, \
                now() - make_interval(secs => n) \
         FROM generate_series(1, 60000) n",
        "RESET session_replication_role",
        "ANALYZE sessions, chains",
    ] {
        sqlx::query(statement).execute(&mut *conn).await.unwrap();
    }
    drop(conn);
    let chain = ChainKey {
        name: "chain-7".into(),
        version: "3.0.0".into(),
    };
    let slice = Slice {
        after: None,
        before: None,
        size: 20,
        from_end: false,
    };
    let filter = SessionFilter {
        chain: Some(chain.clone()),
        ..SessionFilter::default()
    };
    let mut plans = Vec::new();
    // Newest first (the default) and oldest first.
    for descending in [true, false] {
        plans.push((
            format!("sessions(filter: {{ chain }}), descending: {descending}"),
            app.store
                .explain_list_sessions(&filter, SessionSort::CreatedAt, descending, &slice)
                .await
                .unwrap(),
        ));
    }
    let keys: Vec<ChainSessionsPageKey> = ["1.0.0", "3.0.0"]
        .into_iter()
        .map(|version| ChainSessionsPageKey {
            sessions: ChainSessions {
                chain: ChainKey {
                    name: "chain-7".into(),
                    version: version.into(),
                },
                include_deleted: false,
            },
            slice: Slice {
                after: None,
                before: None,
                size: 20,
                from_end: false,
            },
        })
        .collect();
    plans.push((
        "Chain.sessionsConnection".to_owned(),
        app.store
            .explain_session_pages_by_chain(&keys)
            .await
            .unwrap(),
    ));
    for (what, plan) in &plans {
        assert!(
            plan.contains("sessions_chain_version_idx"),
            "{what} does not read sessions_chain_version_idx:\n{plan}"
        );
        assert!(!plan.contains("Seq Scan"), "{what} scans a table:\n{plan}");
        println!("{what} at 60,000 sessions:\n{plan}\n");
    }
    // The page itself: newest first, that version's only.
    let pages = app.store.session_pages_by_chain(&keys).await.unwrap();
    let page = &pages[&keys[1]];
    assert_eq!(page.rows.len(), 20);
    assert!(page.has_next);
    assert!(page.rows.iter().all(|s| s.chain() == Some(chain.clone())));
    assert!(
        page.rows
            .windows(2)
            .all(|w| w[0].created_at > w[1].created_at)
    );
    app.stop().await;
}
