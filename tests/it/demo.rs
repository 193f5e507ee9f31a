//! The demo data covers every status and type, and loading it twice changes nothing.

use std::str::FromStr as _;

use casefile::store::InSession as _;
use rust_decimal::Decimal;
use serde_json::{Value, json};

use crate::common::{TestApp, TestDb, nodes};

const TABLES: [&str; 13] = [
    "model_prices",
    "chains",
    "sessions",
    "stages",
    "agent_executions",
    "timeline_events",
    "messages",
    "tool_calls",
    "llm_interactions",
    "mcp_interactions",
    "chats",
    "chat_user_messages",
    "notifications",
];

async fn fingerprint(pool: &sqlx::PgPool) -> Vec<(String, i64, String)> {
    let mut out = Vec::new();
    for table in TABLES {
        let (count, digest): (i64, Option<String>) = sqlx::query_as(&format!(
            "SELECT count(*), md5(string_agg(t::text, '|' ORDER BY t::text)) FROM {table} t"
        ))
        .fetch_one(pool)
        .await
        .unwrap();
        out.push((table.to_owned(), count, digest.unwrap_or_default()));
    }
    out
}

async fn distinct(pool: &sqlx::PgPool, sql: &str) -> Vec<String> {
    let mut values: Vec<String> = sqlx::query_scalar(sql).fetch_all(pool).await.unwrap();
    values.sort();
    values
}

