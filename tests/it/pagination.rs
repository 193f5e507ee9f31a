//! Connections paged both ways: `last`/`before` give exactly the edges (and cursors) that
//! `first`/`after` give, in the same order, with `hasPreviousPage` and `hasNextPage` right at
//! both ends and between, in both directions.

use serde_json::{Value, json};

use crate::common::TestApp;
use crate::common::fixtures::{self, At, NewSession};
use crate::query_api::seed_sessions;
use crate::write_api::Agent;

/// What a connection's selection needs: its page info, and each edge's cursor and node `key`
/// (the node's field `key`).
fn connection(key: &str) -> String {
    format!(
        "pageInfo {{ hasPreviousPage hasNextPage startCursor endCursor }}
         edges {{ cursor node {{ key: {key} }} }}"
    )
}

fn sessions_query() -> String {
    let connection = connection("uuid");
    format!(
        "query ($first: Int, $after: String, $last: Int, $before: String, $order: SessionOrder,
                $filter: SessionFilterInput) {{
           sessions(first: $first, after: $after, last: $last, before: $before, orderBy: $order,
                    filter: $filter) {{ {connection} }} }}"
    )
}

/// The timeline of a session, stage or execution, by global ID.
fn timeline_query() -> String {
    let args = "first: $first, after: $after, last: $last, before: $before";
    let connection = connection("sequenceNumber");
    format!(
        "query ($id: ID!, $first: Int, $after: String, $last: Int, $before: String) {{
           node(id: $id) {{
             ... on Session {{ timeline({args}) {{ {connection} }} }}
             ... on Stage {{ timeline({args}) {{ {connection} }} }}
             ... on AgentExecution {{ timeline({args}) {{ {connection} }} }} }} }}"
    )
}

/// One page, as read.
#[derive(Debug, Clone, PartialEq)]
struct Page {
    /// (cursor, node key) of each edge.
    edges: Vec<(String, String)>,
    previous: bool,
    next: bool,
    start: Value,
    end: Value,
}

impl Page {
    fn of(connection: &Value) -> Page {
        let info = &connection["pageInfo"];
        Page {
            edges: connection["edges"]
                .as_array()
                .unwrap_or_else(|| panic!("a connection: {connection}"))
                .iter()
                .map(|e| {
                    (
                        e["cursor"].as_str().unwrap().to_owned(),
                        e["node"]["key"].to_string().replace('"', ""),
                    )
                })
                .collect(),
            previous: info["hasPreviousPage"].as_bool().unwrap(),
            next: info["hasNextPage"].as_bool().unwrap(),
            start: info["startCursor"].clone(),
            end: info["endCursor"].clone(),
        }
    }

    fn keys(&self) -> Vec<String> {
        self.edges.iter().map(|(_, k)| k.clone()).collect()
    }

    /// (hasPreviousPage, hasNextPage).
    fn flags(&self) -> (bool, bool) {
        (self.previous, self.next)
    }
}

/// Reads pages of one connection: `variables` are the page arguments.
trait Connection {
    async fn page(&self, variables: Value) -> Page;
}

struct Sessions<'a> {
    app: &'a TestApp,
    order: Value,
    filter: Value,
}

impl Connection for Sessions<'_> {
    async fn page(&self, mut variables: Value) -> Page {
        variables["order"] = self.order.clone();
        variables["filter"] = self.filter.clone();
        Page::of(&self.app.data(&sessions_query(), variables).await["sessions"])
    }
}

struct Timeline<'a> {
    app: &'a TestApp,
    /// Global ID of the session, stage or execution.
    id: String,
}

impl Timeline<'_> {
    /// The content of event `seq` in the page `variables` ask for, if it is there.
    async fn content_of(&self, seq: i64, mut variables: Value) -> Option<String> {
        variables["id"] = json!(self.id);
        let query = "query ($id: ID!, $first: Int, $after: String, $last: Int, $before: String) {
            node(id: $id) { ... on Session { timeline(first: $first, after: $after, last: $last, before: $before) {
              edges { node { sequenceNumber content } } } } } }";
        let data = self.app.data(query, variables).await;
        data["node"]["timeline"]["edges"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["node"]["sequenceNumber"] == seq)
            .map(|e| e["node"]["content"].as_str().unwrap().to_owned())
    }
}

