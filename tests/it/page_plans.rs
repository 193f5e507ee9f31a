//! How an agent's pages are read in a long session: each page statement, on the plan a
//! connection keeps for it, reads its parent's own index, never its whole session's rows.

use casefile::store::page::Slice;
use casefile::store::{
    MessagePageKey, Payloads, RecordPageKey, Scope, TimelineFilter, TimelinePageKey,
};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::common::TestApp;
use crate::common::fixtures::{self, NewSession};

/// Agents of the long session, and rows of each kind per agent.
const AGENTS: i32 = 40;
const PER_AGENT: i32 = 50;

#[tokio::test]
async fn an_agents_pages_read_its_own_index_in_a_long_session() {
    let app = TestApp::start().await;
    let pool = app.store.pool();
    let session = fixtures::session(pool, NewSession::default()).await;
    let stages = [
        fixtures::stage(pool, session, 0, "investigation", AGENTS).await,
        fixtures::stage(pool, session, 1, "synthesis", AGENTS).await,
    ];
    let mut conn = pool.acquire().await.unwrap();
    // Rows as an import would write them (the triggers that record live changes are not what
    // is measured here).
    sqlx::query("SET session_replication_role = replica")
        .execute(&mut *conn)
        .await
        .unwrap();
    for (statement, rows) in [
        (
            "INSERT INTO agent_executions (id, stage_id, session_id, agent_name, agent_index, status, \
             iteration_strategy, agent_type, depth) \
         SELECT gen_random_uuid(), st.id, st.session_id, 'agent ' || i, i, 'completed', 'react', \
             'global_supervisor', 0 \
         FROM stages st, generate_series(1, $2) i WHERE st.session_id = $1",
            AGENTS,
        ),
        (
            "INSERT INTO llm_interactions (id, session_id, stage_id, execution_id, interaction_type, \
             model_name, llm_request, llm_response, created_at) \
         SELECT gen_random_uuid(), e.session_id, e.stage_id, e.id, 'iteration', 'gemini-2.5-pro', \
             '{\"messages\": []}', '{\"text\": \"ok\"}', now() - make_interval(secs => n) \
         FROM agent_executions e, generate_series(1, $2) n WHERE e.session_id = $1",
            PER_AGENT,
        ),
        (
            "INSERT INTO mcp_interactions (id, session_id, stage_id, execution_id, interaction_type, \
             server_name, tool_name, tool_arguments, tool_result, created_at) \
         SELECT gen_random_uuid(), e.session_id, e.stage_id, e.id, 'tool_call', 'kubernetes', \
             'kubectl_get_pods', '{}', '{}', now() - make_interval(secs => n) \
         FROM agent_executions e, generate_series(1, $2) n WHERE e.session_id = $1",
            PER_AGENT,
        ),
        (
            "INSERT INTO timeline_events (id, session_id, stage_id, execution_id, \
                 sequence_number, event_type, status, content, metadata) \
             SELECT gen_random_uuid(), e.session_id, e.stage_id, e.id, \
                 row_number() OVER (ORDER BY e.stage_id, e.agent_index, n), 'llm_response', \
                 'completed', 'token', '{}' \
             FROM agent_executions e, generate_series(1, $2) n WHERE e.session_id = $1",
            PER_AGENT,
        ),
        (
            "INSERT INTO messages (id, session_id, stage_id, execution_id, sequence_number, role, \
             content) \
         SELECT gen_random_uuid(), e.session_id, e.stage_id, e.id, n, 'assistant', 'step' \
         FROM agent_executions e, generate_series(1, $2) n WHERE e.session_id = $1",
            PER_AGENT,
        ),
    ] {
        sqlx::query(statement)
            .bind(session)
            .bind(rows)
            .execute(&mut *conn)
            .await
            .unwrap();
    }
    for statement in [
        "RESET session_replication_role",
        "ANALYZE agent_executions, llm_interactions, mcp_interactions, messages, timeline_events",
    ] {
        sqlx::query(statement).execute(&mut *conn).await.unwrap();
    }
    let agents: Vec<Uuid> = sqlx::query_scalar(
        "SELECT id FROM agent_executions WHERE stage_id = $1 ORDER BY agent_index LIMIT 5",
    )
    .bind(stages[0])
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    let middle: (DateTime<Utc>, Uuid) = sqlx::query_as(
        "SELECT created_at, id FROM llm_interactions WHERE execution_id = $1 \
         ORDER BY created_at, id OFFSET 25 LIMIT 1",
    )
    .bind(agents[0])
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    drop(conn);

    // First pages, and pages after a cursor (which also probe for rows before it).
    let slices = [None, Some(middle)].map(page_after);
    for slice in &slices {
        for (scope, parents, own_index) in [
            (Scope::Execution, &agents[..], "execution_idx"),
            (Scope::Stage, &stages[..], "stage_idx"),
        ] {
            let keys: Vec<RecordPageKey> = parents
                .iter()
                .map(|&parent| RecordPageKey {
                    session,
                    parent,
                    slice: slice.clone(),
                    counted: false,
                    payloads: Payloads::default(),
                })
                .collect();
            for (table, plan) in [
                (
                    "llm_interactions",
                    app.store
                        .explain_llm_interaction_pages(scope, &keys)
                        .await
                        .unwrap(),
                ),
                (
                    "mcp_interactions",
                    app.store
                        .explain_mcp_interaction_pages(scope, &keys)
                        .await
                        .unwrap(),
                ),
            ] {
                let label = format!("{table} by {scope:?}, after {:?}", slice.after);
                assert_reads_only(&plan, &format!("{table}_{own_index}"), table, &label);
            }
        }
    }
    // Messages, in conversation order: a stage's along (stage, execution, sequence), an
    // agent's along (execution, sequence).
    for (scope, parents, own_index) in [
        (
            Scope::Execution,
            &agents[..],
            "messages_execution_id_sequence_number_key",
        ),
        (Scope::Stage, &stages[..], "messages_stage_order_idx"),
    ] {
        for after in [None, Some((agents[0], 25))] {
            let keys: Vec<MessagePageKey> = parents
                .iter()
                .map(|&parent| MessagePageKey {
                    session,
                    parent,
                    slice: page_after(after),
                    counted: false,
                    payloads: Payloads::default(),
                })
                .collect();
            let plan = app.store.explain_message_pages(scope, &keys).await.unwrap();
            let label = format!("messages by {scope:?}, after {after:?}");
            assert_reads_only(&plan, own_index, "messages", &label);
        }
    }
    // Timelines, by sequence number: the agent's or the stage's own (parent, sequence) index.
    for (scope, parents, own_index) in [
        (
            Scope::Execution,
            &agents[..],
            "timeline_events_execution_idx",
        ),
        (Scope::Stage, &stages[..], "timeline_events_stage_idx"),
    ] {
        for after in [None, Some(1_000)] {
            let keys: Vec<TimelinePageKey> = parents
                .iter()
                .map(|&parent| TimelinePageKey {
                    session,
                    parent,
                    slice: page_after(after),
                    filter: TimelineFilter::default(),
                })
                .collect();
            let plan = app
                .store
                .explain_timeline_pages(scope, &TimelineFilter::default(), &keys)
                .await
                .unwrap();
            let label = format!("timeline by {scope:?}, after {after:?}");
            assert_reads_only(&plan, own_index, "timeline_events", &label);
        }
    }
    app.stop().await;
}

/// The 20 rows after `after` (from the start without it).
fn page_after<K>(after: Option<K>) -> Slice<K> {
    Slice {
        after,
        before: None,
        size: 20,
        from_end: false,
    }
}

/// The plan reads `table` only along `index`, and is the kept (generic) plan.
fn assert_reads_only(plan: &str, index: &str, table: &str, label: &str) {
    println!("{label}:\n{plan}\n");
    assert!(
        plan.contains(index),
        "{label}: {index} is not read:\n{plan}"
    );
    let other_reads = plan
        .lines()
        .filter(|line| {
            line.contains(&format!(" on public.{table} "))
                || line.contains(&format!(" on {table} "))
        })
        .filter(|line| !line.contains(index));
    assert_eq!(
        other_reads.collect::<Vec<_>>(),
        Vec::<&str>::new(),
        "{label}: {table} is read otherwise than along {index}:\n{plan}"
    );
    assert!(
        plan.contains("$1"),
        "{label}: not the generic plan:\n{plan}"
    );
}