#[tokio::test]
async fn demo_is_complete_and_idempotent() {
    let db = TestDb::start().await;
    let store = db.store();
    let pool = db.db.pool();
    casefile::demo::load(&store).await.unwrap();
    let first = fingerprint(pool).await;
    casefile::demo::load(&store).await.unwrap();
    assert_eq!(
        fingerprint(pool).await,
        first,
        "a second load changed something"
    );
    for (table, count, _) in &first {
        assert!(*count > 0, "{table} is empty");
    }

    let sorted = |v: &[&str]| {
        let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
        v.sort();
        v
    };
    assert_eq!(
        distinct(pool, "SELECT DISTINCT status FROM sessions").await,
        sorted(&[
            "pending",
            "in_progress",
            "cancelling",
            "completed",
            "failed",
            "cancelled",
            "timed_out"
        ])
    );
    assert_eq!(
        distinct(pool, "SELECT DISTINCT event_type FROM timeline_events").await,
        sorted(&[
            "llm_thinking",
            "llm_response",
            "llm_tool_call",
            "mcp_tool_call",
            "mcp_tool_summary",
            "user_question",
            "executive_summary",
            "final_analysis"
        ])
    );
    assert_eq!(
        distinct(pool, "SELECT DISTINCT status FROM timeline_events").await,
        sorted(&["streaming", "completed", "failed", "cancelled", "timed_out"])
    );
    // The outbox in several states: delivered, sent, one failed for good, one retrying after
    // a failed attempt and one not claimed yet (both due), and an answer's in its question's
    // Slack thread.
    assert_eq!(
        distinct(pool, "SELECT DISTINCT status FROM notifications").await,
        sorted(&["pending", "sent", "delivered", "failed"])
    );
    assert_eq!(
        distinct(pool, "SELECT DISTINCT type FROM notifications").await,
        sorted(&["slack", "email", "pagerduty", "webhook", "msteams"])
    );
    let (failed_for_good, retrying, unclaimed, answers): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE status = 'failed' AND attempts = max_attempts \
                AND last_error IS NOT NULL), \
            count(*) FILTER (WHERE status = 'pending' AND attempts > 0 AND next_attempt_at <= now()), \
            count(*) FILTER (WHERE status = 'pending' AND attempts = 0 AND next_attempt_at <= now()), \
            count(*) FILTER (WHERE chat_question_id IS NOT NULL) \
         FROM notifications",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(
        (failed_for_good, retrying, unclaimed, answers),
        (1, 1, 1, 1)
    );
    assert_eq!(
        distinct(pool, "SELECT DISTINCT role FROM messages").await,
        sorted(&["system", "user", "assistant", "tool"])
    );
    assert_eq!(
        distinct(
            pool,
            "SELECT DISTINCT interaction_type FROM llm_interactions"
        )
        .await,
        sorted(&[
            "iteration",
            "final_analysis",
            "executive_summary",
            "chat_response"
        ])
    );
    assert_eq!(
        distinct(
            pool,
            "SELECT DISTINCT interaction_type FROM mcp_interactions"
        )
        .await,
        sorted(&["tool_call", "tool_list"])
    );
    assert_eq!(
        distinct(
            pool,
            "SELECT DISTINCT success_policy FROM stages WHERE success_policy IS NOT NULL"
        )
        .await,
        sorted(&["all", "any"])
    );
    let checks: Vec<(&str, &str)> = vec![
        (
            "a three-stage chain whose middle stage runs three agents in parallel",
            "SELECT count(*) FROM stages m WHERE m.stage_index = 1 AND m.expected_agent_count = 3 \
          AND (SELECT count(*) FROM agent_executions e WHERE e.stage_id = m.id) = 3 \
          AND (SELECT count(*) FROM stages o WHERE o.session_id = m.session_id AND o.chat_id IS NULL) = 3",
        ),
        (
            "a global supervisor with two teams, each a team supervisor and its worker",
            "SELECT count(*) FROM agent_executions g WHERE g.agent_type::text = 'global_supervisor' \
          AND (SELECT count(DISTINCT t.team_name) FROM agent_executions t \
               JOIN agent_executions w ON w.parent_execution_id = t.id \
                AND w.agent_type::text = 'worker' AND w.team_name = t.team_name AND w.depth = 2 \
               WHERE t.parent_execution_id = g.id AND t.agent_type::text = 'team_supervisor') = 2",
        ),
        (
            "sub-agents with their task and result summary",
            "SELECT count(*) FROM agent_executions WHERE parent_execution_id IS NOT NULL \
          AND task IS NOT NULL AND result_summary IS NOT NULL",
        ),
        (
            "a follow-up chat answered by a stage",
            "SELECT count(*) FROM stages WHERE chat_user_message_id IS NOT NULL",
        ),
        (
            "LLM interactions linked to their conversation",
            "SELECT count(*) FROM llm_interactions WHERE last_message_id IS NOT NULL",
        ),
        (
            "tool messages answering a call",
            "SELECT count(*) FROM messages WHERE role = 'tool' AND tool_call_id IS NOT NULL",
        ),
        (
            "assistant messages requesting tool calls",
            "SELECT count(*) FROM messages WHERE tool_calls IS NOT NULL",
        ),
        (
            "MCP interactions linked to the call they executed",
            "SELECT count(*) FROM mcp_interactions WHERE tool_call_id IS NOT NULL",
        ),
        (
            "a retried MCP tool call",
            "SELECT count(*) FROM mcp_interactions WHERE attempt > 1",
        ),
        (
            "failed MCP tool calls",
            "SELECT count(*) FROM mcp_interactions WHERE error_message IS NOT NULL",
        ),
        (
            "timeline events linked to interactions",
            "SELECT count(*) FROM timeline_events WHERE llm_interaction_id IS NOT NULL",
        ),
        (
            "thinking tokens and costs",
            "SELECT count(*) FROM llm_interactions WHERE thinking_tokens > 0 AND estimated_cost_usd > 0",
        ),
        (
            "cached input tokens, priced",
            "SELECT count(*) FROM llm_interactions WHERE cached_input_tokens > 0 \
             AND cost_source = 'price_list'",
        ),
        (
            "a model priced before and after a price change",
            "SELECT count(*) FROM (SELECT model_name FROM llm_interactions \
             WHERE cost_source = 'price_list' GROUP BY model_name \
             HAVING count(DISTINCT pricing_snapshot->>'effective_from') > 1) m",
        ),
    ];
    for (what, sql) in checks {
        let n: i64 = sqlx::query_scalar(sql).fetch_one(pool).await.unwrap();
        assert!(n > 0, "demo data lacks {what}");
    }
    // Every call with token counts is priced from the demo's price list, exactly as the live
    // writer prices one: the parts recomputed here in SQL from the stored snapshot, in
    // `numeric`, agree to the last place, and each agrees with the price list.
    let mispriced: Vec<(uuid::Uuid, String)> = sqlx::query_as(
        "WITH p AS (SELECT i.*, \
              (pricing_snapshot->>'input_per_million')::numeric AS ip, \
              (pricing_snapshot->>'cached_input_per_million')::numeric AS cp, \
              (pricing_snapshot->>'output_per_million')::numeric AS op, \
              (pricing_snapshot->>'thinking_per_million')::numeric AS tp, \
              coalesce(cached_input_tokens, 0) AS c, coalesce(thinking_tokens, 0) AS t \
            FROM llm_interactions i WHERE input_tokens IS NOT NULL) \
         SELECT id, coalesce(cost_source, 'null') FROM p \
         WHERE cost_source IS DISTINCT FROM 'price_list' \
            OR input_cost_usd <> round(((input_tokens - c) * ip + c * cp) / 1000000, 10) \
            OR output_cost_usd <> round(((output_tokens - t) * op + t * tp) / 1000000, 10) \
            OR estimated_cost_usd <> input_cost_usd + output_cost_usd \
            OR NOT EXISTS (SELECT FROM model_prices m WHERE m.model_name = p.model_name \
                 AND m.effective_from = (p.pricing_snapshot->>'effective_from')::timestamptz \
                 AND m.input_per_million = p.ip AND m.effective_from <= p.created_at \
                 AND NOT EXISTS (SELECT FROM model_prices l WHERE l.model_name = m.model_name \
                   AND l.effective_from > m.effective_from AND l.effective_from <= p.created_at))",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert_eq!(
        mispriced,
        vec![],
        "demo interactions not priced as the list says"
    );
    // Every tool call is linked: each tool message answers, and each MCP tool call executes, a
    // call its agent's conversation requested; every requested call is indexed.
    let unlinked: i64 = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM messages m WHERE m.role = 'tool' AND NOT EXISTS \
                   (SELECT FROM tool_calls t WHERE t.execution_id = m.execution_id \
                      AND t.call_id = m.tool_call_id)) \
              + (SELECT count(*) FROM mcp_interactions WHERE interaction_type = 'tool_call' \
                   AND tool_call_id IS NULL) \
              + (SELECT sum(jsonb_array_length(tool_calls)) FROM messages) \
              - (SELECT count(*) FROM tool_calls)",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(unlinked, 0, "demo tool calls are not all linked");
    let gaps: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT session_id FROM timeline_events GROUP BY session_id \
         HAVING max(sequence_number) <> count(*) OR min(sequence_number) <> 1) g",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(gaps, 0, "timeline sequence numbers must be gapless from 1");
    // Searchable: every session and finished event has its search document, and the crash
    // loop's analysis is found by words of it, stemmed.
    let unindexed: i64 = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM sessions WHERE search_document IS NULL) \
              + (SELECT count(*) FROM timeline_events \
                 WHERE status <> 'streaming' AND search_document IS NULL)",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(unindexed, 0, "demo rows without a search document");
    let filter = casefile::store::sessions::SessionFilter {
        search: Some(
            casefile::store::search_words::SearchWords::parse("payments setting renamed").unwrap(),
        ),
        ..Default::default()
    };
    assert!(store.count_sessions(&filter).await.unwrap() >= 1);
    // A titled chat in its owner's list, its question answered.
    let mine = casefile::store::chats::ChatListFilter {
        created_by: Some("maria.k@example.com".to_owned()),
        include_deleted: false,
    };
    let everything = casefile::store::page::Slice {
        after: None,
        before: None,
        size: 10,
        from_end: false,
    };
    let chats = store.list_chats(&mine, &everything).await.unwrap().rows;
    assert_eq!(chats.len(), 1);
    assert!(chats[0].title.is_some(), "the demo chat has a title");
    let questions = store
        .user_messages_by_chat(&[chats[0].key()])
        .await
        .unwrap();
    let question = questions[&chats[0].key()][0].key();
    let answers = store
        .answer_by_chat_user_message(&[question])
        .await
        .unwrap();
    assert!(
        answers[&question].content.contains("rollback"),
        "the answer"
    );
    let latest = store.latest_stage_by_chat(&[chats[0].key()]).await.unwrap();
    assert!(latest[&chats[0].key()].completed_at.unwrap() <= chats[0].updated_at);
    // A week of sessions for the analytics: eight days (the week before and the demo's day),
    // failures among them, and usage by several models and agents.
    use casefile::store::stats::{Grouping, StatsDimension};
    let grouping = |by: Vec<StatsDimension>| Grouping {
        by,
        time_zone: "UTC".to_owned(),
        limit: 100,
    };
    let all = casefile::store::sessions::SessionFilter::default();
    let days = store
        .session_groups(&all, &grouping(vec![StatsDimension::Day]))
        .await
        .unwrap();
    assert_eq!(days.len(), 8, "the demo's day and the week before it");
    assert!(
        days.iter()
            .any(|d| d.failed_count > 0 && d.completed_count > 0)
    );
    let models = store
        .usage_groups(&all, &grouping(vec![StatsDimension::Model]))
        .await
        .unwrap();
    assert!(models.iter().filter(|m| m.llm_calls > 0).count() >= 3);
    assert!(models.iter().any(|m| m.failed_llm_calls > 0));
    // Every model's usage is priced, split into input and output, and none is unpriced.
    for m in models.iter().filter(|m| m.llm_calls > 0) {
        assert!(m.input_cost_usd > Decimal::ZERO && m.output_cost_usd > Decimal::ZERO);
        assert_eq!(m.estimated_cost_usd, m.input_cost_usd + m.output_cost_usd);
        assert_eq!(m.unpriced_llm_calls, 0);
    }
    drop(store);
    db.stop().await;
}

