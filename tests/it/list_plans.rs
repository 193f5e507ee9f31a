//! How the dashboard's session list is read at volume: its loaders' statements are planned
//! once per connection and read their index on every execution.

use casefile::store::Key;

use crate::common::TestApp;

#[tokio::test]
async fn a_lists_loaders_read_their_index_with_a_plan_made_once() {
    let app = TestApp::start().await;
    let mut conn = app.store.pool().acquire().await.unwrap();
    // Rows as an import would write them (the live-change triggers are not measured here).
    sqlx::query("SET session_replication_role = replica")
        .execute(&mut *conn)
        .await
        .unwrap();
    for statement in [
        "INSERT INTO sessions (id, alert_type, chain_id, created_at) \
         SELECT gen_random_uuid(), 'PodCrashLooping', 'k8s', now() - make_interval(secs => n) \
         FROM generate_series(1, 2000) n",
        "INSERT INTO stages (id, session_id, stage_name, stage_index, expected_agent_count) \
         SELECT gen_random_uuid(), s.id, 'stage ' || i, i, 1 \
         FROM sessions s, generate_series(0, 1) i",
        "INSERT INTO agent_executions (id, stage_id, session_id, agent_name, agent_index, \
             iteration_strategy, agent_type, depth) \
         SELECT gen_random_uuid(), st.id, st.session_id, 'KubernetesAgent', 1, 'react', \
             'global_supervisor', 0 \
         FROM stages st",
        "RESET session_replication_role",
        "ANALYZE sessions, stages, agent_executions",
    ] {
        sqlx::query(statement).execute(&mut *conn).await.unwrap();
    }
    let sessions: Vec<uuid::Uuid> =
        sqlx::query_scalar("SELECT id FROM sessions ORDER BY created_at DESC LIMIT 20")
            .fetch_all(&mut *conn)
            .await
            .unwrap();
    let stages: Vec<Key> = sqlx::query_as::<_, (uuid::Uuid, uuid::Uuid)>(
        "SELECT session_id, id FROM stages WHERE session_id = ANY($1)",
    )
    .bind(&sessions)
    .fetch_all(&mut *conn)
    .await
    .unwrap()
    .into_iter()
    .map(|(session, id)| Key::new(session, id))
    .collect();
    drop(conn);
    assert_eq!(stages.len(), 40);

    let [stage_plan, execution_plan] = app
        .store
        .explain_list_loaders(&sessions, &stages)
        .await
        .unwrap();
    for (plan, index) in [
        (&stage_plan, "stages_session_id_stage_index_key"),
        (&execution_plan, "agent_executions_stage_id_agent_index_key"),
    ] {
        assert!(plan.contains(index), "{index} is not read:\n{plan}");
        assert!(!plan.contains("Seq Scan"), "a sequential scan:\n{plan}");
        // The generic plan: made on the first execution and kept, not re-planned for each
        // list of ids (a custom plan shows the ids themselves where it shows `$1`).
        assert!(plan.contains("$1"), "not the generic plan:\n{plan}");
        assert!(!plan.contains("::uuid[]"), "not the generic plan:\n{plan}");
    }
}
