//! Retention (seed 000 Q12): purges hard-delete what a policy selects, with everything under
//! it, in batches, and leave a record; the server runs the policy on a schedule; the change log
//! and idempotency receipts are pruned by age.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sqlx::PgPool;
use tokio::sync::watch;
use uuid::Uuid;

use casefile::db::{Database, DatabaseArgs, DbTimeouts};
use casefile::http::HttpOptions;
use casefile::model::{PurgeStatus, PurgeTrigger};
use casefile::retention::{
    Cutoff, Policy, PurgeBatches, PurgeFailed, Purged, RetentionOptions, purge,
};
use casefile::store::Store;

use crate::common::TestApp;
use crate::common::cli::{DataDir, casefile, stdout};

/// Every table whose rows belong to a session (through `session_id`), except the live change
/// log, which is pruned by its own rules.
const SESSION_TABLES: [&str; 20] = [
    "stages",
    "agent_executions",
    "timeline_events",
    "timeline_event_chunks",
    "streaming_event_ends",
    "event_texts_in_log",
    "messages",
    "tool_calls",
    "llm_interactions",
    "mcp_interactions",
    "llm_usage_rollups",
    "chats",
    "chat_user_messages",
    "session_events",
    "session_event_runs",
    "session_status_changes",
    "session_feed",
    "create_receipts",
    "event_stream_tickets",
    "notifications",
];

fn at(text: &str) -> DateTime<Utc> {
    text.parse().unwrap()
}

/// Rows left behind by sessions that no longer exist, per table (none, after any purge).
async fn orphans(pool: &PgPool) -> Vec<(String, i64)> {
    let mut found = Vec::new();
    for table in SESSION_TABLES {
        let n: i64 = sqlx::query_scalar(&format!(
            "SELECT count(*) FROM {table} t WHERE NOT EXISTS \
             (SELECT 1 FROM sessions s WHERE s.id = t.session_id)"
        ))
        .fetch_one(pool)
        .await
        .unwrap();
        if n > 0 {
            found.push((table.to_owned(), n));
        }
    }
    let chunks: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM timeline_event_chunks c \
         WHERE NOT EXISTS (SELECT 1 FROM timeline_events e WHERE e.id = c.event_id)",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    if chunks > 0 {
        found.push(("timeline_event_chunks".to_owned(), chunks));
    }
    found
}

/// How many rows each session-owned table holds for `sessions`.
async fn rows_of(pool: &PgPool, sessions: &[Uuid]) -> Vec<(String, i64)> {
    let mut counts = Vec::new();
    for table in SESSION_TABLES {
        let n: i64 = sqlx::query_scalar(&format!(
            "SELECT count(*) FROM {table} WHERE session_id = ANY($1)"
        ))
        .bind(sessions)
        .fetch_one(pool)
        .await
        .unwrap();
        counts.push((table.to_owned(), n));
    }
    counts
}

/// Runs `statements` without the triggers (as an import would): to move timestamps into the
/// past without recording changes that did not happen.
async fn backdate(pool: &PgPool, statements: &[String]) {
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("SET LOCAL session_replication_role = replica")
        .execute(&mut *tx)
        .await
        .unwrap();
    for statement in statements {
        sqlx::query(statement).execute(&mut *tx).await.unwrap();
    }
    tx.commit().await.unwrap();
}

/// `policy` purged from the command line by `cli:ops`, in `batches`, and never stopped.
async fn purge_by_ops(
    store: &Store,
    policy: &Policy,
    batches: PurgeBatches,
) -> Result<Purged, PurgeFailed> {
    let running = watch::channel(false).1;
    purge(
        store,
        policy,
        "cli:ops",
        PurgeTrigger::Command,
        batches,
        None,
        &running,
    )
    .await
}

