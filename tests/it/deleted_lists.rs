//! Deleted means hidden from lists: every root field of the schema is accounted for, and each
//! that lists sessions or their records leaves a soft-deleted session's out unless given
//! `includeDeleted: true`; look-ups by id still return the deleted session, `deletedAt` set.
//! The root fields come from the schema itself, so a root field added later fails here until
//! it is covered.

use std::collections::{BTreeMap, BTreeSet};

use casefile::auth::{AuthMode, AuthOptions};
use casefile::http::HttpOptions;
use casefile::model::Role;
use chrono::Utc;
use serde_json::{Value, json};

use crate::common::TestApp;
use crate::common::fixtures;

/// How a root field of `Query` is covered.
enum Coverage {
    /// It lists sessions or their records: each query (with `$d` for `includeDeleted`) names
    /// the sessions it found by `author`, and may count them with `totalCount`.
    Lists(&'static [&'static str]),
    /// It looks a session up by id (`$id`, its global ID) and names it by `author`, with
    /// `deletedAt`.
    ById(&'static str),
    /// It lists nothing of sessions; why.
    Unrelated(&'static str),
}

fn coverage(field: &str) -> Option<Coverage> {
    Some(match field {
        "sessions" => Coverage::Lists(&[
            "query ($d: Boolean!) { sessions(first: 100, filter: { includeDeleted: $d }) {
               totalCount edges { node { author } } } }",
            "query ($d: Boolean!) { sessions(first: 100, orderBy: { field: RELEVANCE },
               filter: { search: \"oomkilled\", includeDeleted: $d }) {
               totalCount edges { node { author } matches { field } } } }",
        ]),
        "sessionStats" => Coverage::Lists(&[
            "query ($d: Boolean!) { sessionStats(filter: { includeDeleted: $d }) {
               groups(by: [AUTHOR]) { totalCount nodes { key { author } } }
               usage(by: [AUTHOR]) { totalCount nodes { key { author } } } } }",
            "query ($d: Boolean!) { sessionStats(filter: { search: \"oomkilled\", includeDeleted: $d }) {
               groups(by: [AUTHOR]) { totalCount nodes { key { author } } } } }",
        ]),
        "chats" => Coverage::Lists(&[
            "query ($d: Boolean!) { chats(owner: ANYONE, includeDeleted: $d, first: 100) {
               totalCount edges { node { session { author } } } } }",
        ]),
        "mcpInteractions" => Coverage::Lists(&[
            "query ($d: Boolean!) { mcpInteractions(first: 100, includeDeleted: $d) {
               totalCount edges { node { session { author } } } } }",
            "query ($d: Boolean!) { mcpInteractions(last: 100, includeDeleted: $d,
               filter: { serverName: \"kubernetes\", success: true }) {
               totalCount edges { node { session { author } } } } }",
        ]),
        "notifications" => Coverage::Lists(&[
            "query ($d: Boolean!) { notifications(first: 100, filter: { includeDeleted: $d }) {
               totalCount edges { node { session { author } } } } }",
            "query ($d: Boolean!) { notifications(last: 100,
               filter: { status: FAILED, type: SLACK, includeDeleted: $d }) {
               totalCount edges { node { session { author } } } } }",
        ]),
        "session" => Coverage::ById(
            "query ($id: ID!) { session(id: $id) { author deletedAt } }",
        ),
        "node" => Coverage::ById(
            "query ($id: ID!) { node(id: $id) { ... on Session { author deletedAt } } }",
        ),
        "nodes" => Coverage::ById(
            "query ($id: ID!) { nodes(ids: [$id]) { ... on Session { author deletedAt } } }",
        ),
        "viewer" => Coverage::Unrelated("the caller's own identity"),
        "purges" => Coverage::Unrelated("retention's runs: counts, not session records"),
        "auditLog" => Coverage::Unrelated(
            "the audit trail: a deleted session's records, its deletion among them, are what an \
             auditor looks for, so they are never hidden",
        ),
        "apiTokens" => Coverage::Unrelated("API tokens"),
        "modelPrices" => Coverage::Unrelated("the price list: reference data, no session's"),
        "chains" | "chain" => Coverage::Unrelated(
            "chain versions (the sessions under each, `Chain.sessionsConnection` and \
             `Chain.stats`, leave deleted ones out unless `includeDeleted`: tests/it/chains.rs)",
        ),
        _ => return None,
    })
}

