//! Full-text search over sessions and their timelines, alert data containment, and the indexes
//! that serve them at volume.

use serde_json::{Value, json};

use crate::common::fixtures::{self, NewSession};
use crate::common::{TestApp, TestDb};
use crate::write_api::Agent;

const SEARCH: &str = "query ($q: String, $first: Int, $after: String, $order: SessionOrder,
    $type: String, $contains: JSON) {
  sessions(first: $first, after: $after, orderBy: $order,
           filter: { search: $q, alertType: $type, alertDataContains: $contains }) {
    totalCount pageInfo { hasNextPage endCursor }
    edges { searchRank node { uuid alertType }
      matches { field rank fragment highlights { start end } event { uuid } } } } }";

/// The sessions of a search, in order: (uuid, its matches).
async fn search(app: &TestApp, variables: Value) -> (Vec<String>, Vec<Value>, i64) {
    let data = app.data(SEARCH, variables).await;
    let edges = data["sessions"]["edges"].as_array().unwrap().clone();
    (
        edges
            .iter()
            .map(|e| e["node"]["uuid"].as_str().unwrap().to_owned())
            .collect(),
        edges,
        data["sessions"]["totalCount"].as_i64().unwrap(),
    )
}

/// The highlighted words of a match, as written in its fragment.
fn highlighted(m: &Value) -> Vec<String> {
    let chars: Vec<char> = m["fragment"].as_str().unwrap().chars().collect();
    m["highlights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let (start, end) = (h["start"].as_u64().unwrap(), h["end"].as_u64().unwrap());
            chars[start as usize..end as usize].iter().collect()
        })
        .collect()
}