async fn session_ids(pool: &PgPool) -> Vec<Uuid> {
    sqlx::query_scalar("SELECT id FROM sessions ORDER BY id")
        .fetch_all(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_purge_deletes_what_its_policy_selects_with_everything_under_it() {
    let app = TestApp::start().await;
    let pool = app.store.pool().clone();
    casefile::demo::load(&app.store).await.unwrap();
    let pick = |sql: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, Uuid>(sql)
                .fetch_all(&pool)
                .await
                .unwrap()
        }
    };
    let quiet = pick(
        "SELECT id FROM sessions s WHERE status = 'completed' \
         AND NOT EXISTS (SELECT 1 FROM chats c WHERE c.session_id = s.id) ORDER BY id LIMIT 3",
    )
    .await;
    let chatted = pick("SELECT DISTINCT session_id FROM chats").await;
    let running = pick("SELECT id FROM sessions WHERE completed_at IS NULL LIMIT 1").await;
    assert_eq!((quiet.len(), chatted.len(), running.len()), (3, 1, 1));
    let (deleted_long_ago, deleted_lately, finished_long_ago) = (quiet[0], quiet[1], quiet[2]);
    let chatted = chatted[0];
    backdate(
        &pool,
        &[
            format!(
                "UPDATE sessions SET deleted_at = '2025-01-01Z' WHERE id = '{deleted_long_ago}'"
            ),
            format!("UPDATE sessions SET deleted_at = '2025-12-01Z' WHERE id = '{deleted_lately}'"),
            format!(
                "UPDATE sessions SET created_at = '2024-12-31Z', started_at = '2024-12-31Z', \
                     completed_at = '2025-01-01Z' \
                 WHERE id IN ('{finished_long_ago}', '{chatted}')"
            ),
            // A follow-up chat still in use keeps its session.
            format!("UPDATE chats SET updated_at = '2025-12-01Z' WHERE session_id = '{chatted}'"),
            format!(
                "UPDATE sessions SET created_at = '2024-01-01Z' WHERE id = '{}'",
                running[0]
            ),
        ],
    )
    .await;
    let doomed = {
        let mut v = vec![deleted_long_ago, finished_long_ago];
        v.sort();
        v
    };
    let survivors: Vec<Uuid> = session_ids(&pool)
        .await
        .into_iter()
        .filter(|id| !doomed.contains(id))
        .collect();
    let survivors_before = rows_of(&pool, &survivors).await;
    let doomed_before = rows_of(&pool, &doomed).await;
    assert!(
        doomed_before.iter().filter(|(_, n)| *n > 0).count() >= 8,
        "the doomed sessions hold rows in most tables: {doomed_before:?}"
    );

    let cutoff = Some(Cutoff::At(at("2025-06-01T00:00:00Z")));
    let policy = Policy::new(cutoff, cutoff, None, Utc::now());
    // The dry run's counts are what goes.
    let counts = app.store.count_purgeable(&policy.sessions).await.unwrap();
    let count_of = |table: &str| {
        doomed_before
            .iter()
            .find(|(t, _)| t == table)
            .map(|(_, n)| *n)
            .unwrap()
    };
    assert_eq!(counts.sessions, 2);
    for (table, n) in [
        ("stages", counts.stages),
        ("agent_executions", counts.agent_executions),
        ("timeline_events", counts.timeline_events),
        ("messages", counts.messages),
        ("llm_interactions", counts.llm_interactions),
        ("mcp_interactions", counts.mcp_interactions),
        ("chats", counts.chats),
        ("session_events", counts.session_events),
        ("session_event_runs", counts.session_event_runs),
    ] {
        assert_eq!(n, count_of(table), "{table}");
    }

    // One session per batch: two batches that delete, and one that finds nothing left.
    let batches = PurgeBatches {
        size: 1,
        pause_ms: 0,
    };
    let purged = purge_by_ops(&app.store, &policy, batches).await.unwrap();
    assert_eq!(
        (purged.sessions, purged.receipts, purged.batches),
        (2, 0, 3)
    );
    let remaining = session_ids(&pool).await;
    assert_eq!(remaining, survivors, "exactly the selected sessions went");
    assert!(
        rows_of(&pool, &doomed).await.iter().all(|(_, n)| *n == 0),
        "nothing of them is left"
    );
    assert_eq!(rows_of(&pool, &survivors).await, survivors_before);
    assert_eq!(orphans(&pool).await, vec![]);

    // The record: who, when, the criteria, how many; admins read it through the API.
    let records = app.store.purges(10).await.unwrap();
    assert_eq!(records.len(), 1);
    let record = &records[0];
    assert_eq!(record.id, purged.id);
    assert_eq!(
        (record.actor.as_str(), record.trigger, record.status),
        ("cli:ops", PurgeTrigger::Command, PurgeStatus::Completed)
    );
    assert_eq!((record.sessions_deleted, record.receipts_deleted), (2, 0));
    assert!(record.finished_at.is_some());
    let d = app
        .data(
            "{ purges { uuid actor trigger status criteria sessionsDeleted receiptsDeleted errorMessage startedAt finishedAt } }",
            json!({}),
        )
        .await;
    let listed = &d["purges"][0];
    assert_eq!(listed["uuid"], purged.id.to_string());
    assert_eq!(
        (
            &listed["trigger"],
            &listed["status"],
            &listed["sessionsDeleted"]
        ),
        (&json!("COMMAND"), &json!("COMPLETED"), &json!(2))
    );
    assert_eq!(
        listed["criteria"],
        json!({
            "deletedBefore": { "instant": "2025-06-01T00:00:00Z" },
            "finishedBefore": { "instant": "2025-06-01T00:00:00Z" },
        })
    );
    let (code, _) = app.error("{ purges(first: 0) { uuid } }", json!({})).await;
    assert_eq!(code, "BAD_USER_INPUT");

    // Nothing more to do: a second run deletes nothing.
    let again = purge_by_ops(&app.store, &policy, PurgeBatches::default())
        .await
        .unwrap();
    assert_eq!((again.sessions, again.batches), (0, 1));
    app.stop().await;
}