const ROOT_FIELDS: &str = "{ __schema {
    queryType { fields { name args { name type { ...Named } } type { ...Named } } }
    types { name inputFields { name } fields { name } } } }
  fragment Named on __Type { kind name ofType { kind name ofType { kind name ofType { kind name } } } }";

/// A type reference without its `NON_NULL` wrappers: (kind, name of the named type inside).
fn unwrapped(reference: &Value) -> (String, String) {
    let mut t = reference;
    while t["kind"] == "NON_NULL" {
        t = &t["ofType"];
    }
    let kind = t["kind"].as_str().unwrap().to_owned();
    let mut named = t;
    while named["name"].is_null() {
        named = &named["ofType"];
    }
    (kind, named["name"].as_str().unwrap().to_owned())
}

/// Every string under an `author` key, anywhere in `value`.
fn authors(value: &Value, found: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("author", Value::String(author)) => {
                        found.insert(author.clone());
                    }
                    _ => authors(v, found),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| authors(v, found)),
        _ => {}
    }
}

/// Every `totalCount`, anywhere in `value` (in the order of its keys, as serde_json keeps
/// them: the same for the same query).
fn totals(value: &Value, found: &mut Vec<i64>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v.as_i64()) {
                    ("totalCount", Some(n)) => found.push(n),
                    _ => totals(v, found),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| totals(v, found)),
        _ => {}
    }
}