async fn session_with_alert_data(a: &Agent<'_>, alert_type: &str, data: Value) -> String {
    let d = a
        .ok(
            "mutation ($t: String!, $d: JSON) { createSession(input: { alertType: $t,
               chainId: \"k8s\", alertData: $d }) { uuid } }",
            json!({ "t": alert_type, "d": data }),
        )
        .await;
    d["createSession"]["uuid"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_search_ranks_stemmed_matches_and_says_where_each_matched() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let pool = app.store.pool();
    let in_analysis = fixtures::session(
        pool,
        NewSession {
            alert_type: "DiskPressure",
            final_analysis: Some("Refunds were delayed: the refund worker's disk filled up."),
            ..NewSession::default()
        },
    )
    .await
    .to_string();
    let in_type = fixtures::session(
        pool,
        NewSession {
            alert_type: "RefundErrorRate",
            ..NewSession::default()
        },
    )
    .await
    .to_string();
    let in_data =
        session_with_alert_data(&a, "HighLatency", json!({ "service": "refund-api" })).await;
    let unrelated =
        session_with_alert_data(&a, "HighLatency", json!({ "service": "search" })).await;
    // A timeline event: searchable once it finishes, not while it streams.
    let in_event = a.session().await;
    let stage = a.stage(&in_event, 0, 1, None).await;
    let exec = a.execution(&stage, 1, "Kubernetes").await;
    a.start(&exec).await;
    let (event, _) = a.event(&exec, "STREAMING").await;
    a.append(
        &event,
        0,
        "Checked the queue: the refund consumer backed up.",
    )
    .await;

    let variables = |q: &str| json!({ "q": q, "first": 10, "order": { "field": "RELEVANCE" } });
    let (found, _, total) = search(&app, variables("refund")).await;
    assert_eq!(
        found,
        [in_type.as_str(), in_analysis.as_str(), in_data.as_str()],
        "still streaming"
    );
    assert_eq!(total, 3);

    a.ok(
        "mutation ($e: ID!) { finishTimelineEvent(input: { eventId: $e, status: COMPLETED }) { uuid } }",
        json!({ "e": event }),
    )
    .await;
    // "refunds" and "refund" stem alike; a hit in the alert type weighs most, then the
    // analysis, the alert data, and a timeline event.
    let (found, edges, total) = search(&app, variables("refunds")).await;
    assert_eq!(
        found,
        [
            in_type.as_str(),
            in_analysis.as_str(),
            in_data.as_str(),
            in_event.as_str()
        ]
    );
    assert_eq!(total, 4);
    let ranks: Vec<f64> = edges
        .iter()
        .map(|e| e["searchRank"].as_f64().unwrap())
        .collect();
    assert!(ranks.windows(2).all(|w| w[0] > w[1]), "{ranks:?}");
    let first_match = |i: usize| edges[i]["matches"][0].clone();
    assert_eq!(first_match(0)["field"], "ALERT_TYPE");
    assert_eq!(highlighted(&first_match(0)), ["Refund"]);
    assert_eq!(first_match(1)["field"], "FINAL_ANALYSIS");
    assert_eq!(highlighted(&first_match(1)), ["Refunds", "refund"]);
    let fragment = first_match(1)["fragment"].as_str().unwrap().to_owned();
    assert!(
        fragment.starts_with("Refunds were delayed: the refund worker's disk"),
        "{fragment}"
    );
    assert_eq!(first_match(2)["field"], "ALERT_DATA");
    assert_eq!(first_match(3)["field"], "TIMELINE_EVENT");
    assert_eq!(first_match(3)["event"]["uuid"], event.as_str());
    assert_eq!(highlighted(&first_match(3)), ["refund"]);
    for edge in &edges {
        assert_eq!(edge["matches"].as_array().unwrap().len(), 1, "{edge}");
    }

    // Pages by relevance, without overlap.
    let one = app
        .data(
            SEARCH,
            json!({ "q": "refund", "first": 2, "order": { "field": "RELEVANCE" } }),
        )
        .await;
    let after = one["sessions"]["pageInfo"]["endCursor"].clone();
    let (rest, _, _) = search(
        &app,
        json!({ "q": "refund", "first": 10, "after": after, "order": { "field": "RELEVANCE" } }),
    )
    .await;
    assert_eq!(rest, [in_data.as_str(), in_event.as_str()]);

    // Web search syntax, other filters and orders, and no search.
    let (found, _, _) = search(&app, json!({ "q": "refund -disk", "first": 10, "order": { "field": "CREATED_AT", "direction": "ASC" } })).await;
    assert_eq!(
        found,
        [in_type.as_str(), in_data.as_str(), in_event.as_str()]
    );
    let (found, _, _) = search(&app, json!({ "q": "\"refund worker\"", "first": 10 })).await;
    assert_eq!(found, [in_analysis.as_str()]);
    let (found, _, _) = search(
        &app,
        json!({ "q": "refund", "type": "HighLatency", "first": 10 }),
    )
    .await;
    assert_eq!(found, [in_data.as_str()]);
    let (found, _, _) = search(&app, json!({ "q": "refund", "first": 10, "order": { "field": "CREATED_AT", "direction": "ASC" } })).await;
    assert_eq!(
        found,
        [
            in_analysis.as_str(),
            in_type.as_str(),
            in_data.as_str(),
            in_event.as_str()
        ]
    );
    let (found, edges, _) = search(&app, json!({ "first": 10 })).await;
    assert_eq!(found.len(), 5);
    assert!(found.contains(&unrelated));
    assert!(
        edges
            .iter()
            .all(|e| e["searchRank"].is_null() && e["matches"] == json!([]))
    );
    app.stop().await;
}

#[tokio::test]
async fn long_texts_are_searchable_up_to_their_cut_and_never_refused() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let session = a.session().await;
    let stage = a.stage(&session, 0, 1, None).await;
    let exec = a.execution(&stage, 1, "Kubernetes").await;
    a.start(&exec).await;
    // The worst case for a tsvector's size: distinct one-character words of 4-byte
    // characters, 200,000 characters in all, with one word near the start and one past the
    // 150,000 characters indexed.
    let words: String = (0..100_000u32)
        .map(|i| char::from_u32(0x20000 + i % 40_000).unwrap().to_string() + " ")
        .collect();
    let chars: Vec<char> = words.chars().collect();
    let content = format!(
        "zanzibar {} quetzal",
        chars[..199_980].iter().collect::<String>()
    );
    let d = a
        .ok(
            "mutation ($e: ID!, $c: String!) { createTimelineEvent(input: { executionId: $e,
               eventType: LLM_RESPONSE, status: COMPLETED, content: $c }) { uuid } }",
            json!({ "e": exec, "c": content }),
        )
        .await;
    assert!(d["createTimelineEvent"]["uuid"].is_string());
    let (found, _, _) = search(&app, json!({ "q": "zanzibar", "first": 5 })).await;
    assert_eq!(found, [session.as_str()]);
    let (found, _, _) = search(&app, json!({ "q": "quetzal", "first": 5 })).await;
    assert!(found.is_empty(), "a word past the cut is not indexed");
    app.stop().await;
}