#[tokio::test]
async fn old_receipts_are_forgotten_and_their_retries_become_conflicts() {
    let app = TestApp::start().await;
    let pool = app.store.pool().clone();
    let create = "mutation ($id: UUID!) { createSession(input: { id: $id, alertType: \"Disk\", chainId: \"c\" }) { uuid } }";
    let (old, new) = (Uuid::now_v7(), Uuid::now_v7());
    for id in [old, new] {
        app.data(create, json!({ "id": id })).await;
    }
    backdate(
        &pool,
        &[format!(
            "UPDATE create_receipts SET created_at = '2025-01-01Z' WHERE id = '{old}'"
        )],
    )
    .await;
    let policy = Policy::new(
        None,
        None,
        Some(Cutoff::At(at("2025-06-01T00:00:00Z"))),
        Utc::now(),
    );
    assert_eq!(
        app.store
            .count_old_receipts(policy.receipts_before.unwrap())
            .await
            .unwrap(),
        1
    );
    let purged = purge_by_ops(&app.store, &policy, PurgeBatches::default())
        .await
        .unwrap();
    assert_eq!((purged.sessions, purged.receipts), (0, 1));
    // A retry within the window is answered again; one past it is refused, never duplicated.
    let d = app.data(create, json!({ "id": new })).await;
    assert_eq!(d["createSession"]["uuid"], new.to_string());
    let (code, _) = app.error(create, json!({ "id": old })).await;
    assert_eq!(code, "CONFLICT");
    let sessions: i64 = sqlx::query_scalar("SELECT count(*) FROM sessions")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(sessions, 2);
    app.stop().await;
}

#[tokio::test]
async fn the_change_log_is_pruned_by_age_even_past_a_reader_that_lags() {
    let app = TestApp::start().await;
    let pool = app.store.pool().clone();
    // A reader that is alive but stuck at the start.
    app.store
        .change_log_heartbeat(Uuid::now_v7(), "stuck", 0, Duration::from_secs(300))
        .await
        .unwrap();
    let create =
        "mutation { createSession(input: { alertType: \"Disk\", chainId: \"c\" }) { uuid } }";
    app.data(create, json!({})).await;
    // The transactions that logged the changes, oldest and newest.
    let logged =
        "SELECT min(logged_in::text::bigint), max(logged_in::text::bigint) FROM live_changes";
    let (oldest, newest): (i64, i64) = sqlx::query_as(logged).fetch_one(&pool).await.unwrap();
    backdate(
        &pool,
        &["UPDATE live_changes SET created_at = now() - interval '2 hours'".to_owned()],
    )
    .await;
    app.data(create, json!({})).await;
    let (_, latest): (i64, i64) = sqlx::query_as(logged).fetch_one(&pool).await.unwrap();
    assert!(latest > newest);

    let hour = Duration::from_secs(3600);
    // By readers alone nothing goes: the stuck reader has read nothing.
    let pruned = app
        .store
        .prune_change_log(Duration::from_secs(300), Duration::from_secs(86_400))
        .await
        .unwrap();
    assert!(pruned <= oldest, "{pruned} <= {oldest}");
    let pruned = app
        .store
        .prune_change_log(Duration::from_secs(300), hour)
        .await
        .unwrap();
    assert_eq!(pruned, newest + 1, "everything older than an hour is gone");
    let unread_prunes: i64 = sqlx::query_scalar("SELECT unread_prunes FROM change_log_state")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(unread_prunes, 1, "the stuck reader had not read them");
    let left: Vec<i64> =
        sqlx::query_scalar("SELECT logged_in::text::bigint FROM live_changes ORDER BY 1")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert!(
        !left.is_empty() && left.iter().all(|x| *x > newest),
        "{left:?}"
    );
    app.stop().await;
}

