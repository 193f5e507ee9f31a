//! The schema hash-partitioned by session (`casefile migrate --partition-by-session`), the
//! layout a distributed PostgreSQL imposes: it keeps everything the plain schema has, a session
//! page reads one partition of each table, and every trigger on a distributed table reads and
//! writes only its own session's partitions. (CI also runs the whole suite on it:
//! `CASEFILE_PARTITION_BY_SESSION`.) Partitioning needs the external PostgreSQL; each test says
//! when it skips without one.

use std::collections::{BTreeMap, BTreeSet};

use casefile::distribution::{Placement, Placements, check, partition_by_session};
use chrono::{Duration, Utc};
use serde_json::{Value, json};
use sqlx::{Connection as _, PgConnection, PgPool};
use uuid::Uuid;

use crate::common::{TestApp, TestDb, fixtures, persistence_of, statements};
use crate::sessions_feed::{change_status, feed};

/// Partitions per table: enough that sessions spread over them.
const PARTITIONS: u32 = 4;

fn distributed_tables() -> Vec<String> {
    Placements::documented()
        .unwrap()
        .iter()
        .filter(|(_, placement)| *placement == Placement::Distributed)
        .map(|(table, _)| table.to_owned())
        .collect()
}

/// Everything of schema `public` a conversion must keep, one line per thing, with partitions
/// and what is cloned onto them left out (a partitioned index is printed `ON ONLY`).
async fn schema(pool: &PgPool) -> BTreeSet<String> {
    const NOT_A_PARTITION: &str =
        "t.relnamespace = 'public'::regnamespace AND NOT t.relispartition";
    let statements = [
        format!(
            "SELECT format('column %s.%s %s%s default %s generated %s', t.relname, a.attname, \
                 format_type(a.atttypid, a.atttypmod), CASE WHEN a.attnotnull THEN ' not null' END, \
                 pg_get_expr(d.adbin, d.adrelid), a.attgenerated) \
             FROM pg_class t JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum > 0 \
               AND NOT a.attisdropped \
             LEFT JOIN pg_attrdef d ON d.adrelid = t.oid AND d.adnum = a.attnum \
             WHERE t.relkind IN ('r', 'p', 'v') AND {NOT_A_PARTITION}"
        ),
        format!(
            "SELECT format('table %s persistence %s', t.relname, {}) \
             FROM pg_class t WHERE t.relkind IN ('r', 'p') AND {NOT_A_PARTITION}",
            persistence_of("t")
        ),
        format!(
            "SELECT format('constraint %s.%s: %s', t.relname, c.conname, pg_get_constraintdef(c.oid)) \
             FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid \
             WHERE c.conparentid = 0 AND {NOT_A_PARTITION}"
        ),
        format!(
            "SELECT format('index %s: %s', i.relname, \
                 replace(pg_get_indexdef(i.oid), ' ON ONLY ', ' ON ')) \
             FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid \
               JOIN pg_class t ON t.oid = x.indrelid WHERE {NOT_A_PARTITION}"
        ),
        format!(
            "SELECT format('trigger %s.%s %s: %s', t.relname, g.tgname, g.tgenabled, \
                 pg_get_triggerdef(g.oid)) \
             FROM pg_trigger g JOIN pg_class t ON t.oid = g.tgrelid \
             WHERE NOT g.tgisinternal AND {NOT_A_PARTITION}"
        ),
        "SELECT format('view %s: %s', c.relname, pg_get_viewdef(c.oid)) FROM pg_class c \
         WHERE c.relkind = 'v' AND c.relnamespace = 'public'::regnamespace"
            .to_owned(),
        "SELECT format('function %s', pg_get_functiondef(p.oid)) FROM pg_proc p \
         WHERE p.pronamespace = 'public'::regnamespace AND p.prokind = 'f'"
            .to_owned(),
        "SELECT format('sequence %s owned by %s.%s', s.relname, d.refobjid::regclass, a.attname) \
         FROM pg_class s JOIN pg_depend d ON d.objid = s.oid AND d.deptype = 'a' \
           AND d.refclassid = 'pg_class'::regclass \
         JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid \
         WHERE s.relkind = 'S'"
            .to_owned(),
    ];
    let mut lines = BTreeSet::new();
    for statement in statements {
        let found: Vec<String> = sqlx::query_scalar(&statement)
            .fetch_all(pool)
            .await
            .unwrap();
        lines.extend(found);
    }
    lines
}