#[tokio::test]
async fn alert_data_filters_by_containment() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let eu = session_with_alert_data(
        &a,
        "PodCrashLooping",
        json!({ "cluster": "prod-eu", "labels": { "team": "payments", "tier": 1 } }),
    )
    .await;
    let us = session_with_alert_data(&a, "PodCrashLooping", json!({ "cluster": "prod-us" })).await;
    let both = session_with_alert_data(
        &a,
        "HighLatency",
        json!({ "cluster": "prod-eu", "tags": ["db", "slow"] }),
    )
    .await;
    let filter = |contains: Value| json!({ "first": 10, "contains": contains, "order": { "field": "CREATED_AT", "direction": "ASC" } });
    let (found, _, total) = search(&app, filter(json!({ "cluster": "prod-eu" }))).await;
    assert_eq!((found, total), (vec![eu.clone(), both.clone()], 2));
    let (found, _, _) = search(&app, filter(json!({ "labels": { "team": "payments" } }))).await;
    assert_eq!(found, [eu.as_str()]);
    let (found, _, _) = search(&app, filter(json!({ "tags": ["slow"] }))).await;
    assert_eq!(found, [both.as_str()]);
    let (found, _, _) = search(&app, filter(json!({ "cluster": "prod-us" }))).await;
    assert_eq!(found, [us.as_str()]);
    let (found, _, _) = search(
        &app,
        filter(json!({ "cluster": "prod-eu", "labels": { "tier": 2 } })),
    )
    .await;
    assert!(found.is_empty());
    let (found, _, _) = search(&app, filter(json!({}))).await;
    assert_eq!(found.len(), 3);
    app.stop().await;
}