#[tokio::test]
async fn the_server_purges_on_its_schedule_and_quiet_runs_leave_no_record() {
    // Each session the schedule deletes is archived first (`--retention-archive-dir`).
    let archive = std::env::temp_dir().join(format!("casefile-archive-{}", Uuid::now_v7()));
    let options = HttpOptions {
        retention: RetentionOptions {
            deleted_before: Some(chrono::Duration::days(30)),
            audit_before: Some(chrono::Duration::days(400)),
            interval: chrono::Duration::milliseconds(200),
            archive_dir: Some(archive.clone()),
            ..RetentionOptions::default()
        },
        ..HttpOptions::default()
    };
    let app = TestApp::start_with(options).await;
    let pool = app.store.pool().clone();
    let create =
        "mutation { createSession(input: { alertType: \"Disk\", chainId: \"c\" }) { uuid } }";
    let mut ids = Vec::new();
    for _ in 0..2 {
        let d = app.data(create, json!({})).await;
        let id = d["createSession"]["uuid"].as_str().unwrap().to_owned();
        app.data(
            "mutation ($id: ID!) { startSession(id: $id) { status } completeSession(input: { id: $id }) { status } deleteSession(id: $id) { deletedAt } }",
            json!({ "id": id }),
        )
        .await;
        ids.push(id);
    }
    // Deleted 40 days ago, and just now.
    backdate(
        &pool,
        &[format!(
            "UPDATE sessions SET deleted_at = now() - interval '40 days' WHERE id = '{}'",
            ids[0]
        )],
    )
    .await;
    let mut gone = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let d = app
            .data(
                "query ($id: ID!) { session(id: $id) { uuid } }",
                json!({ "id": ids[0] }),
            )
            .await;
        if d["session"].is_null() {
            gone = true;
            break;
        }
    }
    assert!(gone, "the schedule purged the session deleted 40 days ago");
    let archived: Value = serde_json::from_str(
        &std::fs::read_to_string(archive.join(format!("{}.json", ids[0]))).unwrap(),
    )
    .unwrap();
    assert_eq!(archived["session"]["id"], ids[0].as_str());
    assert!(archived["session"]["deleted_at"].is_string());
    assert_eq!(
        std::fs::read_dir(&archive).unwrap().count(),
        1,
        "the one it purged"
    );
    // Several more intervals pass with nothing to do.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let d = app
        .data(
            "query ($id: ID!) { session(id: $id) { uuid } }",
            json!({ "id": ids[1] }),
        )
        .await;
    assert_eq!(
        d["session"]["uuid"],
        ids[1].as_str(),
        "the recent one stays"
    );
    // A run in progress is recorded until it ends (a quiet one's record then goes), so a
    // moment between runs is awaited: while quiet runs kept their records, it never comes.
    let mut records = app.store.purges(10).await.unwrap();
    for _ in 0..100 {
        if records.len() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(37)).await;
        records = app.store.purges(10).await.unwrap();
    }
    assert_eq!(records.len(), 1, "only the run that deleted is recorded");
    assert_eq!(records[0].trigger, PurgeTrigger::Schedule);
    assert!(
        records[0].actor.starts_with("schedule:"),
        "{}",
        records[0].actor
    );
    assert_eq!(records[0].sessions_deleted, 1);
    assert_eq!(records[0].criteria["auditBefore"]["age"], "400d");
    assert_eq!(orphans(&pool).await, vec![]);
    std::fs::remove_dir_all(&archive).unwrap();
    app.stop().await;
}

#[tokio::test]
async fn a_stopped_purge_ends_after_its_batch_and_says_so() {
    let app = TestApp::start().await;
    let create =
        "mutation { createSession(input: { alertType: \"Disk\", chainId: \"c\" }) { uuid } }";
    app.data(create, json!({})).await;
    let (stopping, stop) = watch::channel(false);
    stopping.send(true).unwrap();
    let policy = Policy::new(
        Some(Cutoff::At(Utc::now())),
        None,
        Some(Cutoff::At(Utc::now())),
        Utc::now(),
    );
    let failed = purge(
        &app.store,
        &policy,
        "cli:ops",
        PurgeTrigger::Command,
        PurgeBatches::default(),
        None,
        &stop,
    )
    .await
    .unwrap_err();
    assert!(failed.to_string().contains("stopped"), "{failed}");
    let records = app.store.purges(1).await.unwrap();
    assert_eq!(records[0].id, failed.purged.id);
    assert_eq!(records[0].status, PurgeStatus::Failed);
    assert!(
        records[0]
            .error_message
            .as_deref()
            .unwrap()
            .contains("stopped")
    );
    app.stop().await;
}

#[tokio::test]
async fn a_purge_whose_process_died_is_marked_failed_by_the_next() {
    let app = TestApp::start().await;
    let pool = app.store.pool().clone();
    let (dead, alive) = (Uuid::now_v7(), Uuid::now_v7());
    for (id, ago) in [(dead, "2 hours"), (alive, "5 minutes")] {
        sqlx::query(&format!(
            "INSERT INTO purges (id, actor, trigger, criteria, started_at, heartbeat_at) \
             VALUES ($1, 'cli:ops', 'command', '{{}}', now() - interval '{ago}', \
                     now() - interval '{ago}')"
        ))
        .bind(id)
        .execute(&pool)
        .await
        .unwrap();
    }
    let policy = Policy::new(None, None, Some(Cutoff::At(Utc::now())), Utc::now());
    let purged = purge_by_ops(&app.store, &policy, PurgeBatches::default())
        .await
        .unwrap();
    let records = app.store.purges(10).await.unwrap();
    let find = |id: Uuid| records.iter().find(|r| r.id == id).unwrap();
    assert_eq!(find(purged.id).status, PurgeStatus::Completed);
    assert!(find(purged.id).heartbeat_at >= find(purged.id).started_at);
    let dead = find(dead);
    assert_eq!(dead.status, PurgeStatus::Failed);
    assert_eq!(dead.finished_at, Some(dead.heartbeat_at));
    assert!(
        dead.error_message
            .as_deref()
            .unwrap()
            .contains("process stopped")
    );
    assert_eq!(find(alive).status, PurgeStatus::Running, "it may still run");
    let d = app
        .data("{ purges { uuid status lastProgressAt } }", json!({}))
        .await;
    assert_eq!(d["purges"].as_array().unwrap().len(), 3);
    app.stop().await;
}