#[tokio::test]
async fn a_schema_partitioned_by_session_keeps_everything_the_plain_one_has() {
    let Some(plain) = TestDb::start_plain_external("the partitioned schema's comparison").await
    else {
        return;
    };
    let partitioned = TestDb::start_plain().await;
    let pool = partitioned.db.pool();
    // Rows written before the conversion are carried over into their sessions' partitions.
    let now = Utc::now();
    let mut sessions = Vec::new();
    for i in 0..6 {
        sessions.push(fixtures::investigation(pool, now - Duration::minutes(i)).await);
    }
    let tables = distributed_tables();
    let rows_before = row_counts(pool, &tables).await;

    let converted = partition_by_session(&partitioned.store(), PARTITIONS)
        .await
        .unwrap();
    assert_eq!(converted.converted, tables);

    let (before, after) = (schema(plain.db.pool()).await, schema(pool).await);
    let lost: Vec<_> = before.difference(&after).collect();
    let gained: Vec<_> = after.difference(&before).collect();
    assert!(
        lost.is_empty() && gained.is_empty(),
        "the partitioned schema differs from the plain one:\nonly plain: {lost:#?}\nonly partitioned: {gained:#?}"
    );
    assert!(before.len() > 500, "{} things compared", before.len());

    // Each distributed table is partitioned by its session column into PARTITIONS
    // partitions, each with every index and row trigger of its table (a statement's trigger
    // fires on the table itself).
    for table in &tables {
        let (kind, key, logged): (String, String, String) = sqlx::query_as(
            "SELECT t.relkind::text, coalesce(pg_get_partkeydef(t.oid), ''), \
                 t.relpersistence::text FROM pg_class t WHERE t.oid = $1::regclass",
        )
        .bind(table)
        .fetch_one(pool)
        .await
        .unwrap();
        let column = casefile::distribution::distribution_column(table);
        // The partitioned table itself is logged whatever its partitions are: PostgreSQL 18
        // refuses an unlogged one.
        assert_eq!(
            (kind.as_str(), key, logged.as_str()),
            ("p", format!("HASH ({column})"), "p")
        );
        // Storage parameters (session_event_runs' fillfactor) and persistence are the
        // partitions'.
        let (parameters, persistence): (Option<Vec<String>>, String) = sqlx::query_as(
            "SELECT reloptions::text[], relpersistence::text FROM pg_class \
             WHERE oid = $1::regclass",
        )
        .bind(table)
        .fetch_one(plain.db.pool())
        .await
        .unwrap();
        if table == "session_event_runs" {
            assert_eq!(parameters, Some(vec!["fillfactor=10".to_owned()]));
        }
        let partitions: Vec<Partition> = sqlx::query_as(
            "SELECT p.relname::text AS name, \
                 (SELECT count(*) FROM pg_index x WHERE x.indrelid = p.oid AND x.indisvalid) \
                     AS indexes, \
                 (SELECT count(*) FROM pg_index x WHERE x.indrelid = $1::regclass) \
                     AS table_indexes, \
                 (SELECT count(*) FROM pg_trigger g JOIN pg_trigger parent ON parent.oid = g.tgparentid \
                    WHERE g.tgrelid = p.oid AND NOT parent.tgisinternal \
                      AND g.tgenabled = parent.tgenabled) AS triggers, \
                 (SELECT count(*) FROM pg_trigger g WHERE g.tgrelid = $1::regclass \
                    AND NOT g.tgisinternal AND g.tgtype & 1 = 1) AS table_triggers, \
                 p.relpersistence::text AS persistence, \
                 p.reloptions::text[] AS parameters \
             FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhrelid \
             WHERE i.inhparent = $1::regclass ORDER BY 1",
        )
        .bind(table)
        .fetch_all(pool)
        .await
        .unwrap();
        let names: Vec<String> = (0..PARTITIONS).map(|k| format!("{table}_p{k}")).collect();
        assert_eq!(
            partitions
                .iter()
                .map(|p| p.name.clone())
                .collect::<Vec<_>>(),
            names
        );
        for p in partitions {
            let name = &p.name;
            assert_eq!(p.parameters, parameters, "{name}'s storage parameters");
            assert_eq!(p.indexes, p.table_indexes, "{name}'s indexes");
            assert_eq!(p.triggers, p.table_triggers, "{name}'s triggers");
            assert_eq!(p.persistence, persistence, "{name} is logged as {table} is");
        }
    }

    // The rows are all there, each session's in one partition of every table.
    assert_eq!(row_counts(pool, &tables).await, rows_before);
    for &session in &sessions {
        let partitions: Vec<String> = sqlx::query_scalar(&partitions_of_a_session(&tables))
            .bind(session)
            .fetch_all(pool)
            .await
            .unwrap();
        assert_eq!(partitions.len(), 1, "{session} lives in {partitions:?}");
    }
    // The keys still distribute (the check reads partitioned tables as tables).
    let catalog = partitioned.store().catalog().await.unwrap();
    assert_eq!(check(&catalog, &Placements::documented().unwrap()), vec![]);

    // Again: nothing to do. Into another count: refused.
    let again = partition_by_session(&partitioned.store(), PARTITIONS)
        .await
        .unwrap();
    assert!(again.converted.is_empty());
    let other = partition_by_session(&partitioned.store(), PARTITIONS + 1)
        .await
        .unwrap_err();
    assert!(
        other
            .to_string()
            .contains("partitioned into 4 partitions, not 5"),
        "{other}"
    );
    plain.stop().await;
    partitioned.stop().await;
}

/// A partition as the catalog describes it, beside its table's counts.
#[derive(sqlx::FromRow)]
struct Partition {
    name: String,
    indexes: i64,
    table_indexes: i64,
    triggers: i64,
    table_triggers: i64,
    persistence: String,
    parameters: Option<Vec<String>>,
}

