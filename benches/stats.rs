//! Analytics benchmark: a dashboard's `sessionStats` queries over 30 days of 100,000 sessions
//! (small payloads: 2 stages, 3 agents and 12 LLM calls each), through the GraphQL API, p50 and
//! p99 of each. Beside them, the usage-by-model figure computed by scanning the LLM interactions
//! themselves, to show what the roll-ups save. Then retention at that volume: the sessions that
//! finished in the oldest three days purged in the default batches, each batch timed. Prints
//! figures; asserts nothing about speed.
//!
//!     cargo bench --bench stats                           # local PostgreSQL (DATABASE_URL)
//!     cargo bench --bench stats -- --sessions 20000 --runs 30
//!
//! Needs an external PostgreSQL (loading a million rows into the embedded one takes too long
//! to be worth it); without one it says so and measures nothing.

#[path = "common/app.rs"]
mod app;
#[path = "common/args.rs"]
mod args;
#[path = "../tests/it/common/mod.rs"]
mod common;
#[path = "common/token.rs"]
mod token;

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use args::arg;
use common::TestApp;

/// Rows as the orchestrator would leave them, `sessions` spread over the last 30 days.
async fn load(app: &TestApp, sessions: u64) {
    let mut conn = app.store.pool().acquire().await.unwrap();
    for statement in [
        // Live-change triggers stay off (they would fill the change log); the search documents
        // and usage roll-ups are kept by ALWAYS triggers, as on any write.
        "SET session_replication_role = replica".to_owned(),
        format!(
            "INSERT INTO sessions (id, alert_type, chain_id, author, alert_data, status, \
                 final_analysis, created_at, updated_at, started_at, completed_at) \
             SELECT gen_random_uuid(), \
                 (ARRAY['PodCrashLooping', 'HighLatency', 'DiskPressure', 'CertExpiry', \
                        'OOMKilled', 'NodeNotReady'])[1 + n % 6], \
                 (ARRAY['kubernetes', 'latency', 'storage', 'network'])[1 + n % 4], \
                 CASE WHEN n % 7 = 0 THEN NULL ELSE 'user-' || n % 20 END, \
                 jsonb_build_object('cluster', 'prod-' || n % 5, 'namespace', 'ns-' || n % 40), \
                 s.status, \
                 CASE WHEN s.status = 'completed' THEN 'Root cause: memory limit on node ' || n % 90 END, \
                 t, t, t + interval '1 second', \
                 CASE WHEN s.status NOT IN ('in_progress') \
                      THEN t + make_interval(secs => 30 + (n * 7919) % 570) END \
             FROM generate_series(1, {sessions}) n, \
                 LATERAL (SELECT now() - make_interval(secs => (n * 2592000.0 / {sessions})) AS t, \
                   CASE WHEN n % 100 < 85 THEN 'completed' WHEN n % 100 < 93 THEN 'failed' \
                        WHEN n % 100 < 96 THEN 'timed_out' WHEN n % 100 < 98 THEN 'cancelled' \
                        ELSE 'in_progress' END AS status) s"
        ),
        "INSERT INTO stages (id, session_id, stage_name, stage_index, expected_agent_count, \
             parallel_type, success_policy, status) \
         SELECT gen_random_uuid(), id, name, i, agents, \
             CASE WHEN agents > 1 THEN 'multi_agent' END, CASE WHEN agents > 1 THEN 'all' END, \
             'completed' FROM sessions, \
             (VALUES (0, 'investigate', 2), (1, 'synthesize', 1)) AS st(i, name, agents)"
            .to_owned(),
        "INSERT INTO agent_executions (id, stage_id, session_id, agent_name, agent_index, status, \
             iteration_strategy, llm_provider, llm_model, agent_type, depth) \
         SELECT gen_random_uuid(), st.id, st.session_id, a.name, a.k, \
             CASE WHEN get_byte(uuid_send(st.id), 15) < 13 THEN 'failed' ELSE 'completed' END, \
             'react', a.provider, a.model, 'global_supervisor', 0 \
         FROM stages st JOIN (VALUES (0, 1, 'KubernetesAgent', 'google', 'gemini-2.5-pro'), \
                                     (0, 2, 'LogsAgent', 'openai', 'gpt-5'), \
                                     (1, 1, 'SynthesisAgent', 'anthropic', 'claude-sonnet-4')) \
             AS a(stage, k, name, provider, model) ON a.stage = st.stage_index"
            .to_owned(),
        "INSERT INTO llm_interactions (id, session_id, stage_id, execution_id, interaction_type, \
             model_name, llm_request, llm_response, input_tokens, output_tokens, total_tokens, \
             thinking_tokens, estimated_cost_usd, duration_ms, error_message) \
         SELECT gen_random_uuid(), e.session_id, e.stage_id, e.id, 'iteration', \
             CASE WHEN k = 4 AND e.llm_model = 'gemini-2.5-pro' THEN 'gemini-2.5-flash' \
                  ELSE e.llm_model END, \
             '{\"messages\": []}', '{\"text\": \"ok\"}', 1000 + k * 250, 120 + k * 10, \
             1120 + k * 260, 40, 0.0025 * k, 900 + k * 100, \
             CASE WHEN get_byte(uuid_send(e.id), 14) < 5 AND k = 1 THEN '429 Too Many Requests' END \
         FROM agent_executions e, generate_series(1, 4) k"
            .to_owned(),
        "RESET session_replication_role".to_owned(),
        "VACUUM ANALYZE sessions, agent_executions, llm_interactions, llm_usage_rollups".to_owned(),
    ] {
        sqlx::query(&statement).execute(&mut *conn).await.unwrap();
    }
}