/// The count a dry run printed for `what`.
fn printed(out: &str, what: &str) -> i64 {
    out.lines()
        .find_map(|line| {
            let line = line.trim();
            line.strip_prefix(what)
                .filter(|rest| rest.starts_with(' '))
                .map(|rest| rest.trim().parse().unwrap())
        })
        .unwrap_or_else(|| panic!("no {what:?} in:\n{out}"))
}

#[tokio::test]
async fn the_purge_command_is_a_dry_run_until_told_to_execute() {
    let dir = DataDir::new("purge");
    let dir = &dir.0;
    stdout(&casefile(&["demo"], dir));
    // Everything finished until now (the demo's sessions are in the past).
    let now = Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let policy = ["purge", "--finished-before", now.as_str()];
    let out = stdout(&casefile(&policy, dir));
    assert!(out.starts_with("Dry run: nothing is deleted."), "{out}");
    let sessions = printed(&out, "sessions");
    assert!(sessions >= 10, "the demo's finished sessions: {out}");
    assert!(printed(&out, "timeline events") > 0, "{out}");
    assert_eq!(
        printed(&stdout(&casefile(&policy, dir)), "sessions"),
        sessions,
        "nothing went"
    );

    let executed = [&policy[..], &["--execute", "--purge-batch-size", "4"]].concat();
    let out = stdout(&casefile(&executed, dir));
    assert!(
        out.starts_with(&format!("Deleting sessions finished before {now}")),
        "{out}"
    );
    assert!(
        out.contains(&format!("deleted {sessions} sessions")),
        "{out}"
    );
    assert_eq!(printed(&stdout(&casefile(&policy, dir)), "sessions"), 0);

    let out = casefile(&["purge"], dir);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nothing to purge"),
        "{out:?}"
    );
    for bad in ["soon", "2999-01-01T00:00:00Z"] {
        let out = casefile(&["purge", "--deleted-before", bad], dir);
        assert!(!out.status.success(), "{bad}");
    }

    // The record says who ran it.
    let args = DatabaseArgs {
        database_url: None,
        data_dir: dir.clone(),
        db_max_connections: 1,
        timeouts: DbTimeouts::default(),
    };
    let db = Database::connect(&args).await.unwrap();
    let records = Store::new(db.pool().clone()).purges(5).await.unwrap();
    db.shutdown().await;
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].actor, "cli:ops");
    assert_eq!(records[0].sessions_deleted, sessions);
    assert_eq!(
        records[0].criteria,
        json!({ "finishedBefore": { "instant": now } })
    );
}

/// What a concurrent client saw: error codes, by what it did.
#[derive(Default)]
struct Seen {
    requests: usize,
    codes: Vec<String>,
    slowest: Duration,
}