/// Rows per distributed table.
async fn row_counts(pool: &PgPool, tables: &[String]) -> BTreeMap<String, i64> {
    let mut counts = BTreeMap::new();
    for table in tables {
        let count: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
            .fetch_one(pool)
            .await
            .unwrap();
        counts.insert(table.clone(), count);
    }
    counts
}

/// A statement listing the partitions (`_p2`) a session's rows (`$1`) are in, in every table.
fn partitions_of_a_session(tables: &[String]) -> String {
    let selects: Vec<String> = tables
        .iter()
        .map(|table| {
            let column = casefile::distribution::distribution_column(table);
            format!(
                "SELECT substring(tableoid::regclass::text from '_p[0-9]+$') AS partition \
                 FROM {table} WHERE {column} = $1"
            )
        })
        .collect();
    format!(
        "SELECT DISTINCT partition FROM ({}) u",
        selects.join(" UNION ALL ")
    )
}

/// The session page (every agent's timeline, messages and interactions) and its debug tab.
const SESSION_PAGE: &str = "query Session($id: ID!) { session(id: $id) { uuid alertType status \
    finalAnalysis executiveSummary \
    counts { stages executions timelineEvents messages } tokenUsage { totalTokens } \
    chatsConnection(first: 10) { edges { node { uuid questionsConnection(first: 10) { totalCount edges { node { content } } } } } } \
    llmInteractionsConnection(first: 100) { totalCount edges { node { uuid modelName llmRequest \
        conversationConnection(first: 100) { edges { node { role content } } } } } } \
    mcpInteractionsConnection(first: 100) { edges { node { uuid toolName toolResult } } } \
    stages { uuid name stageIndex status tokenUsage { totalTokens } \
    executions { uuid agentName agentIndex status llmModel subAgents { uuid } parent { uuid } \
    timeline(first: 100) { edges { node { uuid eventType status content } } } \
    messagesConnection(first: 100) { totalCount edges { node { uuid sequenceNumber role content } } } \
    llmInteractionsConnection(first: 100) { edges { node { uuid interactionType modelName inputTokens outputTokens llmResponse } } } \
    mcpInteractionsConnection(first: 100) { edges { node { uuid serverName toolName toolArguments toolResult } } } } } } }";