/// p50 and p99 of `runs` runs of `run`, in milliseconds.
async fn timed<F, Fut>(runs: u64, mut run: F) -> (f64, f64)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    run().await; // warm-up: plans and caches, as on a dashboard refreshed every minute
    let mut times: Vec<Duration> = Vec::new();
    for _ in 0..runs {
        let started = Instant::now();
        run().await;
        times.push(started.elapsed());
    }
    times.sort();
    let at = |q: f64| {
        let i = ((times.len() as f64 - 1.0) * q).round() as usize;
        times[i].as_secs_f64() * 1000.0
    };
    (at(0.5), at(0.99))
}

/// The dashboard's panels: (name, query, variables).
fn panels() -> Vec<(&'static str, &'static str, Value)> {
    let week_ago = (chrono::Utc::now() - chrono::Duration::days(7)).to_rfc3339();
    let groups = "query ($by: [SessionDimension!]!, $filter: SessionFilterInput) {
      sessionStats(filter: $filter, timeZone: \"Europe/Berlin\") { groups(by: $by, first: 100) {
        totalCount nodes { key { status alertType chainId author periodStart } sessionCount
          completedCount failedCount successRate duration { p50Ms p95Ms avgMs } } } } }";
    let usage = "query ($by: [UsageDimension!]!, $filter: SessionFilterInput) {
      sessionStats(filter: $filter, timeZone: \"Europe/Berlin\") { usage(by: $by, first: 100) {
        totalCount nodes { key { model provider agentName chainId periodStart } llmCalls
          llmFailureRate inputTokens outputTokens thinkingTokens estimatedCostUsd
          executionCount executionFailureRate } } } }";
    vec![
        ("sessions: total, 30 days", groups, json!({ "by": [] })),
        ("sessions by day", groups, json!({ "by": ["DAY"] })),
        (
            "sessions by alert type",
            groups,
            json!({ "by": ["ALERT_TYPE"] }),
        ),
        (
            "sessions by status x week",
            groups,
            json!({ "by": ["STATUS", "WEEK"] }),
        ),
        ("sessions by author", groups, json!({ "by": ["AUTHOR"] })),
        (
            "sessions by day, last 7 days",
            groups,
            json!({ "by": ["DAY"], "filter": { "createdAfter": week_ago } }),
        ),
        (
            "sessions by day, one cluster",
            groups,
            json!({ "by": ["DAY"], "filter": { "alertDataContains": { "cluster": "prod-3" } } }),
        ),
        ("usage: total, 30 days", usage, json!({ "by": [] })),
        ("usage by model", usage, json!({ "by": ["MODEL"] })),
        ("usage by provider", usage, json!({ "by": ["PROVIDER"] })),
        ("usage by agent", usage, json!({ "by": ["AGENT_NAME"] })),
        (
            "usage by chain x day",
            usage,
            json!({ "by": ["CHAIN", "DAY"] }),
        ),
        (
            "usage by model, last 7 days",
            usage,
            json!({ "by": ["MODEL"], "filter": { "createdAfter": week_ago } }),
        ),
    ]
}