#[tokio::test]
async fn purging_alongside_readers_and_writers_on_real_postgres() {
    let Some((app, _)) = TestApp::start_external("purging alongside readers and writers").await
    else {
        return;
    };
    let app = std::sync::Arc::new(app);
    let pool = app.store.pool().clone();
    // 500 sessions, each with a stage, two agents, twelve timeline events and six messages: 400
    // that finished 41 days ago and were soft-deleted 40 days ago; 50 that finished 49 days ago
    // with a chat quiet for 48 (both kinds past the policy below), and 50 with a chat active
    // today (kept).
    for statement in [
        "INSERT INTO sessions (id, alert_type, chain_id, status, created_at, started_at, completed_at) \
         SELECT gen_random_uuid(), 'Disk', 'k8s', 'completed', now() - interval '50 days', \
             now() - interval '50 days', now() - interval '49 days' \
         FROM generate_series(1, 500)",
        "INSERT INTO stages (id, session_id, stage_name, stage_index, expected_agent_count, \
             parallel_type, success_policy) \
         SELECT gen_random_uuid(), id, 'investigate', 0, 2, 'multi_agent', 'all' FROM sessions",
        "INSERT INTO agent_executions (id, stage_id, session_id, agent_name, agent_index, \
             iteration_strategy, agent_type, depth) \
         SELECT gen_random_uuid(), st.id, st.session_id, 'Agent' || i, i, 'react', \
             'global_supervisor', 0 \
         FROM stages st, generate_series(1, 2) i",
        "INSERT INTO timeline_events (id, session_id, stage_id, execution_id, sequence_number, \
             event_type, status, content) \
         SELECT gen_random_uuid(), e.session_id, e.stage_id, e.id, \
             (e.agent_index - 1) * 6 + n, 'llm_response', 'completed', 'disk is filling up ' || n \
         FROM agent_executions e, generate_series(1, 6) n",
        "INSERT INTO messages (id, session_id, stage_id, execution_id, sequence_number, role, content) \
         SELECT gen_random_uuid(), e.session_id, e.stage_id, e.id, n, 'user', 'look at the disk' \
         FROM agent_executions e, generate_series(1, 3) n",
        // Finished inside the policy's window, deleted past it: a restored one stays.
        "UPDATE sessions SET completed_at = now() - interval '41 days', \
             deleted_at = now() - interval '40 days' \
         WHERE id IN (SELECT id FROM sessions ORDER BY id LIMIT 400)",
        "INSERT INTO chats (id, session_id, created_at, updated_at) \
         SELECT gen_random_uuid(), id, now() - interval '48 days', \
             CASE WHEN row_number() OVER (ORDER BY id) <= 50 THEN now() - interval '48 days' \
                  ELSE now() END \
         FROM sessions WHERE deleted_at IS NULL",
    ] {
        sqlx::query(statement).execute(&pool).await.unwrap();
    }
    let deleted: Vec<Uuid> =
        sqlx::query_scalar("SELECT id FROM sessions WHERE deleted_at IS NOT NULL")
            .fetch_all(&pool)
            .await
            .unwrap();
    let quiet: Vec<(Uuid, Uuid)> = sqlx::query_as(
        "SELECT id, session_id FROM chats WHERE updated_at < now() - interval '1 day'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!((deleted.len(), quiet.len()), (400, 50));
    let doomed: Vec<Uuid> = {
        let mut v: Vec<Uuid> = deleted
            .iter()
            .copied()
            .chain(quiet.iter().map(|q| q.1))
            .collect();
        v.sort();
        v
    };

    let (done_tx, done) = watch::channel(false);
    let client = |work: &'static str| {
        let app = app.clone();
        let done = done.clone();
        let deleted = deleted.clone();
        let quiet = quiet.clone();
        tokio::spawn(async move {
            let mut seen = Seen::default();
            // Sessions this client's write kept: restored, or asked a question in.
            let mut kept = Vec::new();
            let mut i = 0usize;
            while !*done.borrow() {
                i += 1;
                let sent = std::time::Instant::now();
                let body = match work {
                    "list" => app.graphql(
                        "{ sessions(first: 50, filter: { includeDeleted: true }) { totalCount edges { node { id deletedAt stages { executions { timeline(first: 3) { edges { node { content } } } } } } } } }",
                        json!({}),
                    ).await,
                    "read" => app.graphql(
                        "query ($id: ID!) { session(id: $id) { id stages { executions { agentName messagesConnection(first: 20) { edges { node { content } } } } } timeline(first: 20) { edges { node { content } } } } }",
                        json!({ "id": deleted[(i * 7) % deleted.len()] }),
                    ).await,
                    "create" => app.graphql(
                        "mutation { createSession(input: { alertType: \"Fresh\", chainId: \"c\" }) { id } }",
                        json!({}),
                    ).await,
                    "restore" => {
                        let id = deleted[(i * 13) % deleted.len()];
                        let body = app.graphql(
                            "mutation ($id: ID!) { restoreSession(id: $id) { id } }",
                            json!({ "id": id }),
                        ).await;
                        if body["data"]["restoreSession"].is_object() {
                            kept.push(id);
                        }
                        body
                    }
                    "ask" => {
                        let (chat, session) = quiet[(i * 3) % quiet.len()];
                        let body = app.graphql(
                            "mutation ($c: ID!) { postChatMessage(input: { chatId: $c, content: \"still full?\" }) { id } }",
                            json!({ "c": chat }),
                        ).await;
                        if body["data"]["postChatMessage"].is_object() {
                            kept.push(session);
                        }
                        body
                    }
                    _ => app.graphql(
                        "mutation ($s: ID!) { openChat(input: { sessionId: $s }) { id } }",
                        json!({ "s": deleted[(i * 11) % deleted.len()] }),
                    ).await,
                };
                seen.requests += 1;
                seen.slowest = seen.slowest.max(sent.elapsed());
                if let Some(code) = body["errors"][0]["extensions"]["code"].as_str() {
                    seen.codes.push(code.to_owned());
                }
                if matches!(work, "restore" | "open" | "ask") {
                    tokio::time::sleep(Duration::from_millis(40)).await;
                }
            }
            (work, seen, kept)
        })
    };
    let clients: Vec<_> = ["list", "read", "create", "restore", "ask", "open"]
        .into_iter()
        .map(client)
        .collect();

    let policy = Policy::new(
        Some(Cutoff::Age(chrono::Duration::days(30))),
        Some(Cutoff::Age(chrono::Duration::days(45))),
        None,
        Utc::now(),
    );
    let batches = PurgeBatches {
        size: 5,
        pause_ms: 20,
    };
    let run = || purge_by_ops(&app.store, &policy, batches);
    let started = std::time::Instant::now();
    let first = run().await.unwrap();
    let took = started.elapsed();
    done_tx.send(true).unwrap();
    let mut kept = Vec::new();
    for client in clients {
        let (work, seen, mut theirs) = client.await.unwrap();
        kept.append(&mut theirs);
        let allowed: &[&str] = match work {
            // The chat's previous question is unanswered; the session was purged first.
            "ask" => &["CONFLICT", "NOT_FOUND"],
            // Restoring twice, or a session already purged.
            "restore" => &["CONFLICT", "NOT_FOUND"],
            // A deleted session takes no chat; a purged one is gone.
            "open" => &["CONFLICT", "NOT_FOUND"],
            _ => &[],
        };
        let unexpected: Vec<&String> = seen
            .codes
            .iter()
            .filter(|c| !allowed.contains(&c.as_str()))
            .collect();
        assert!(unexpected.is_empty(), "{work}: {unexpected:?}");
        assert!(seen.requests > 0, "{work} ran");
        eprintln!(
            "{work}: {} requests, {} refused as expected, slowest {:?}",
            seen.requests,
            seen.codes.len(),
            seen.slowest
        );
    }
    // What a writer held was skipped, not waited for; a second run takes what still qualifies.
    let second = run().await.unwrap();
    kept.sort();
    kept.dedup();
    eprintln!(
        "purged {} + {} sessions in {} batches in {took:?}; {} kept by a restore or a question",
        first.sessions,
        second.sessions,
        first.batches,
        kept.len()
    );
    assert!(!kept.is_empty(), "some writes raced the purge and won");
    let left: Vec<Uuid> =
        sqlx::query_scalar("SELECT id FROM sessions WHERE id = ANY($1) ORDER BY id")
            .bind(&doomed)
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(left, kept, "exactly the sessions a write kept survive");
    assert_eq!(
        first.sessions + second.sessions,
        (doomed.len() - kept.len()) as i64
    );
    let survivors: i64 =
        sqlx::query_scalar("SELECT count(*) FROM sessions WHERE alert_type = 'Disk'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(survivors, 50 + kept.len() as i64);
    assert_eq!(orphans(&pool).await, vec![]);
    let recorded: i64 = app
        .store
        .purges(10)
        .await
        .unwrap()
        .iter()
        .map(|p| p.sessions_deleted)
        .sum();
    assert_eq!(recorded, first.sessions + second.sessions);
    std::sync::Arc::into_inner(app).unwrap().stop().await;
}

/// A session's audit trail outlives its purge (which ends it, and is recorded itself), until
/// the audit retention forgets old records of both trails in batches, which is recorded too.
#[tokio::test]
async fn the_audit_trail_outlives_a_purged_session_until_its_own_retention() {
    let app = TestApp::start().await;
    let pool = app.store.pool().clone();
    let d = app
        .data(
            "mutation { createSession(input: { alertType: \"Disk\", chainId: \"c\" }) { uuid } }",
            json!({}),
        )
        .await;
    let id = d["createSession"]["uuid"].as_str().unwrap().to_owned();
    app.data(
        "mutation ($id: ID!) { startSession(id: $id) { status } completeSession(input: { id: $id }) { status } deleteSession(id: $id) { deletedAt } }",
        json!({ "id": id }),
    )
    .await;
    backdate(
        &pool,
        &[format!(
            "UPDATE sessions SET deleted_at = now() - interval '40 days' WHERE id = '{id}'"
        )],
    )
    .await;
    let sessions = Policy::new(
        Some(Cutoff::Age(chrono::Duration::days(30))),
        None,
        None,
        Utc::now(),
    );
    let purged = purge_by_ops(&app.store, &sessions, PurgeBatches::default())
        .await
        .unwrap();
    assert_eq!(purged.sessions, 1);
    let trail: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT action, actor FROM session_audit_records WHERE session_id = $1::text::uuid \
         ORDER BY at, id",
    )
    .bind(&id)
    .fetch_all(&pool)
    .await
    .unwrap();
    let actions: Vec<&str> = trail.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(
        actions,
        [
            "createSession",
            "startSession",
            "completeSession",
            "deleteSession",
            "purge"
        ]
    );
    assert_eq!(trail[4].1.as_deref(), Some("cli:ops"));
    let log = "query ($a: String!) { auditLog(filter: { action: $a }) { edges { node {
        actor targetType targetId changes { field after } } } } }";
    let d = app.data(log, json!({ "a": "purge" })).await;
    let edges = d["auditLog"]["edges"].as_array().unwrap();
    // The session's record and the purge's own.
    let purge = edges
        .iter()
        .find(|e| e["node"]["targetType"] == "Purge")
        .unwrap();
    assert_eq!(purge["node"]["targetId"], purged.id.to_string());
    assert_eq!(purge["node"]["actor"], "cli:ops");
    let sessions_deleted = purge["node"]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["field"] == "sessionsDeleted")
        .unwrap();
    assert_eq!(sessions_deleted["after"], 1);

    // Old records of both trails, more than a batch of each, and one made now.
    backdate(
        &pool,
        &[
            "UPDATE audit_records SET at = now() - interval '500 days'".to_owned(),
            "UPDATE session_audit_records SET at = now() - interval '500 days'".to_owned(),
            "INSERT INTO audit_records (id, at, action, target_type, target_id, changes) \
             SELECT gen_random_uuid(), now() - interval '450 days', 'old', 'Old', n::text, '[]' \
             FROM generate_series(1, 1500) n"
                .to_owned(),
            "INSERT INTO session_audit_records (session_id, id, at, action, target_type, \
                 target_id, changes) \
             SELECT gen_random_uuid(), gen_random_uuid(), now() - interval '450 days', 'old', \
                 'Old', n::text, '[]' FROM generate_series(1, 2500) n"
                .to_owned(),
        ],
    )
    .await;
    app.data(
        "mutation { registerChain(input: { name: \"kept\", version: \"1\", definition: { stages: [{ name: \"S\" }] } }) { uuid } }",
        json!({}),
    )
    .await;
    let old: i64 =
        sqlx::query_scalar("SELECT count(*) FROM audit_log WHERE action <> 'registerChain'")
            .fetch_one(&pool)
            .await
            .unwrap();
    let now = Utc::now();
    let policy = Policy::new(None, None, None, now)
        .with_audit_before(Some(Cutoff::Age(chrono::Duration::days(400))), now);
    assert_eq!(
        app.store
            .count_old_audit_records(policy.audit_before.unwrap())
            .await
            .unwrap(),
        old
    );
    let forgot = purge_by_ops(&app.store, &policy, PurgeBatches::default())
        .await
        .unwrap();
    assert_eq!(forgot.audit_records, old);
    assert!(forgot.batches >= 3, "in batches: {}", forgot.batches);
    let left: Vec<(String, String)> =
        sqlx::query_as("SELECT action, target_type FROM audit_log ORDER BY at, id")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(
        left,
        [
            ("registerChain".to_owned(), "Chain".to_owned()),
            ("purge".to_owned(), "Purge".to_owned())
        ]
    );
    let record = app.store.purges(1).await.unwrap().remove(0);
    assert_eq!(record.audit_records_deleted, old);
    app.stop().await;
}