/// What GraphiQL opens with on a fresh `serve --demo`: sessions whose costs are computed from
/// the demo's price list, in input and output.
#[tokio::test]
async fn graphiqls_example_shows_the_demos_computed_costs() {
    let app = TestApp::start().await;
    casefile::demo::load(&app.store).await.unwrap();
    let data = app.data(casefile::http::EXAMPLE_QUERY, json!({})).await;
    let usd = |v: &Value| Decimal::from_str(v.as_str().expect("a decimal string")).unwrap();
    let mut priced = 0;
    for edge in data["sessions"]["edges"].as_array().unwrap() {
        let usage = &edge["node"]["tokenUsage"];
        let (input, output) = (usd(&usage["inputCostUsd"]), usd(&usage["outputCostUsd"]));
        assert_eq!(usd(&usage["totalCostUsd"]), input + output, "{usage}");
        if usage["inputTokens"].as_i64() > Some(0) {
            assert!(input > Decimal::ZERO && output > Decimal::ZERO, "{usage}");
            priced += 1;
        }
    }
    assert!(priced >= 3, "{data:#}");
    app.stop().await;
}

#[tokio::test]
async fn demo_sessions_ran_registered_chain_versions() {
    let app = TestApp::start().await;
    casefile::demo::load(&app.store).await.unwrap();
    // What GraphiQL shows on a fresh start: the chains, one of them in two versions, each with
    // its sessions.
    let d = app
        .data(
            "{ chains(first: 20) { edges { node { name version stageCount
                 sessionsConnection(first: 5) { totalCount edges { node { alertType } } }
               } } } }",
            json!({}),
        )
        .await;
    let chains = nodes(&d["chains"]);
    let deep_dive: Vec<&Value> = chains
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] == "kubernetes-deep-dive")
        .collect();
    assert_eq!(deep_dive.len(), 2, "{chains:#}");
    for version in &deep_dive {
        assert_eq!(version["stageCount"], 3);
        assert!(
            version["sessionsConnection"]["totalCount"].as_i64() >= Some(1),
            "{version:#}"
        );
    }
    let linked: i64 = chains
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["sessionsConnection"]["totalCount"].as_i64().unwrap())
        .sum();
    assert!(
        linked >= 8,
        "every scenario's session ran a registered version"
    );
    // The week of alerts was recorded with a chain name only.
    let d = app
        .data(
            "{ sessionStats { groups(by: [CHAIN_VERSION]) { nodes { key { chainId chainVersion }
                 sessionCount } } } }",
            json!({}),
        )
        .await;
    let unversioned: i64 = d["sessionStats"]["groups"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["key"]["chainVersion"].is_null())
        .map(|g| g["sessionCount"].as_i64().unwrap())
        .sum();
    assert_eq!(unversioned, 14);
    // What each version cost: the two versions of one chain apart, and every call in a group.
    let d = app
        .data(
            "{ sessionStats { all: usage { nodes { llmCalls } }
                 byVersion: usage(by: [CHAIN_VERSION]) { nodes { key { chainId chainVersion }
                   llmCalls totalCostUsd } } } }",
            json!({}),
        )
        .await;
    let groups = d["sessionStats"]["byVersion"]["nodes"].as_array().unwrap();
    let calls: i64 = groups.iter().map(|g| g["llmCalls"].as_i64().unwrap()).sum();
    assert_eq!(
        calls,
        d["sessionStats"]["all"]["nodes"][0]["llmCalls"]
            .as_i64()
            .unwrap()
    );
    for version in ["1.0.0", "1.1.0"] {
        let group = groups
            .iter()
            .find(|g| {
                g["key"]["chainId"] == "kubernetes-deep-dive" && g["key"]["chainVersion"] == version
            })
            .unwrap_or_else(|| panic!("no usage group of version {version}: {groups:?}"));
        assert!(group["llmCalls"].as_i64().unwrap() > 0, "{group}");
        let cost: f64 = group["totalCostUsd"].as_str().unwrap().parse().unwrap();
        assert!(cost > 0.0, "{group}");
    }
    // A session's stages are its version's, in order (its chat stages come after them).
    let mismatched: Vec<String> = sqlx::query_scalar(
        "SELECT s.alert_type || ': ' || st.stage_name FROM sessions s \
         JOIN chains c ON c.name = s.chain_id AND c.version = s.chain_version \
         JOIN stages st ON st.session_id = s.id AND st.chat_id IS NULL \
         WHERE st.stage_index >= c.stage_count \
            OR c.definition -> 'stages' -> st.stage_index ->> 'name' <> st.stage_name",
    )
    .fetch_all(app.store.pool())
    .await
    .unwrap();
    assert!(mismatched.is_empty(), "{mismatched:?}");
    app.stop().await;
}