#[tokio::test]
async fn a_session_pages_statements_read_one_partition_of_each_table() {
    let Some(db) = TestDb::start_plain_external("the session page's partition pruning").await
    else {
        return;
    };
    let pool = db.db.pool().clone();
    let now = Utc::now();
    let mut sessions = Vec::new();
    for i in 0..8 {
        sessions.push(fixtures::investigation(&pool, now - Duration::minutes(i)).await);
    }
    // As many sessions as make the planner read by index, as on a database in use.
    bulk_sessions(&pool, 3_000).await;
    // One of its events still streams, its text in a chunk and in the session's log: the
    // live timeline reads both.
    let session = sessions[3];
    let streaming = streaming_event(&pool, session, "in the log; ", "in a chunk").await;
    partition_by_session(&db.store(), PARTITIONS).await.unwrap();
    // Every statement's plan as it ran (on the plan the connection keeps), sent to the client.
    let name: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(&pool)
        .await
        .unwrap();
    for setting in [
        "session_preload_libraries = 'auto_explain'",
        "auto_explain.log_min_duration = 0",
        "auto_explain.log_analyze = on",
        "auto_explain.log_timing = off",
        "auto_explain.log_level = notice",
    ] {
        sqlx::query(&format!("ALTER DATABASE {name} SET {setting}"))
            .execute(&pool)
            .await
            .unwrap();
    }
    let app = TestApp::start_on(db.reconnected().await, Default::default()).await;
    let tables = distributed_tables();
    let home: String = sqlx::query_scalar(&partitions_of_a_session(&tables))
        .bind(session)
        .fetch_one(app.store.pool())
        .await
        .unwrap();

    let _recording = statements::record_on_this_thread();
    let (page, plans) = read_with_plans(&app, SESSION_PAGE, session).await;
    assert_eq!(page["session"]["uuid"], json!(session), "{page}");
    assert!(page["session"]["stages"].as_array().unwrap().len() > 1);

    let mut read = BTreeSet::new();
    let mut elsewhere = BTreeSet::new();
    // The app's change log follower may read while the page is read (on this thread): it reads
    // every session's changes by design (docs/scale-out.md), and is no statement of the page.
    let follower_reads = |plan: &str| plan.contains("FROM live_changes");
    for plan in plans.iter().filter(|plan| !follower_reads(plan)) {
        for (table, partition, executed) in partitions_in(plan, &tables) {
            if !executed {
                continue;
            }
            read.insert(table.clone());
            if partition != home {
                elsewhere.insert(format!("{table}{partition} in:\n{plan}"));
            }
        }
    }
    assert!(
        elsewhere.is_empty(),
        "the session lives in partitions {home}, but statements read others:\n{}",
        elsewhere.into_iter().collect::<Vec<_>>().join("\n\n")
    );
    // The statements that bind the one session they read as a parameter (the session by id, its
    // stages, their agents, records by key) are pruned as each starts: no other partition's
    // scan is even set up (a session per key prunes only as each key is read).
    let in_one_session: Vec<&String> = (plans.iter())
        .filter(|plan| {
            let text = plan
                .lines()
                .find(|l| l.contains("Query Text:"))
                .unwrap_or("");
            text.contains("unnest($1::uuid[]) AS k (id) CROSS JOIN LATERAL")
                || text.contains("FROM stages WHERE session_id = $1")
                || text.contains("FROM sessions t WHERE id = $1")
        })
        .collect();
    assert!(in_one_session.len() >= 3, "{}", plans.join("\n\n"));
    // Among them the roll-ups: the session's counts and its and its stages' token usage.
    for rollup in ["AS stage_count", "AS unpriced_count"] {
        assert!(
            in_one_session.iter().any(|plan| plan.contains(rollup)),
            "no statement `{rollup}` bound its session:\n{}",
            plans.join("\n\n")
        );
    }
    let set_up_elsewhere: Vec<String> = (in_one_session.iter())
        .flat_map(|plan| {
            (partitions_in(plan, &tables).into_iter())
                .filter(|(_, partition, _)| *partition != home)
                .map(move |(table, partition, _)| format!("{table}{partition} in:\n{plan}"))
        })
        .collect();
    assert!(
        set_up_elsewhere.is_empty(),
        "scans of other partitions set up:\n{}",
        set_up_elsewhere.join("\n\n")
    );
    for table in [
        "sessions",
        "stages",
        "agent_executions",
        "timeline_events",
        "messages",
        "llm_interactions",
        "mcp_interactions",
        "chats",
        "chat_user_messages",
    ] {
        assert!(
            read.contains(table),
            "no statement read {table} ({} plans):\n{}",
            plans.len(),
            plans.join("\n\n")
        );
    }

    // The session page of the read benchmark, which the compiled path answers in one
    // statement (`api::compiled`): every level names the session as its parameter, so no
    // other partition's scan is even set up.
    let (page, plans) = read_with_plans(&app, COMPILED_SESSION_PAGE, session).await;
    assert!(page["session"]["stages"].as_array().unwrap().len() > 1);
    let contents: Vec<&Value> = (page["session"]["stages"].as_array().unwrap().iter())
        .flat_map(|stage| stage["executions"].as_array().unwrap())
        .flat_map(|execution| execution["timeline"]["edges"].as_array().unwrap())
        .filter(|edge| edge["node"]["uuid"] == json!(streaming))
        .map(|edge| &edge["node"]["content"])
        .collect();
    assert_eq!(contents, [&json!("in the log; in a chunk")], "{page}");
    let plans: Vec<String> = (plans.into_iter())
        .filter(|plan| plan.contains("ARRAY(SELECT ROW("))
        .collect();
    assert_eq!(plans.len(), 1, "{}", plans.join("\n\n"));
    let found = partitions_in(&plans[0], &tables);
    let named = [
        "sessions",
        "stages",
        "agent_executions",
        "timeline_events",
        "messages",
        "llm_interactions",
        "mcp_interactions",
    ];
    // No other partition's scan is even set up, a streaming event's text included: the live
    // timeline's sub-selects name the statement's parameter (`store::live_timeline`), where
    // the view `timeline_events_live` named each row's column and so set up a scan of every
    // partition of five tables.
    let elsewhere: Vec<_> = (found.iter()).filter(|(_, p, _)| *p != home).collect();
    assert!(elsewhere.is_empty(), "{elsewhere:?} in:\n{}", plans[0]);
    // The streaming event's text: a chunk, and a run of the session's log.
    for table in [
        "timeline_event_chunks",
        "event_texts_in_log",
        "session_event_runs",
    ] {
        assert!(
            found.iter().any(|(t, _, executed)| t == table && *executed),
            "the streaming event's text was not read from {table}:\n{}",
            plans[0]
        );
    }
    for table in named {
        assert!(
            found.iter().any(|(t, _, executed)| t == table && *executed),
            "the compiled statement read no {table}:\n{}",
            plans[0]
        );
    }
    app.stop().await;
}

/// The read benchmark's session page, which the compiled path answers.
const COMPILED_SESSION_PAGE: &str = "query Session($id: ID!) { session(id: $id) { uuid \
    alertType status finalAnalysis executiveSummary stages { uuid name stageIndex status \
    executions { uuid agentName agentIndex status llmModel \
    timeline(first: 100) { edges { node { uuid eventType status content } } } \
    messagesConnection(first: 100) { edges { node { uuid sequenceNumber role content } } } \
    llmInteractionsConnection(first: 100) { edges { node { uuid modelName llmResponse } } } \
    mcpInteractionsConnection(first: 100) { edges { node { uuid toolName toolResult } } } } } } }";