#[tokio::test]
async fn every_root_list_hides_deleted_sessions_records_unless_asked() {
    let app = TestApp::start().await;
    let pool = app.store.pool();
    // Two alike investigations (each with every kind of record and a chat), told apart by
    // their author; one is deleted the way an admin deletes one.
    let mut ids = BTreeMap::new();
    for author in ["live", "deleted"] {
        let id = fixtures::investigation(pool, Utc::now()).await;
        fixtures::notification(pool, id, "slack", "failed").await;
        sqlx::query("UPDATE sessions SET author = $2 WHERE id = $1")
            .bind(id)
            .bind(author)
            .execute(pool)
            .await
            .unwrap();
        ids.insert(author, id.to_string());
    }
    let deleted = app
        .data(
            "mutation ($id: ID!) { deleteSession(id: $id) { id deletedAt } }",
            json!({ "id": ids["deleted"] }),
        )
        .await;
    assert!(deleted["deleteSession"]["deletedAt"].is_string());
    let deleted_id = deleted["deleteSession"]["id"].clone();

    let schema = app.data(ROOT_FIELDS, json!({})).await;
    let types = schema["__schema"]["types"].as_array().unwrap();
    let fields_of = |name: &str, key: &str| -> BTreeSet<String> {
        types
            .iter()
            .find(|t| t["name"] == name)
            .and_then(|t| t[key].as_array())
            .into_iter()
            .flatten()
            .map(|f| f["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let mut uncovered = Vec::new();
    let mut probed = 0;
    for field in schema["__schema"]["queryType"]["fields"]
        .as_array()
        .unwrap()
    {
        let name = field["name"].as_str().unwrap();
        // Whether it returns many records (a list or a connection), and whether it takes
        // `includeDeleted` (as an argument, or in an input object it takes).
        let (kind, type_name) = unwrapped(&field["type"]);
        let many = kind == "LIST" || fields_of(&type_name, "fields").contains("edges");
        let takes_include_deleted = field["args"].as_array().unwrap().iter().any(|arg| {
            arg["name"] == "includeDeleted"
                || fields_of(&unwrapped(&arg["type"]).1, "inputFields").contains("includeDeleted")
        });
        match coverage(name) {
            None => uncovered.push(format!("{name} (lists many: {many})")),
            Some(Coverage::Lists(queries)) => {
                assert!(
                    takes_include_deleted,
                    "{name} lists sessions' records but has no `includeDeleted`"
                );
                for query in queries {
                    let mut seen = Vec::new();
                    for include_deleted in [false, true] {
                        let data = app.data(query, json!({ "d": include_deleted })).await;
                        let (mut named, mut counted) = (BTreeSet::new(), Vec::new());
                        authors(&data, &mut named);
                        totals(&data, &mut counted);
                        seen.push((named, counted));
                    }
                    let [(hidden, hidden_counts), (shown, shown_counts)] = &seen[..] else {
                        unreachable!()
                    };
                    assert_eq!(
                        hidden,
                        &BTreeSet::from(["live".to_owned()]),
                        "{name}: {query}"
                    );
                    assert_eq!(
                        shown,
                        &BTreeSet::from(["deleted".to_owned(), "live".to_owned()]),
                        "{name} with includeDeleted: {query}"
                    );
                    // The two sessions hold alike records: asked for, each count doubles.
                    let doubled: Vec<i64> = hidden_counts.iter().map(|n| n * 2).collect();
                    assert!(hidden_counts.iter().all(|n| *n > 0), "{name}: {query}");
                    assert_eq!(shown_counts, &doubled, "{name}: {query}");
                    probed += 1;
                }
            }
            Some(Coverage::ById(query)) => {
                let data = app.data(query, json!({ "id": deleted_id })).await;
                let (mut named, mut text) = (BTreeSet::new(), data.to_string());
                authors(&data, &mut named);
                assert_eq!(
                    named,
                    BTreeSet::from(["deleted".to_owned()]),
                    "{name}: {data}"
                );
                text.retain(|c| !c.is_whitespace());
                assert!(!text.contains("\"deletedAt\":null"), "{name}: {data}");
                assert!(text.contains("\"deletedAt\":\""), "{name}: {data}");
                probed += 1;
            }
            Some(Coverage::Unrelated(why)) => {
                assert!(
                    !takes_include_deleted,
                    "{name} takes `includeDeleted`, so it lists session records ({why}?)"
                );
            }
        }
    }
    assert!(
        uncovered.is_empty(),
        "root fields not covered by this test (a list of sessions or their records needs \
         `includeDeleted` and a query here; anything else, the reason it lists none): \
         {uncovered:?}"
    );
    assert_eq!(probed, 12, "every list query and look-up ran");
    app.stop().await;
}

/// Any reader may ask for deleted sessions' records, on every list alike (deleting and
/// restoring is what takes an admin).
#[tokio::test]
async fn a_reader_may_include_deleted_sessions_records() {
    let app = TestApp::start_with(HttpOptions {
        auth: AuthOptions {
            mode: AuthMode::Tokens,
            ..AuthOptions::default()
        },
        ..HttpOptions::default()
    })
    .await;
    let session = fixtures::investigation(app.store.pool(), Utc::now()).await;
    fixtures::notification(app.store.pool(), session, "email", "pending").await;
    let mut app = app;
    app.token = Some(app.token("admin", Role::Admin, None).await);
    app.data(
        "mutation ($id: ID!) { deleteSession(id: $id) { deletedAt } }",
        json!({ "id": session.to_string() }),
    )
    .await;
    app.token = Some(app.token("reader", Role::Reader, None).await);
    let lists = "query ($d: Boolean!) {
        sessions(filter: { includeDeleted: $d }) { totalCount }
        sessionStats(filter: { includeDeleted: $d }) { groups(by: [AUTHOR]) { totalCount } }
        mcpInteractions(includeDeleted: $d) { totalCount }
        notifications(filter: { includeDeleted: $d }) { totalCount } }";
    let hidden = app.data(lists, json!({ "d": false })).await;
    let shown = app.data(lists, json!({ "d": true })).await;
    let counts = |data: &Value| {
        [
            &data["sessions"]["totalCount"],
            &data["sessionStats"]["groups"]["totalCount"],
            &data["mcpInteractions"]["totalCount"],
            &data["notifications"]["totalCount"],
        ]
        .map(|n| n.as_i64().unwrap())
    };
    assert_eq!(counts(&hidden), [0, 0, 0, 0]);
    assert_eq!(counts(&shown), [1, 1, 7, 1]);
    app.stop().await;
}