/// A fresh demo has an audit trail: its price list, chain versions and sessions, each created
/// by `demo`, and each session's trail starts with it; loading again adds nothing.
#[tokio::test]
async fn the_demo_has_an_audit_trail() {
    let app = TestApp::start().await;
    casefile::demo::load(&app.store).await.unwrap();
    let trail = "{ auditLog(first: 100) { edges { node { actor action targetType } } } }";
    let d = app.data(trail, json!({})).await;
    let records = d["auditLog"]["edges"].as_array().unwrap().clone();
    let of = |target: &str| {
        records
            .iter()
            .filter(|e| e["node"]["targetType"] == target)
            .count()
    };
    assert!(of("ModelPrice") >= 3, "{records:#?}");
    assert_eq!(of("Chain"), 6);
    assert!(of("Session") >= 8);
    assert!(records.iter().all(|e| e["node"]["actor"] == "demo"));
    casefile::demo::load(&app.store).await.unwrap();
    let again = app.data(trail, json!({})).await;
    assert_eq!(
        again["auditLog"]["edges"].as_array().unwrap().len(),
        records.len()
    );
    let d = app
        .data(
            "{ sessions(first: 1) { edges { node { auditLog { totalCount
                 edges { node { action changes { field } } } } } } } }",
            json!({}),
        )
        .await;
    let session_trail = &d["sessions"]["edges"][0]["node"]["auditLog"];
    assert_eq!(session_trail["totalCount"], 1, "{session_trail:#}");
    assert_eq!(session_trail["edges"][0]["node"]["action"], "restore");
    app.stop().await;
}