#[tokio::main]
async fn main() {
    let sessions = arg("--sessions", 100_000);
    let runs = arg("--runs", 50);
    let token = token::from_args_or_env();
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    if let Err(err) = sqlx::PgPool::connect(&url).await {
        println!("stats: skipped, no PostgreSQL at DATABASE_URL ({err})");
        return;
    }
    let app = app::start(
        Some(url),
        common::partitions_per_table(),
        token.as_deref(),
        Default::default(),
    )
    .await;
    let started = Instant::now();
    load(&app, sessions).await;
    let (interactions, rollups): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM llm_interactions), (SELECT count(*) FROM llm_usage_rollups)",
    )
    .fetch_one(app.store.pool())
    .await
    .unwrap();
    println!(
        "loaded {sessions} sessions over 30 days, {interactions} LLM interactions \
         ({rollups} roll-up rows) in {:.0} s; {runs} runs per panel, one client, PostgreSQL",
        started.elapsed().as_secs_f64()
    );
    println!(
        "{:<32} {:>10} {:>10} {:>8}",
        "panel", "p50 ms", "p99 ms", "groups"
    );
    for (name, query, variables) in panels() {
        let body = app.graphql(query, variables.clone()).await;
        assert!(body.get("errors").is_none(), "{name}: {body}");
        let stats = &body["data"]["sessionStats"];
        let groups = stats["groups"]["totalCount"]
            .as_i64()
            .or(stats["usage"]["totalCount"].as_i64())
            .unwrap();
        let (p50, p99) = timed(runs, || {
            let (app, variables) = (&app, variables.clone());
            async move {
                let body = app.graphql(query, variables).await;
                assert!(body.get("errors").is_none());
            }
        })
        .await;
        println!("{name:<32} {p50:>10.1} {p99:>10.1} {groups:>8}");
    }
    // The same figures as "usage by model", summed from the interactions themselves.
    let scan = "SELECT l.model_name, count(*), count(*) FILTER (WHERE l.error_message IS NOT NULL), \
                    sum(l.input_tokens), sum(l.output_tokens), sum(l.thinking_tokens), \
                    sum(l.estimated_cost_usd)::float8, count(DISTINCT l.execution_id) \
                FROM sessions s JOIN llm_interactions l ON l.session_id = s.id \
                WHERE s.deleted_at IS NULL GROUP BY 1";
    let pool = app.store.pool().clone();
    let (p50, p99) = timed(runs.min(20), || {
        let pool = pool.clone();
        async move {
            sqlx::query(scan).fetch_all(&pool).await.unwrap();
        }
    })
    .await;
    println!(
        "{:<32} {p50:>10.1} {p99:>10.1}   (SQL only, no roll-ups)",
        "usage by model, scanning calls"
    );
    purge_oldest_days(&app).await;
    app.stop().await;
}

/// Purges what finished in the oldest three of the 30 days, batch by batch as `casefile purge`
/// does (default batch size), timing each transaction: how long a batch holds its locks.
async fn purge_oldest_days(app: &TestApp) {
    let cutoff = chrono::Utc::now() - chrono::Duration::days(27);
    let criteria = casefile::store::retention::SessionCriteria {
        deleted_before: None,
        finished_before: Some(cutoff),
    };
    let size = casefile::retention::PurgeBatches::default().size;
    let counts = app.store.count_purgeable(&criteria).await.unwrap();
    let purge = app
        .store
        .begin_purge("bench", casefile::model::PurgeTrigger::Command, &json!({}))
        .await
        .unwrap();
    let started = Instant::now();
    let mut batches = Vec::new();
    loop {
        let batch = Instant::now();
        let done = app
            .store
            .purge_sessions(purge, &criteria, size, None)
            .await
            .unwrap();
        batches.push(batch.elapsed().as_secs_f64() * 1000.0);
        if done.locked < size {
            break;
        }
    }
    let total = started.elapsed().as_secs_f64();
    batches.sort_by(f64::total_cmp);
    let at = |q: f64| batches[((batches.len() as f64 - 1.0) * q).round() as usize];
    println!(
        "purged {} sessions ({} LLM interactions, {} timeline events under them) in {} batches \
         of {size}: {total:.1} s, {:.0} sessions/s; a batch p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        counts.sessions,
        counts.llm_interactions,
        counts.timeline_events,
        batches.len(),
        counts.sessions as f64 / total,
        at(0.5),
        at(0.99),
        batches[batches.len() - 1]
    );
}
