//! The database itself refuses inconsistent data: foreign keys across the hierarchy, enum
//! CHECKs, uniqueness, and cascades from sessions.

use chrono::Utc;
use sqlx::PgPool;
use uuid::Uuid;

use crate::common::TestDb;
use crate::common::fixtures::{self, At, NewSession};

async fn fails(pool: &PgPool, sql: &str, binds: &[Uuid]) -> String {
    let mut query = sqlx::query(sql);
    for b in binds {
        query = query.bind(*b);
    }
    match query.execute(pool).await {
        Ok(_) => panic!("expected the database to refuse: {sql}"),
        Err(err) => err.to_string(),
    }
}

#[tokio::test]
async fn rows_cannot_point_across_sessions_or_break_enums() {
    let db = TestDb::start().await;
    let pool = db.db.pool();
    let a = fixtures::session(pool, NewSession::default()).await;
    let b = fixtures::session(pool, NewSession::default()).await;
    let stage_a = fixtures::stage(pool, a, 0, "A", 1).await;
    let stage_b = fixtures::stage(pool, b, 0, "B", 1).await;
    let exec_a = fixtures::execution(pool, a, stage_a, 1, "Agent", None).await;
    let exec_b = fixtures::execution(pool, b, stage_b, 1, "Agent", None).await;

    // An execution whose stage belongs to another session.
    let err = fails(
        pool,
        "INSERT INTO agent_executions (id, stage_id, session_id, agent_name, agent_index, iteration_strategy) \
         VALUES ($1, $2, $3, 'X', 2, 'react')",
        &[Uuid::now_v7(), stage_a, b],
    )
    .await;
    assert!(err.contains("foreign key"), "{err}");
    // A sub-agent whose parent runs in another session.
    let err = fails(
        pool,
        "INSERT INTO agent_executions (id, stage_id, session_id, parent_execution_id, agent_name, agent_index, iteration_strategy) \
         VALUES ($1, $2, $3, $4, 'X', 2, 'react')",
        &[Uuid::now_v7(), stage_b, b, exec_a],
    )
    .await;
    assert!(err.contains("foreign key"), "{err}");
    // A timeline event whose execution is in another stage.
    let err = fails(
        pool,
        "INSERT INTO timeline_events (id, session_id, stage_id, execution_id, sequence_number, event_type) \
         VALUES ($1, $2, $3, $4, 1, 'llm_response')",
        &[Uuid::now_v7(), b, stage_b, exec_a],
    )
    .await;
    assert!(err.contains("foreign key"), "{err}");
    // An LLM interaction whose last message belongs to another execution.
    let message_b = fixtures::message(
        pool,
        At {
            session: b,
            stage: stage_b,
            execution: exec_b,
        },
        1,
        "user",
        "hi",
    )
    .await;
    let err = fails(
        pool,
        "INSERT INTO llm_interactions (id, session_id, stage_id, execution_id, interaction_type, model_name, last_message_id) \
         VALUES ($1, $2, $3, $4, 'iteration', 'm', $5)",
        &[Uuid::now_v7(), a, stage_a, exec_a, message_b],
    )
    .await;
    assert!(err.contains("foreign key"), "{err}");

    for (sql, expected) in [
        (
            "UPDATE sessions SET status = 'exploded' WHERE id = $1",
            "check",
        ),
        (
            "UPDATE stages SET status = 'running' WHERE session_id = $1",
            "check",
        ),
        (
            "UPDATE stages SET parallel_type = 'replica' WHERE session_id = $1",
            "check",
        ),
        (
            "INSERT INTO stages (id, session_id, stage_name, stage_index, expected_agent_count) \
          SELECT gen_random_uuid(), $1, 'dup', 0, 1",
            "unique",
        ),
        (
            "UPDATE agent_executions SET status = 'done' WHERE session_id = $1",
            "check",
        ),
        (
            "UPDATE sessions SET completed_at = now() - interval '1 day', started_at = now() WHERE id = $1",
            "check",
        ),
    ] {
        let err = fails(pool, sql, &[a]).await;
        assert!(err.contains(expected), "{sql}: {err}");
    }
    for content in ["", "   \n\t ", &"x".repeat(5001)] {
        let err = sqlx::query(
            "WITH c AS (INSERT INTO chats (id, session_id) VALUES (gen_random_uuid(), $1) RETURNING id) \
             INSERT INTO chat_user_messages (id, chat_id, session_id, content) SELECT gen_random_uuid(), c.id, $1, $2 FROM c",
        )
        .bind(a)
        .bind(content)
        .execute(pool)
        .await
        .unwrap_err();
        assert!(err.to_string().contains("check"), "{err}");
    }
    let err = fails(
        pool,
        "INSERT INTO messages (id, session_id, stage_id, execution_id, sequence_number, role, content, tool_calls) \
         VALUES ($1, $2, $3, $4, 9, 'tool', 'x', '[]')",
        &[Uuid::now_v7(), a, stage_a, exec_a],
    )
    .await;
    assert!(err.contains("check"), "{err}");
    db.stop().await;
}

#[tokio::test]
async fn deleting_a_session_removes_everything_under_it() {
    let db = TestDb::start().await;
    let pool = db.db.pool();
    let doomed = fixtures::investigation(pool, Utc::now()).await;
    let kept = fixtures::investigation(pool, Utc::now()).await;
    sqlx::query("DELETE FROM sessions WHERE id = $1")
        .bind(doomed)
        .execute(pool)
        .await
        .unwrap();
    for table in [
        "stages",
        "agent_executions",
        "timeline_events",
        "messages",
        "llm_interactions",
        "mcp_interactions",
        "chats",
        "chat_user_messages",
    ] {
        let (gone, left): (i64, i64) = sqlx::query_as(&format!(
            "SELECT count(*) FILTER (WHERE session_id = $1), count(*) FILTER (WHERE session_id = $2) FROM {table}"
        ))
        .bind(doomed)
        .bind(kept)
        .fetch_one(pool)
        .await
        .unwrap();
        assert_eq!(gone, 0, "{table}");
        assert!(left > 0, "{table}");
    }
    db.stop().await;
}

#[tokio::test]
async fn migrations_are_idempotent() {
    let db = TestDb::start().await;
    db.db.migrate().await.unwrap();
    let applied: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations WHERE success")
        .fetch_one(db.db.pool())
        .await
        .unwrap();
    assert_eq!(applied as usize, casefile::db::MIGRATOR.iter().count());
    db.stop().await;
}

/// A constraint added `NOT VALID` (to skip the scan of the rows from before while writes go on)
/// is validated by a later migration, and an index built `CONCURRENTLY` finished: once migrated,
/// every constraint holds for every row, and every index is usable.
#[tokio::test]
async fn every_constraint_is_validated_and_every_index_valid() {
    let db = TestDb::start().await;
    let pool = db.db.pool();
    let unvalidated: Vec<String> = sqlx::query_scalar(
        "SELECT conrelid::regclass || '.' || conname FROM pg_constraint \
         WHERE NOT convalidated AND connamespace = 'public'::regnamespace ORDER BY 1",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(unvalidated.is_empty(), "not validated: {unvalidated:?}");
    let invalid: Vec<String> = sqlx::query_scalar(
        "SELECT indexrelid::regclass::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
         WHERE NOT (indisvalid AND indisready) AND c.relnamespace = 'public'::regnamespace \
         ORDER BY 1",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(invalid.is_empty(), "invalid indexes: {invalid:?}");
    db.stop().await;
}