/// On a fresh demo, an operator's "what failed to deliver" view shows the webhook that failed
/// for good, and a worker finds the due ones to claim.
#[tokio::test]
async fn the_demo_outbox_shows_what_failed_and_what_is_due() {
    let app = TestApp::start().await;
    casefile::demo::load(&app.store).await.unwrap();
    let data = app
        .data(
            "{ failed: notifications(filter: { status: FAILED }) { totalCount edges { node {
                 type attempts maxAttempts lastError session { alertType status } } } }
               all: notifications { totalCount } }",
            json!({}),
        )
        .await;
    assert_eq!(data["all"]["totalCount"], 7, "{data:#}");
    assert_eq!(
        data["failed"]["edges"][0]["node"],
        json!({ "type": "WEBHOOK", "attempts": 3, "maxAttempts": 3,
                "lastError": "connect ECONNREFUSED 10.42.7.19:443",
                "session": { "alertType": "KubeContainerOOMKilled", "status": "FAILED" } })
    );
    let claimed = app
        .data(
            "mutation { claimNotifications(claimId: \"0190f5a0-0000-7000-8000-0000000000aa\",
                 limit: 10, leaseSeconds: 60) { type attempts } }",
            json!({}),
        )
        .await;
    let mut types: Vec<&str> = claimed["claimNotifications"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["type"].as_str().unwrap())
        .collect();
    types.sort();
    assert_eq!(types, ["MSTEAMS", "SLACK"]);
    app.stop().await;
}