impl Connection for Timeline<'_> {
    async fn page(&self, mut variables: Value) -> Page {
        variables["id"] = json!(self.id);
        Page::of(&self.app.data(&timeline_query(), variables).await["node"]["timeline"])
    }
}

/// The whole list, read `size` at a time forward (`first`/`after`) or backward
/// (`last`/`before`), its edges in list order; each page's flags are checked on the way: there
/// are pages behind every page but the first read, and ahead of every page but the last.
async fn walk(connection: &impl Connection, size: i64, backward: bool) -> Vec<(String, String)> {
    let mut pages = Vec::new();
    let mut cursor = Value::Null;
    loop {
        let page = if backward {
            connection
                .page(json!({ "last": size, "before": cursor }))
                .await
        } else {
            connection
                .page(json!({ "first": size, "after": cursor }))
                .await
        };
        let (behind, ahead) = if backward {
            (page.next, page.previous)
        } else {
            (page.previous, page.next)
        };
        assert_eq!(
            behind,
            !pages.is_empty(),
            "page {} ({size}, backward: {backward})",
            pages.len()
        );
        cursor = if backward {
            page.start.clone()
        } else {
            page.end.clone()
        };
        pages.push(page.edges);
        if !ahead {
            break;
        }
        assert!(pages.len() < 100, "the walk ends");
    }
    if backward {
        pages.reverse();
    }
    let edges: Vec<_> = pages.concat();
    // Exact flags: no trailing empty page, every page full but the last read.
    assert_eq!(
        pages.len(),
        edges.len().div_ceil(size as usize).max(1),
        "{size}, backward: {backward}"
    );
    edges
}

/// Backward, in several page sizes, gives the forward list: its nodes, order and cursors.
async fn both_ways_alike(connection: &impl Connection, what: &str) -> Vec<(String, String)> {
    let forward = walk(connection, 100, false).await;
    for size in [1, 2, 4] {
        assert_eq!(
            walk(connection, size, false).await,
            forward,
            "{what}: forward by {size}"
        );
        assert_eq!(
            walk(connection, size, true).await,
            forward,
            "{what}: backward by {size}"
        );
    }
    forward
}

#[tokio::test]
async fn sessions_page_backward_to_the_forward_list_in_every_ordering() {
    let app = TestApp::start().await;
    let ids = seed_sessions(&app).await;
    for field in ["CREATED_AT", "STATUS", "ALERT_TYPE", "AUTHOR", "DURATION"] {
        for direction in ["ASC", "DESC"] {
            let sessions = Sessions {
                app: &app,
                order: json!({ "field": field, "direction": direction }),
                filter: Value::Null,
            };
            let list = both_ways_alike(&sessions, &format!("{field} {direction}")).await;
            assert_eq!(list.len(), ids.len());
        }
    }
    // The default order (newest first) too.
    let newest_first = Sessions {
        app: &app,
        order: Value::Null,
        filter: Value::Null,
    };
    assert_eq!(
        both_ways_alike(&newest_first, "default").await.len(),
        ids.len()
    );
    app.stop().await;
}