/// A chat active since the cutoff keeps its finished session from a purge; a deleted one does
/// not (its owner gave it up: keeping the session for it would keep what no one follows).
#[tokio::test]
async fn a_deleted_chat_does_not_keep_its_session() {
    let app = TestApp::start().await;
    let pool = app.store.pool().clone();
    let mut sessions = Vec::new();
    let mut chats = Vec::new();
    for _ in 0..2 {
        let d = app
            .data(
                "mutation { createSession(input: { alertType: \"Disk\", chainId: \"c\" }) { uuid } }",
                json!({}),
            )
            .await;
        let session = d["createSession"]["uuid"].as_str().unwrap().to_owned();
        app.data(
            "mutation ($id: ID!) { startSession(id: $id) { status }
               completeSession(input: { id: $id }) { status } }",
            json!({ "id": session }),
        )
        .await;
        let d = app
            .data(
                "mutation ($s: ID!) { openChat(input: { sessionId: $s }) { id } }",
                json!({ "s": session }),
            )
            .await;
        sessions.push(session.parse::<Uuid>().unwrap());
        chats.push(d["openChat"]["id"].as_str().unwrap().to_owned());
    }
    let d = app
        .data(
            "mutation ($c: ID!) { deleteChat(input: { id: $c }) { deletedAt } }",
            json!({ "c": chats[1] }),
        )
        .await;
    assert!(d["deleteChat"]["deletedAt"].is_string(), "{d}");
    // Both finished long ago; both chats were active after the cutoff (now).
    backdate(
        &pool,
        &[format!(
            "UPDATE sessions SET created_at = '2024-12-31Z', started_at = '2024-12-31Z', \
                 completed_at = '2025-01-01Z' WHERE id IN ('{}', '{}')",
            sessions[0], sessions[1]
        )],
    )
    .await;
    let cutoff = Some(Cutoff::At(at("2025-06-01T00:00:00Z")));
    let policy = Policy::new(None, cutoff, None, Utc::now());
    assert_eq!(
        app.store
            .count_purgeable(&policy.sessions)
            .await
            .unwrap()
            .sessions,
        1
    );
    let batches = PurgeBatches {
        size: 10,
        pause_ms: 0,
    };
    let purged = purge_by_ops(&app.store, &policy, batches).await.unwrap();
    assert_eq!(purged.sessions, 1);
    assert_eq!(
        session_ids(&pool).await,
        [sessions[0]],
        "the session whose chat is live stays"
    );
    app.stop().await;
}