#[tokio::test]
async fn searches_filters_and_orders_read_their_indexes_at_volume() {
    use casefile::store::page::Slice;
    use casefile::store::search_words::{MAX_SEARCH_ALTERNATIVES, MAX_SEARCH_WORDS, SearchWords};
    use casefile::store::sessions::{SessionFilter, SessionSort};

    let app = TestApp::start().await;
    let mut conn = app.store.pool().acquire().await.unwrap();
    // Rows as an import would write them (the live-change triggers are not measured here):
    // 100,000 sessions, each with an agent and two finished timeline events of about 500
    // bytes, a short text and its call's arguments (a table of 100-byte rows is so cheap to
    // scan that, split in four by session, a partition's sequential scan costs the planner
    // as much as its index).
    for statement in [
        "SET session_replication_role = replica",
        "INSERT INTO sessions (id, alert_type, chain_id, alert_data, final_analysis, status, \
             created_at, updated_at, completed_at) \
         SELECT gen_random_uuid(), \
             (ARRAY['PodCrashLooping', 'HighLatency', 'DiskPressure', 'CertExpiry'])[1 + n % 4], \
             'k8s', jsonb_build_object('cluster', 'prod-' || n % 50, 'namespace', 'ns-' || n % 997), \
             'Root cause: ' || (ARRAY['the memory limit', 'a connection pool', 'the disk quota', \
                 'an expired certificate', 'slow DNS'])[1 + n % 5] || ' on node ' || n \
                 || CASE WHEN n % 2000 = 0 THEN ', after a zanzibar rollout' ELSE '' END, \
             'completed', now() - make_interval(secs => n), now() - make_interval(secs => n), \
             now() - make_interval(secs => n - 60) \
         FROM generate_series(1, 100000) n",
        "INSERT INTO stages (id, session_id, stage_name, stage_index, expected_agent_count) \
         SELECT gen_random_uuid(), id, 'investigate', 0, 1 FROM sessions",
        "INSERT INTO agent_executions (id, stage_id, session_id, agent_name, agent_index, \
             iteration_strategy, agent_type, depth) \
         SELECT gen_random_uuid(), id, session_id, 'KubernetesAgent', 1, 'react', \
             'global_supervisor', 0 FROM stages",
        "INSERT INTO timeline_events (id, session_id, stage_id, execution_id, sequence_number, \
             event_type, status, content, metadata) \
         SELECT gen_random_uuid(), e.session_id, e.stage_id, e.id, k, 'llm_response', 'completed', \
             'Checked the pods of the deployment; restarts ' || k || ' and ' || \
             CASE WHEN get_byte(uuid_send(e.id), 14) = 0 THEN 'a zanzibar sidecar' \
                  ELSE 'nothing else' END, \
             jsonb_build_object('arguments', repeat('namespace=prod pod=refund-worker-7 ', 12)) \
         FROM agent_executions e, generate_series(1, 2) k",
        "RESET session_replication_role",
        "ANALYZE sessions, timeline_events",
    ] {
        sqlx::query(statement).execute(&mut *conn).await.unwrap();
    }
    drop(conn);

    let slice = Slice {
        after: None,
        before: None,
        size: 20,
        from_end: false,
    };
    let by_words = SessionFilter {
        search: Some(SearchWords::parse("zanzibar").unwrap()),
        ..SessionFilter::default()
    };
    let contains = SessionFilter {
        // Two sessions of 100,000 (n = 7 and 49,857): too few for ANALYZE's sample to
        // mistake for common, so the plan does not depend on which rows it sampled.
        alert_data_contains: Some(json!({ "namespace": "ns-7", "cluster": "prod-7" })),
        ..SessionFilter::default()
    };
    let cases = [
        (
            &by_words,
            SessionSort::Relevance,
            &[
                "sessions_search_document_idx",
                "timeline_events_search_document_idx",
            ][..],
        ),
        (
            &by_words,
            SessionSort::CreatedAt,
            &[
                "sessions_search_document_idx",
                "timeline_events_search_document_idx",
            ],
        ),
        (
            &contains,
            SessionSort::CreatedAt,
            &["sessions_alert_data_idx"],
        ),
        (
            &SessionFilter::default(),
            SessionSort::UpdatedAt,
            &["sessions_updated_at_idx"],
        ),
        (
            &SessionFilter::default(),
            SessionSort::CompletedAt,
            &["sessions_completed_at_idx"],
        ),
    ];
    for (filter, sort, indexes) in cases {
        let plan = app
            .store
            .explain_list_sessions(filter, sort, true, &slice)
            .await
            .unwrap();
        for index in indexes {
            assert!(
                plan.contains(index),
                "{sort:?} does not read {index}:\n{plan}"
            );
        }
        assert!(
            !plan.contains("Seq Scan"),
            "{sort:?} scans a table:\n{plan}"
        );
        println!("{sort:?} at 100,000 sessions:\n{plan}\n");
    }
    // Every shape a search may take, up to its limits, is read from both indexes: a phrase,
    // alternatives (as many as allowed), an exclusion, as many words as allowed.
    let most_alternatives = std::iter::once("zanzibar".to_owned())
        .chain((1..MAX_SEARCH_ALTERNATIVES).map(|i| format!("quetzal{i}")))
        .collect::<Vec<_>>()
        .join(" or ");
    let most_words = std::iter::once("zanzibar".to_owned())
        .chain((1..MAX_SEARCH_WORDS).map(|i| format!("quetzal{i}")))
        .collect::<Vec<_>>()
        .join(" ");
    for words in [
        "\"zanzibar rollout\"",
        "zanzibar or quetzal",
        "zanzibar -sidecar",
        &most_alternatives,
        &most_words,
    ] {
        let filter = SessionFilter {
            search: Some(SearchWords::parse(words).unwrap()),
            ..SessionFilter::default()
        };
        let plan = app
            .store
            .explain_list_sessions(&filter, SessionSort::Relevance, true, &slice)
            .await
            .unwrap();
        for index in [
            "sessions_search_document_idx",
            "timeline_events_search_document_idx",
        ] {
            assert!(
                plan.contains(index),
                "{words} does not read {index}:\n{plan}"
            );
        }
        assert!(!plan.contains("Seq Scan"), "{words} scans a table:\n{plan}");
    }
    // What the refused shapes would cost: no index can find what only excluded words (or an
    // alternative of them) match, so every timeline event is read.
    for words in [
        "-zanzibar -sidecar",
        "zanzibar or -sidecar",
        "-\"zanzibar rollout\"",
    ] {
        assert!(SearchWords::parse(words).is_err(), "{words}");
        let plan: Vec<String> = sqlx::query_scalar(
            "EXPLAIN SELECT id FROM timeline_events \
             WHERE search_document @@ websearch_to_tsquery('casefile_english', $1)",
        )
        .bind(words)
        .fetch_all(app.store.pool())
        .await
        .unwrap();
        let plan = plan.join("\n");
        assert!(
            plan.contains("Seq Scan on timeline_events"),
            "{words}:\n{plan}"
        );
    }
    // And they find what they should.
    let (found, _, total) = search(
        &app,
        json!({ "q": "zanzibar", "first": 5, "order": { "field": "RELEVANCE" } }),
    )
    .await;
    assert_eq!(found.len(), 5);
    assert!(total > 50, "{total}");
}