/// A new streaming event of `session`'s first agent, whose text is `logged` in the session's
/// event log (a grouped append) and then `chunked` in a chunk (an append on its own).
async fn streaming_event(pool: &PgPool, session: Uuid, logged: &str, chunked: &str) -> Uuid {
    let event = Uuid::now_v7();
    sqlx::query(
        "INSERT INTO timeline_events (id, session_id, stage_id, execution_id, sequence_number, \
         event_type, status) \
         SELECT $1, $2, x.stage_id, x.id, \
                (SELECT max(t.sequence_number) + 1 FROM timeline_events t WHERE t.session_id = $2), \
                'llm_response', 'streaming' \
         FROM agent_executions x WHERE x.session_id = $2 ORDER BY x.created_at, x.id LIMIT 1",
    )
    .bind(event)
    .bind(session)
    .execute(pool)
    .await
    .unwrap();
    let stored: Vec<bool> = sqlx::query_scalar(
        "SELECT stored FROM append_timeline_chunks(ARRAY[$1], ARRAY[0::bigint], ARRAY[$2], 100000)",
    )
    .bind(event)
    .bind(logged)
    .fetch_all(pool)
    .await
    .unwrap();
    assert_eq!(stored, [true]);
    let stored: bool =
        sqlx::query_scalar("SELECT stored FROM append_timeline_chunk($1, $2, $3, 100000)")
            .bind(event)
            .bind(logged.chars().count() as i64)
            .bind(chunked)
            .fetch_one(pool)
            .await
            .unwrap();
    assert!(stored);
    event
}

/// The answer to `query` about `session`, and the plans of the statements it ran (sent by
/// `auto_explain` as notices).
async fn read_with_plans(app: &TestApp, query: &str, session: Uuid) -> (Value, Vec<String>) {
    statements::clear();
    let page = app.data(query, json!({ "id": session })).await;
    // Plans arrive as their statements complete.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let plans = (statements::notices().into_iter())
        .filter(|notice| notice.contains("Query Text:"))
        .collect();
    (page, plans)
}

/// `n` small sessions (3 stages of one agent, each with 10 events, 10 messages and 4 LLM and
/// 4 MCP interactions), written as an import writes them (no change recorded).
async fn bulk_sessions(pool: &PgPool, n: i32) {
    let mut conn = pool.acquire().await.unwrap();
    let statements = [
        "SET session_replication_role = replica",
        "INSERT INTO sessions (id, alert_type, chain_id, status, created_at) \
         SELECT gen_random_uuid(), 'bulk', 'kubernetes', 'completed', now() - make_interval(days => 1, secs => n) \
         FROM generate_series(1, $1) n",
        "INSERT INTO stages (id, session_id, stage_index, stage_name, expected_agent_count, status) \
         SELECT gen_random_uuid(), s.id, i, 'stage ' || i, 1, 'completed' \
         FROM sessions s, generate_series(0, 2) i WHERE s.alert_type = 'bulk' AND $1 > 0",
        "INSERT INTO agent_executions (id, session_id, stage_id, agent_name, agent_index, status, \
             iteration_strategy, agent_type, depth) \
         SELECT gen_random_uuid(), st.session_id, st.id, 'agent', 1, 'completed', 'react', \
             'global_supervisor', 0 \
         FROM stages st JOIN sessions s ON s.id = st.session_id WHERE s.alert_type = 'bulk' AND $1 > 0",
        "INSERT INTO timeline_events (id, session_id, stage_id, execution_id, sequence_number, \
             event_type, status, content, metadata) \
         SELECT gen_random_uuid(), e.session_id, e.stage_id, e.id, st.stage_index * 10 + n, \
             'llm_response', 'completed', 'token', '{}' \
         FROM agent_executions e JOIN sessions s ON s.id = e.session_id \
           JOIN stages st ON st.id = e.stage_id AND st.session_id = e.session_id, \
           generate_series(1, 10) n \
         WHERE s.alert_type = 'bulk' AND $1 > 0",
        "INSERT INTO messages (id, session_id, stage_id, execution_id, sequence_number, role, content) \
         SELECT gen_random_uuid(), e.session_id, e.stage_id, e.id, n, 'assistant', 'step' \
         FROM agent_executions e JOIN sessions s ON s.id = e.session_id, generate_series(1, 10) n \
         WHERE s.alert_type = 'bulk' AND $1 > 0",
        "INSERT INTO llm_interactions (id, session_id, stage_id, execution_id, interaction_type, \
             model_name, llm_request, llm_response, created_at) \
         SELECT gen_random_uuid(), e.session_id, e.stage_id, e.id, 'iteration', 'gemini-2.5-pro', \
             '{}', '{}', now() - make_interval(secs => n) \
         FROM agent_executions e JOIN sessions s ON s.id = e.session_id, generate_series(1, 4) n \
         WHERE s.alert_type = 'bulk' AND $1 > 0",
        "INSERT INTO mcp_interactions (id, session_id, stage_id, execution_id, interaction_type, \
             server_name, tool_name, tool_arguments, tool_result, created_at) \
         SELECT gen_random_uuid(), e.session_id, e.stage_id, e.id, 'tool_call', 'kubernetes', \
             'get', '{}', '{}', now() - make_interval(secs => n) \
         FROM agent_executions e JOIN sessions s ON s.id = e.session_id, generate_series(1, 4) n \
         WHERE s.alert_type = 'bulk' AND $1 > 0",
        "RESET session_replication_role",
    ];
    for statement in statements {
        let query = sqlx::query(statement);
        let query = if statement.contains("$1") {
            query.bind(n)
        } else {
            query
        };
        query
            .execute(&mut *conn)
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
}

/// The partitions of `tables` a plan's nodes scan: (table, `_pN`, whether it ran), from
/// lines like `Index Scan using … on stages_p2 s (actual rows=… loops=1)`.
fn partitions_in(plan: &str, tables: &[String]) -> Vec<(String, String, bool)> {
    let mut found = Vec::new();
    for line in plan.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        for pair in words.windows(2) {
            if pair[0] != "on" {
                continue;
            }
            let Some((table, number)) = pair[1].rsplit_once("_p") else {
                continue;
            };
            if tables.iter().any(|t| t == table) && number.parse::<u32>().is_ok() {
                let executed = !line.contains("never executed");
                found.push((table.to_owned(), format!("_p{number}"), executed));
            }
        }
    }
    found
}