#[tokio::test]
async fn page_info_is_exact_at_both_ends_and_between_in_both_directions() {
    let app = TestApp::start().await;
    seed_sessions(&app).await;
    let sessions = Sessions {
        app: &app,
        order: json!({ "field": "DURATION", "direction": "ASC" }),
        filter: Value::Null,
    };
    let all = sessions.page(json!({ "first": 100 })).await;
    let c = |i: usize| json!(all.edges[i].0);
    let keys = |range: std::ops::Range<usize>| -> Vec<String> {
        all.edges[range].iter().map(|(_, k)| k.clone()).collect()
    };
    let (t, f) = (true, false);
    let cases = [
        (json!({ "first": 3 }), 0..3, (f, t)),
        (json!({ "first": 3, "after": c(13) }), 14..17, (t, f)),
        (json!({ "first": 3, "after": c(16) }), 17..17, (t, f)),
        (json!({ "last": 3 }), 14..17, (t, f)),
        (json!({ "last": 3, "before": c(2) }), 0..2, (f, t)),
        (json!({ "last": 3, "before": c(0) }), 0..0, (f, t)),
        (json!({ "last": 3, "before": c(9) }), 6..9, (t, t)),
        (json!({ "first": 3, "after": c(5) }), 6..9, (t, t)),
        // Between two cursors: from either end, and all of it.
        (
            json!({ "first": 2, "after": c(2), "before": c(7) }),
            3..5,
            (t, t),
        ),
        (
            json!({ "last": 2, "after": c(2), "before": c(7) }),
            5..7,
            (t, t),
        ),
        (
            json!({ "first": 10, "after": c(2), "before": c(7) }),
            3..7,
            (t, t),
        ),
        (
            json!({ "last": 10, "after": c(2), "before": c(7) }),
            3..7,
            (t, t),
        ),
        (
            json!({ "first": 10, "after": c(7), "before": c(2) }),
            0..0,
            (t, t),
        ),
        // The whole list, and empty pages at either end.
        (json!({ "first": 17 }), 0..17, (f, f)),
        (json!({ "last": 17 }), 0..17, (f, f)),
        (json!({}), 0..17, (f, f)),
        (json!({ "first": 0 }), 0..0, (f, t)),
        (json!({ "last": 0 }), 17..17, (t, f)),
        // Only `before`: the default page is the first 20 of the list before it.
        (json!({ "before": c(5) }), 0..5, (f, t)),
    ];
    for (args, range, flags) in cases {
        let page = sessions.page(args.clone()).await;
        assert_eq!(page.keys(), keys(range), "{args}");
        assert_eq!(page.flags(), flags, "{args}");
        assert_eq!(
            page.start,
            json!(page.edges.first().map(|e| &e.0)),
            "{args}"
        );
        assert_eq!(page.end, json!(page.edges.last().map(|e| &e.0)), "{args}");
    }

    // Directions mixed: a forward page, backward from its start, forward again from there.
    let forward = sessions.page(json!({ "first": 4, "after": c(3) })).await;
    assert_eq!((forward.keys(), forward.flags()), (keys(4..8), (t, t)));
    let back = sessions
        .page(json!({ "last": 4, "before": forward.start }))
        .await;
    assert_eq!(
        back.edges,
        all.edges[0..4],
        "the same edges, with the same cursors"
    );
    assert_eq!(back.flags(), (f, t));
    let again = sessions
        .page(json!({ "first": 4, "after": back.end }))
        .await;
    assert_eq!(again, forward);
    let shifted = sessions
        .page(json!({ "last": 4, "before": again.end }))
        .await;
    assert_eq!(
        (&shifted.edges[..], shifted.flags()),
        (&all.edges[3..7], (t, t))
    );
    app.stop().await;
}

#[tokio::test]
async fn page_info_counts_only_the_sessions_the_filter_keeps() {
    let app = TestApp::start().await;
    seed_sessions(&app).await;
    // Sessions 3 and 10 (of 17) failed; the first and last of the list did not.
    let failed = json!({ "status": ["FAILED"] });
    for direction in ["ASC", "DESC"] {
        let order = json!({ "field": "CREATED_AT", "direction": direction });
        let all = Sessions {
            app: &app,
            order: order.clone(),
            filter: Value::Null,
        };
        let some = Sessions {
            app: &app,
            order,
            filter: failed.clone(),
        };
        let list = both_ways_alike(&some, direction).await;
        assert_eq!(list.len(), 2);
        // Cursors of the unfiltered list's ends are outside the filtered list:
        // nothing it keeps lies at or beyond them.
        let ends = all.page(json!({ "first": 100 })).await.edges;
        let (head, tail) = (&ends[0].0, &ends[16].0);
        let after_head = some.page(json!({ "first": 5, "after": head })).await;
        assert_eq!(after_head.edges, list, "{direction}");
        assert_eq!(after_head.flags(), (false, false), "{direction}");
        let before_tail = some.page(json!({ "last": 5, "before": tail })).await;
        assert_eq!(before_tail.edges, list, "{direction}");
        assert_eq!(before_tail.flags(), (false, false), "{direction}");
    }
    app.stop().await;
}