/// A search is refused by its shape, naming the rule, wherever the sessions filter is read
/// (`sessions`, and `sessionStats` with the same filter); the everyday forms are served.
#[tokio::test]
async fn search_shapes_the_index_cannot_serve_are_refused_by_name() {
    let app = TestApp::start().await;
    let pool = app.store.pool();
    let mut found = std::collections::HashMap::new();
    for (name, analysis) in [
        ("disk", "Disk pressure on node 7: the kubelet evicted pods."),
        ("test", "Disk pressure on the test cluster, nothing lost."),
        ("oom", "OOM: the refund worker was killed."),
        (
            "crash",
            "The refund worker kept crashing after the rollout.",
        ),
    ] {
        let id = fixtures::session(
            pool,
            NewSession {
                alert_type: "NodeAlert",
                final_analysis: Some(analysis),
                ..NewSession::default()
            },
        )
        .await;
        found.insert(id.to_string(), name);
    }
    let names = |ids: Vec<String>| {
        let mut names: Vec<&str> = ids.iter().map(|id| found[id.as_str()]).collect();
        names.sort_unstable();
        names
    };
    for (words, expected) in [
        ("\"disk pressure\"", vec!["disk", "test"]),
        ("\"pressure disk\"", vec![]),
        ("oom or crash", vec!["crash", "oom"]),
        ("disk -test", vec!["disk"]),
        ("\"refund worker\" -rollout or evicted", vec!["disk", "oom"]),
    ] {
        let (ids, _, _) = search(&app, json!({ "q": words, "first": 10 })).await;
        assert_eq!(names(ids), expected, "{words}");
    }

    let hundreds = vec!["oom"; 240].join(" ");
    let long_phrase = format!("\"{}\"", vec!["disk pressure"; 17].join(" "));
    let alternatives = (1..=9)
        .map(|i| format!("w{i}"))
        .collect::<Vec<_>>()
        .join(" or ");
    let refused = [
        ("-foo -bar", "needs a word to find that is not excluded"),
        (
            "-\"disk pressure\"",
            "needs a word to find that is not excluded",
        ),
        ("disk or -test", "each alternative of `or`"),
        (
            "\"<b></b>\" -test",
            "needs a word to find that is not excluded",
        ),
        (hundreds.as_str(), "240 words; at most 32"),
        (long_phrase.as_str(), "34 words; at most 32"),
        (
            alternatives.as_str(),
            "joins 9 alternatives with `or`; at most 8",
        ),
        ("\"!!! ???\"", "no word to find"),
        ("disk --test", "`-` twice in a row"),
    ];
    let stats =
        "query ($q: String) { sessionStats(filter: { search: $q }) { groups { totalCount } } }";
    for (words, rule) in refused {
        for query in [SEARCH, stats] {
            let (code, message) = app.error(query, json!({ "q": words, "first": 10 })).await;
            assert_eq!(code, "BAD_USER_INPUT", "{words}: {message}");
            assert!(message.contains(rule), "{words}: {message}");
        }
    }
    app.stop().await;
}