/// Writes that fire every trigger of every distributed table, each naming the session it
/// writes in, `$1`; `$2`, `$3`: two new ids.
const EVERY_TRIGGER: &[(&str, &str, &str)] = &[
    (
        "sessions",
        "INSERT",
        "INSERT INTO sessions (id, alert_type, chain_id) VALUES ($1, 'probe', 'kubernetes')",
    ),
    (
        "stages",
        "INSERT",
        "INSERT INTO stages (id, session_id, stage_index, stage_name, expected_agent_count, status) \
        VALUES ($2, $1, 0, 'probe', 1, 'active')",
    ),
    (
        "agent_executions",
        "INSERT",
        "INSERT INTO agent_executions (id, session_id, stage_id, agent_name, agent_index, status, iteration_strategy) \
        VALUES ($3, $1, $2, 'lead', 1, 'active', 'react')",
    ),
    // A sub-agent: its parent is looked up.
    (
        "agent_executions",
        "INSERT",
        "INSERT INTO agent_executions (id, session_id, stage_id, agent_name, agent_index, status, iteration_strategy, parent_execution_id) \
        VALUES (gen_random_uuid(), $1, $2, 'worker', 2, 'active', 'react', $3)",
    ),
    (
        "timeline_events",
        "INSERT",
        "INSERT INTO timeline_events (id, session_id, stage_id, execution_id, sequence_number, event_type, status, content, metadata) \
        SELECT gen_random_uuid(), $1, $2, $3, n, 'llm_response', 'streaming', 'x', '{}' FROM generate_series(1, 2) n",
    ),
    (
        "timeline_event_chunks",
        "INSERT",
        "INSERT INTO timeline_event_chunks (event_id, session_id, start_offset, content) \
        SELECT id, session_id, 1, 'yz' FROM timeline_events \
        WHERE session_id = $1 AND stage_id = $2 AND execution_id = $3",
    ),
    (
        "messages",
        "INSERT",
        "INSERT INTO messages (id, session_id, stage_id, execution_id, sequence_number, role, content) \
        VALUES (gen_random_uuid(), $1, $2, $3, 1, 'assistant', 'step')",
    ),
    (
        "llm_interactions",
        "INSERT",
        "INSERT INTO llm_interactions (id, session_id, stage_id, execution_id, interaction_type, model_name, llm_request, llm_response) \
        VALUES (gen_random_uuid(), $1, $2, $3, 'iteration', 'gemini-2.5-pro', '{}', '{}')",
    ),
    (
        "mcp_interactions",
        "INSERT",
        "INSERT INTO mcp_interactions (id, session_id, stage_id, execution_id, interaction_type, server_name, tool_name, tool_arguments, tool_result) \
        VALUES (gen_random_uuid(), $1, $2, $3, 'tool_call', 'k8s', 'get', '{}', '{}')",
    ),
    (
        "chats",
        "INSERT",
        "INSERT INTO chats (id, session_id, created_by) VALUES ($2, $1, 'probe')",
    ),
    (
        "chat_user_messages",
        "INSERT",
        "INSERT INTO chat_user_messages (id, session_id, chat_id, content, author) \
        VALUES (gen_random_uuid(), $1, $2, 'why?', 'probe')",
    ),
    (
        "notifications",
        "INSERT",
        "INSERT INTO notifications (id, session_id, type, destination, max_attempts, next_attempt_at) \
        VALUES (gen_random_uuid(), $1, 'webhook', 'https://hooks.example.com/casefile', 3, now())",
    ),
    (
        "sessions",
        "UPDATE",
        "UPDATE sessions SET status = 'in_progress', final_analysis = 'found' WHERE id = $1",
    ),
    (
        "stages",
        "UPDATE",
        "UPDATE stages SET status = 'completed' WHERE id = $2 AND session_id = $1",
    ),
    (
        "agent_executions",
        "UPDATE",
        "UPDATE agent_executions SET status = 'completed' WHERE session_id = $1",
    ),
    (
        "timeline_events",
        "UPDATE",
        "UPDATE timeline_events SET status = 'completed' \
        WHERE session_id = $1 AND stage_id = $2 AND execution_id = $3 AND sequence_number = 1",
    ),
    (
        "notifications",
        "UPDATE",
        "UPDATE notifications SET status = 'failed', next_attempt_at = NULL, failed_at = now() \
        WHERE session_id = $1",
    ),
    (
        "chats",
        "UPDATE",
        "UPDATE chats SET deleted_at = now() WHERE id = $2 AND session_id = $1",
    ),
    (
        "sessions",
        "UPDATE",
        "UPDATE sessions SET deleted_at = now() WHERE id = $1",
    ),
    // The deferred triggers fire now, while the transaction's counts can still be read.
    ("", "", "SET CONSTRAINTS ALL IMMEDIATE"),
    (
        "timeline_events",
        "DELETE",
        "DELETE FROM timeline_events WHERE session_id = $1 AND status = 'streaming'",
    ),
    ("sessions", "DELETE", "DELETE FROM sessions WHERE id = $1"),
];