/// A session whose two agents (stages A and B) take turns: odd sequence numbers in A, even
/// in B, 11 events. Returns the global IDs of the session, the stages and the executions.
async fn interleaved(app: &TestApp) -> [String; 5] {
    use casefile::api::ids::{NodeType, encode};
    let pool = app.store.pool();
    let session = fixtures::session(pool, NewSession::default()).await;
    let stage_a = fixtures::stage(pool, session, 0, "A", 1).await;
    let stage_b = fixtures::stage(pool, session, 1, "B", 1).await;
    let a = At {
        session,
        stage: stage_a,
        execution: fixtures::execution(pool, session, stage_a, 1, "AgentA", None).await,
    };
    let b = At {
        session,
        stage: stage_b,
        execution: fixtures::execution(pool, session, stage_b, 1, "AgentB", None).await,
    };
    for seq in 1..=11 {
        let at = if seq % 2 == 1 { a } else { b };
        fixtures::event(pool, at, seq, "llm_response", &format!("e{seq}")).await;
    }
    [
        encode(NodeType::Session, session).0,
        encode(NodeType::Stage, stage_a).0,
        encode(NodeType::Stage, stage_b).0,
        encode(NodeType::AgentExecution, a.execution).0,
        encode(NodeType::AgentExecution, b.execution).0,
    ]
}

#[tokio::test]
async fn timelines_of_sessions_stages_and_executions_page_backward_alike() {
    let app = TestApp::start().await;
    let [session, stage_a, stage_b, exec_a, exec_b] = interleaved(&app).await;
    let odd: Vec<String> = (1..=11).step_by(2).map(|s| s.to_string()).collect();
    let even: Vec<String> = (2..=10).step_by(2).map(|s| s.to_string()).collect();
    let all: Vec<String> = (1..=11).map(|s| s.to_string()).collect();
    let timeline = |id: &String| Timeline {
        app: &app,
        id: id.clone(),
    };
    for (id, expected, what) in [
        (&session, &all, "session"),
        (&stage_a, &odd, "stage A"),
        (&stage_b, &even, "stage B"),
        (&exec_a, &odd, "execution A"),
        (&exec_b, &even, "execution B"),
    ] {
        let list = both_ways_alike(&timeline(id), what).await;
        let keys: Vec<String> = list.into_iter().map(|(_, k)| k).collect();
        assert_eq!(&keys, expected, "{what}");
    }

    let (t, f) = (true, false);
    let of = |page: &Page| (page.keys(), page.flags());
    let whole = timeline(&session).page(json!({ "first": 100 })).await;
    let c = |seq: usize| json!(whole.edges[seq - 1].0);
    // Ends and middles of a stage's timeline, with cursors of the session's (one sequence).
    let b = timeline(&stage_b);
    let page = b.page(json!({ "last": 2 })).await;
    assert_eq!(of(&page), (seqs(&[8, 10]), (t, f)));
    let page = b.page(json!({ "last": 2, "before": c(4) })).await;
    assert_eq!(of(&page), (seqs(&[2]), (f, t)));
    let page = b.page(json!({ "last": 2, "before": c(9) })).await;
    assert_eq!(of(&page), (seqs(&[6, 8]), (t, t)));
    let page = b.page(json!({ "first": 2, "after": c(9) })).await;
    assert_eq!(of(&page), (seqs(&[10]), (t, f)));
    let page = b
        .page(json!({ "first": 2, "after": c(1), "before": c(11) }))
        .await;
    assert_eq!(
        of(&page),
        (seqs(&[2, 4]), (f, t)),
        "nothing of B at or before 1"
    );
    let page = b
        .page(json!({ "last": 9, "after": c(1), "before": c(11) }))
        .await;
    assert_eq!(
        of(&page),
        (seqs(&[2, 4, 6, 8, 10]), (f, f)),
        "nothing of B at or after 11"
    );
    let page = b.page(json!({ "last": 0, "before": c(2) })).await;
    assert_eq!(of(&page), (seqs(&[]), (f, t)));

    // Directions mixed on an execution's timeline.
    let a = timeline(&exec_a);
    let forward = a.page(json!({ "first": 2, "after": c(3) })).await;
    assert_eq!(of(&forward), (seqs(&[5, 7]), (t, t)));
    let back = a.page(json!({ "last": 5, "before": forward.start })).await;
    assert_eq!(of(&back), (seqs(&[1, 3]), (f, t)));
    assert_eq!(
        a.page(json!({ "first": 2, "after": back.end })).await,
        forward
    );
    app.stop().await;
}