/// The search's reading of its syntax against the database's own: every search accepted,
/// among all combinations of up to three pieces of the syntax and its edge cases (separators,
/// quotes, `or`, exclusions, markup, protocols, characters that are not letters, spaces that
/// are not ASCII), is one `websearch_to_tsquery` reads with a word the index can look up
/// (`querytree` is not `T`, the query is not empty) and of bounded size.
#[tokio::test]
async fn every_accepted_search_is_one_the_index_serves() {
    use casefile::store::search_words::{MAX_SEARCH_WORDS, SearchWords};

    let pieces = [
        "foo", "Bar", "é", "1", "-", "\"", "or", "OR", " ", "!", "(", ")", "<", "&", "|", ":",
        "://", "http", "<b>", "&amp;", "²", "😀", "٣", "_", ".", "a-b", "\u{3000}", "\u{a0}",
        "orx", "or-",
    ];
    let mut searches: Vec<String> = Vec::new();
    for a in pieces {
        searches.push(a.to_owned());
        for b in pieces {
            searches.push(format!("{a}{b}"));
            for c in pieces {
                searches.push(format!("{a}{b}{c}"));
            }
        }
    }
    // At the limits: 32 words, 8 alternatives, a 200-character term.
    searches.push(vec!["a-b"; 16].join(" "));
    searches.push(format!("-\"{}\" x", vec!["w"; 31].join(" ")));
    searches.push(["x -y"; 8].join(" or "));
    searches.push(format!("{} -z", "ab".repeat(100)));
    let accepted: Vec<String> = searches
        .iter()
        .filter_map(|s| SearchWords::parse(s).ok())
        .map(|w| w.as_str().to_owned())
        .collect();
    assert!(
        accepted.len() > 5_000 && searches.len() - accepted.len() > 5_000,
        "{} of {} accepted",
        accepted.len(),
        searches.len()
    );

    let db = TestDb::start().await;
    let mut conn = db.db.pool().acquire().await.unwrap();
    sqlx::query("SET client_min_messages = warning")
        .execute(&mut *conn)
        .await
        .unwrap();
    let unserved: Vec<(String, String)> = sqlx::query_as(
        "SELECT s, q::text FROM unnest($1::text[]) s, \
             LATERAL websearch_to_tsquery('casefile_english', s) q \
         WHERE numnode(q) = 0 OR querytree(q) = 'T' OR numnode(q) > $2",
    )
    .bind(&accepted)
    .bind(4 * MAX_SEARCH_WORDS as i32)
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    assert!(unserved.is_empty(), "accepted, not served: {unserved:#?}");
    drop(conn);
    db.stop().await;
}