/// Eight investigations on `db`, then its distributed tables partitioned; its pool.
async fn investigations_partitioned(db: &TestDb) -> PgPool {
    let pool = db.db.pool().clone();
    let now = Utc::now();
    for i in 0..8 {
        fixtures::investigation(&pool, now - Duration::minutes(i)).await;
    }
    partition_by_session(&db.store(), PARTITIONS).await.unwrap();
    pool
}

#[tokio::test]
async fn every_trigger_on_a_distributed_table_stays_in_its_sessions_partitions() {
    let Some(db) = TestDb::start_plain_external("the triggers' partition check").await else {
        return;
    };
    let pool = investigations_partitioned(&db).await;
    let tables = distributed_tables();

    // Every trigger of a distributed table fires on a write the probe makes.
    let triggers: Vec<(String, String, i16)> = sqlx::query_as(
        "SELECT t.relname::text, g.tgname::text, g.tgtype FROM pg_trigger g \
         JOIN pg_class t ON t.oid = g.tgrelid \
         WHERE NOT g.tgisinternal AND g.tgparentid = 0 AND t.relname = ANY($1) ORDER BY 1, 2",
    )
    .bind(&tables)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(triggers.len() >= 15, "{triggers:?}");
    for (table, trigger, kind) in &triggers {
        let fires_on = [(4, "INSERT"), (8, "DELETE"), (16, "UPDATE")]
            .into_iter()
            .filter(|(bit, _)| kind & bit != 0)
            .map(|(_, op)| op);
        for op in fires_on {
            assert!(
                EVERY_TRIGGER.iter().any(|(t, o, _)| t == table && *o == op),
                "the probe does not fire {trigger} ({op} on {table})"
            );
        }
    }

    let (elsewhere, global) = probe(&pool, &tables, None).await;
    assert_eq!(
        elsewhere,
        Vec::<String>::new(),
        "triggers read or wrote other sessions' partitions"
    );
    // No table of another placement either: the sessions feed is written by the transaction
    // that changes a status (migration 0124), the live change log is the session's (0127).
    assert_eq!(
        global,
        BTreeSet::new(),
        "triggers wrote tables of no session"
    );

    // The probe can fail: a trigger that finds a parent by its id alone (as before migration
    // 0122) reads every partition.
    let before_0122 = "CREATE OR REPLACE FUNCTION place_agent_execution() RETURNS trigger LANGUAGE plpgsql AS $$ \
         DECLARE parent agent_executions%ROWTYPE; \
         BEGIN \
             NEW.agent_type := coalesce(NEW.agent_type, CASE WHEN NEW.parent_execution_id IS NULL \
                 THEN 'global_supervisor' ELSE 'worker' END); \
             NEW.depth := 0; \
             IF NEW.parent_execution_id IS NOT NULL THEN \
                 SELECT * INTO parent FROM agent_executions WHERE id = NEW.parent_execution_id; \
                 NEW.depth := parent.depth + 1; \
                 NEW.team_name := parent.agent_name; \
             END IF; \
             RETURN NEW; \
         END $$";
    let (elsewhere, _) = probe(&pool, &tables, Some(before_0122)).await;
    assert!(
        elsewhere
            .iter()
            .any(|e| e.starts_with("agent_executions_p")),
        "{elsewhere:?}"
    );
    db.stop().await;
}