/// Sequence numbers as node keys.
fn seqs(seqs: &[i64]) -> Vec<String> {
    seqs.iter().map(|s| s.to_string()).collect()
}

/// The `streaming` part of a timeline cursor: sequence number → characters the page showed.
fn streaming_of(cursor: &str) -> Value {
    use base64::Engine as _;
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .unwrap();
    let cursor: Value = serde_json::from_slice(&json).unwrap();
    cursor["timeline"]["streaming"].clone()
}

#[tokio::test]
async fn a_streaming_event_pages_backward_as_forward_and_shows_later_text_again() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let session = a.session().await;
    let stage = a.stage(&session, 0, 1, None).await;
    let exec = a.execution(&stage, 1, "Agent").await;
    a.event(&exec, "COMPLETED").await;
    let (streaming, seq) = a.event(&exec, "STREAMING").await;
    assert_eq!(seq, 2);
    let head = "Looking at the pöd's ✓ ";
    a.append(&streaming, 0, head).await;
    a.event(&exec, "COMPLETED").await;
    a.event(&exec, "COMPLETED").await;
    let gid = casefile::api::ids::encode(
        casefile::api::ids::NodeType::Session,
        session.parse().unwrap(),
    )
    .0;
    let timeline = Timeline { app: &app, id: gid };
    // The latest page, then the one before it: the streaming event's cursor says how much of
    // it was shown, exactly as the forward page with the same edges says.
    let latest = timeline.page(json!({ "last": 2 })).await;
    assert_eq!(latest.keys(), ["3", "4"]);
    assert_eq!(
        streaming_of(&latest.edges[1].0),
        Value::Null,
        "none streams in the page"
    );
    let earlier = timeline
        .page(json!({ "last": 2, "before": latest.start }))
        .await;
    assert_eq!(
        (earlier.keys(), earlier.flags()),
        (seqs(&[1, 2]), (false, true))
    );
    let shown = head.chars().count();
    assert_eq!(streaming_of(&earlier.edges[1].0), json!({ "2": shown }));
    assert_eq!(streaming_of(&earlier.edges[0].0), Value::Null);
    assert_eq!(timeline.page(json!({ "first": 2 })).await, earlier);
    assert_eq!(
        timeline
            .content_of(2, json!({ "last": 2, "before": latest.start }))
            .await
            .as_deref(),
        Some(head)
    );

    // More text arrives. Paging forward again from the backward page's cursors reads it, as
    // forward paging does, and the new cursors say so.
    let tail = "its memory limit is 64Mi";
    a.append(&streaming, shown as i64, tail).await;
    let full = format!("{head}{tail}");
    let again = timeline
        .page(json!({ "first": 3, "after": earlier.start }))
        .await;
    assert_eq!(
        (again.keys(), again.flags()),
        (seqs(&[2, 3, 4]), (true, false))
    );
    assert_eq!(
        streaming_of(&again.edges[0].0),
        json!({ "2": full.chars().count() })
    );
    assert_eq!(
        timeline
            .content_of(2, json!({ "first": 3, "after": earlier.start }))
            .await,
        Some(full.clone())
    );
    // And backward over the same edges: the same cursors.
    assert_eq!(timeline.page(json!({ "last": 3 })).await, again);
    assert_eq!(
        timeline.content_of(2, json!({ "last": 3 })).await,
        Some(full)
    );
    app.stop().await;
}