/// Runs every write of [`EVERY_TRIGGER`] for a new session in one transaction (rolled back)
/// after `before`, and returns the partitions of distributed tables other than the session's
/// that were read or written meanwhile, and the other tables written. On a connection of its
/// own: a backend's counts of earlier transactions are reported with its current one's until
/// it sends them on (at most once a second).
async fn probe(
    pool: &PgPool,
    tables: &[String],
    before: Option<&str>,
) -> (Vec<String>, BTreeSet<String>) {
    let mut conn = PgConnection::connect_with(&pool.connect_options())
        .await
        .unwrap();
    let mut tx = conn.begin().await.unwrap();
    // As casefile begins a transaction: it feeds the status changes it records itself
    // (`feed_status_changes`, migration 0124), so the trigger keeps to the session's history.
    sqlx::query("SET LOCAL casefile.feeds_status_changes = 'on'")
        .execute(&mut *tx)
        .await
        .unwrap();
    if let Some(statement) = before {
        sqlx::query(statement).execute(&mut *tx).await.unwrap();
    }
    // A session of the last partition: a look-up that stops at its first match (`SELECT …
    // INTO`) still reads every other partition before it finds a row of this one.
    let mut session = Uuid::now_v7();
    while !sqlx::query_scalar::<_, bool>(
        "SELECT satisfies_hash_partition('sessions'::regclass, $2, $2 - 1, $1)",
    )
    .bind(session)
    .bind(PARTITIONS as i32)
    .fetch_one(&mut *tx)
    .await
    .unwrap()
    {
        session = Uuid::now_v7();
    }
    let (stage, execution) = (Uuid::now_v7(), Uuid::now_v7());
    for (_, _, statement) in EVERY_TRIGGER {
        // Each statement names the ids it uses in order: $1, then $2, then $3.
        let mut query = sqlx::query(statement);
        for (n, id) in [(1, session), (2, stage), (3, execution)] {
            if statement.contains(&format!("${n}")) {
                query = query.bind(id);
            }
        }
        query
            .execute(&mut *tx)
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
    let home = format!("_p{}", PARTITIONS - 1);
    // This transaction's own counts, per table.
    let touched: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT relname::text, coalesce(seq_scan, 0) + coalesce(idx_scan, 0), \
             n_tup_ins + n_tup_upd + n_tup_del \
         FROM pg_stat_xact_user_tables \
         WHERE coalesce(seq_scan, 0) + coalesce(idx_scan, 0) + n_tup_ins + n_tup_upd + n_tup_del > 0",
    )
    .fetch_all(&mut *tx)
    .await
    .unwrap();
    tx.rollback().await.unwrap();
    conn.close().await.unwrap();
    let mut elsewhere = Vec::new();
    let mut global = BTreeSet::new();
    for (relation, reads, writes) in touched {
        let partition = relation
            .rsplit_once("_p")
            .filter(|(table, number)| {
                tables.iter().any(|t| t == table) && number.parse::<u32>().is_ok()
            })
            .map(|(_, number)| format!("_p{number}"));
        match partition {
            Some(partition) if partition != home => {
                elsewhere.push(format!("{relation}: {reads} scans, {writes} rows written"));
            }
            None if writes > 0 && !tables.contains(&relation) => {
                global.insert(relation);
            }
            _ => {}
        }
    }
    (elsewhere, global)
}

/// `session`'s partition number (of [`PARTITIONS`]).
async fn partition_of(conn: &mut PgConnection, session: Uuid) -> u32 {
    for number in 0..PARTITIONS {
        let here: bool =
            sqlx::query_scalar("SELECT satisfies_hash_partition('sessions'::regclass, $2, $3, $1)")
                .bind(session)
                .bind(PARTITIONS as i32)
                .bind(number as i32)
                .fetch_one(&mut *conn)
                .await
                .unwrap();
        if here {
            return number;
        }
    }
    unreachable!("{session} is in no partition")
}

/// This transaction's scans of each partition of `session_status_changes`.
async fn status_history_scans(conn: &mut PgConnection) -> BTreeMap<String, i64> {
    sqlx::query_as(
        "SELECT relname::text, coalesce(seq_scan, 0) + coalesce(idx_scan, 0) \
         FROM pg_stat_xact_user_tables WHERE relname LIKE 'session\\_status\\_changes\\_p%'",
    )
    .fetch_all(conn)
    .await
    .unwrap()
    .into_iter()
    .collect()
}

#[tokio::test]
async fn feeding_a_sessions_status_change_reads_only_its_partition() {
    let Some(db) = TestDb::start_plain_external("the feed's partition check").await else {
        return;
    };
    let pool = investigations_partitioned(&db).await;
    let session = fixtures::investigation(&pool, Utc::now()).await;

    // As the mutation runner does: the change is recorded, then fed by the writer.
    let mut tx = db.store().begin().await.unwrap();
    let home = format!(
        "session_status_changes_p{}",
        partition_of(&mut tx, session).await
    );
    change_status(&mut tx, session, "failed").await;
    let before = status_history_scans(&mut tx).await;
    feed(&mut tx, &[session]).await;
    let after = status_history_scans(&mut tx).await;
    let fed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM session_status_changes \
         WHERE session_id = $1 AND feed_position IS NOT NULL",
    )
    .bind(session)
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();

    assert_eq!(fed, 2, "created and failed, both fed");
    let scanned: BTreeMap<&String, i64> = after
        .iter()
        .map(|(partition, scans)| (partition, scans - before.get(partition).unwrap_or(&0)))
        .filter(|(_, scans)| *scans > 0)
        .collect();
    assert_eq!(
        scanned.keys().copied().collect::<Vec<_>>(),
        [&home],
        "partitions scanned to feed one session: {scanned:?}"
    );
    db.stop().await;
}
