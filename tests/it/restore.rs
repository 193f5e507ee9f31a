//! The row-restore writer: it takes the demo's records whole, once, and refuses a record that
//! breaks any rule it checks, naming the record and the rule, without writing anything.

use casefile::error::Error;
use casefile::model::{
    AgentType, ExecutionStatus, MessageRole, NotificationStatus, SessionStatus, StageStatus,
    TimelineEventStatus,
};
use casefile::store::write::restore::{Records, restore};
use casefile::store::{ExecutionRow, SessionRow};
use uuid::Uuid;

use crate::common::{TestDb, restorer};

/// Rows in every table the restore writes (a change-log entry stands for each row of the
/// tables that have one).
async fn rows(pool: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM sessions) + (SELECT count(*) FROM live_changes) \
              + (SELECT count(*) FROM tool_calls)",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn restores_the_demo_once_and_keeps_a_session_that_is_there() {
    let db = TestDb::start().await;
    let store = db.store();
    let records = casefile::demo::records();
    let first = restore(&store, &records, &restorer()).await.unwrap();
    // The sessions' records and the 6 chain versions they ran.
    assert_eq!((first.new, first.tool_calls), (565, 31));
    assert_eq!(restore(&store, &records, &restorer()).await.unwrap().new, 0);

    // A session that is there keeps what it has, and so do its records.
    let mut changed = records.clone();
    changed.sessions[0].alert_type = "Changed".into();
    assert_eq!(restore(&store, &changed, &restorer()).await.unwrap().new, 0);
    let alert_type: String = sqlx::query_scalar("SELECT alert_type FROM sessions WHERE id = $1")
        .bind(records.sessions[0].id)
        .fetch_one(db.db.pool())
        .await
        .unwrap();
    assert_eq!(alert_type, records.sessions[0].alert_type);
    db.stop().await;
}

/// A change to the demo's records that breaks one rule, and words of the refusal.
type Case = (&'static str, fn(&mut Records), &'static str);

/// The last session in `status` (the first completed one has a chat).
fn session(r: &mut Records, status: SessionStatus) -> &mut SessionRow {
    r.sessions
        .iter_mut()
        .rev()
        .find(|s| s.status == status)
        .unwrap()
}

fn session_id(r: &Records, status: SessionStatus) -> Uuid {
    r.sessions.iter().find(|s| s.status == status).unwrap().id
}

fn sub_agent(r: &mut Records) -> &mut ExecutionRow {
    r.executions
        .iter_mut()
        .find(|e| e.parent_execution_id.is_some())
        .unwrap()
}

fn first_tool_message(r: &mut Records) -> usize {
    r.messages
        .iter()
        .position(|m| m.role == MessageRole::Tool)
        .unwrap()
}

const CASES: &[Case] = &[
    (
        "a session given twice",
        |r| r.sessions.push(r.sessions[0].clone()),
        "is given twice",
    ),
    (
        "a session's own checks",
        |r| r.sessions[0].alert_type = " ".into(),
        "`alertType` must not be empty",
    ),
    (
        "a final analysis over the limit",
        |r| r.sessions[0].final_analysis = Some("x".repeat(1_000_001)),
        "`finalAnalysis` is 1000001 characters long",
    ),
    (
        "a finished session without its end",
        |r| session(r, SessionStatus::Completed).completed_at = None,
        "it is completed, but has no `completedAt`",
    ),
    (
        "a running session with an end",
        |r| session(r, SessionStatus::InProgress).completed_at = Some(chrono::Utc::now()),
        "it is in_progress, but has a `completedAt`",
    ),
    (
        "a pending session that started",
        |r| session(r, SessionStatus::Pending).started_at = Some(chrono::Utc::now()),
        "it is pending, but has a `startedAt`",
    ),
    (
        "a session that ended before it started",
        |r| {
            let s = session(r, SessionStatus::Completed);
            s.completed_at = s.started_at.map(|t| t - chrono::TimeDelta::seconds(1));
        },
        "its `completedAt` is before its `startedAt`",
    ),
    (
        "a failed session without its reason",
        |r| session(r, SessionStatus::Failed).error_message = None,
        "`errorMessage` must not be empty",
    ),
    (
        "a running session deleted",
        |r| session(r, SessionStatus::InProgress).deleted_at = Some(chrono::Utc::now()),
        "only a finished session can be deleted",
    ),
    (
        "a pending session whose agents started",
        |r| {
            let s = session(r, SessionStatus::InProgress);
            (s.status, s.started_at) = (SessionStatus::Pending, None);
        },
        "a pending session's agent executions have not started",
    ),
    (
        "a cancelling session with no agent active",
        |r| {
            let s = session(r, SessionStatus::Completed);
            (s.status, s.completed_at) = (SessionStatus::Cancelling, None);
        },
        "a cancelling session has an agent execution still active",
    ),
    (
        "a finished session with an agent running",
        |r| {
            let s = session(r, SessionStatus::InProgress);
            s.status = SessionStatus::Cancelled;
            s.completed_at = s.started_at;
        },
        "a finished session has no agent execution still running",
    ),
    (
        "a chat of a session not restored",
        |r| r.chats[0].session_id = Uuid::nil(),
        "its session 00000000-0000-0000-0000-000000000000 is not among the records",
    ),
    (
        "a chat's own checks",
        |r| r.chats[0].title = Some(" ".into()),
        "`title` must not be empty",
    ),
    (
        "a chat's deleter without when",
        |r| r.chats[0].deleted_by = Some("token:alice".into()),
        "names who deleted it (`deleted_by`) but not when",
    ),
    (
        "a chat on a running session",
        |r| {
            let running = session_id(r, SessionStatus::InProgress);
            r.chats[0].session_id = running;
        },
        "a chat is opened on a finished session",
    ),
    (
        "a question in another session",
        |r| {
            let other = session_id(r, SessionStatus::Failed);
            r.chat_messages[0].session_id = other;
        },
        "belongs to another session",
    ),
    (
        "a question's own checks",
        |r| r.chat_messages[0].content = String::new(),
        "message cannot be empty",
    ),
    (
        "a stage's own checks",
        |r| r.stages[0].expected_agent_count = 0,
        "`expectedAgentCount` must be at least 1",
    ),
    (
        "a stage with a negative duration",
        |r| r.stages[0].duration_ms = Some(-1),
        "`durationMs` must be 0 or more",
    ),
    (
        "a stage whose status is not its agents'",
        |r| r.stages[0].status = StageStatus::Failed,
        "it is failed, but its agents add up to completed",
    ),
    (
        "a stage index used twice",
        |r| {
            let first = r.stages[0].stage_index;
            r.stages[1].stage_index = first;
        },
        "already has stage",
    ),
    (
        "a chat stage linked to another chat",
        |r| {
            let stage = r.stages.iter_mut().find(|s| s.chat_id.is_some()).unwrap();
            stage.chat_id = Some(Uuid::nil());
        },
        "is not a chat of session",
    ),
    (
        "an agent execution given twice",
        |r| r.executions.push(r.executions[0].clone()),
        "is given twice",
    ),
    (
        "an agent execution's own checks",
        |r| r.executions[0].agent_index = 0,
        "`agentIndex` must be at least 1",
    ),
    (
        "an agent execution in another session's stage",
        |r| {
            let other = session_id(r, SessionStatus::Pending);
            r.executions[0].session_id = other;
        },
        "belongs to another session",
    ),
    (
        "a sub-agent before its parent",
        |r| {
            let at = r
                .executions
                .iter()
                .position(|e| e.parent_execution_id.is_some())
                .unwrap();
            let sub = r.executions.remove(at);
            r.executions.insert(0, sub);
        },
        "is not among the executions before it",
    ),
    (
        "a sub-agent at the wrong depth",
        |r| sub_agent(r).depth += 1,
        "its place in its agent tree does not follow from its parent",
    ),
    (
        "a global supervisor under a parent",
        |r| sub_agent(r).agent_type = AgentType::GlobalSupervisor,
        "a `GLOBAL_SUPERVISOR` has no team",
    ),
    (
        "a completed agent execution with an error",
        |r| {
            let e = r
                .executions
                .iter_mut()
                .find(|e| e.status == ExecutionStatus::Completed);
            e.unwrap().error_message = Some("oops".into());
        },
        "a completed execution takes no `errorMessage`",
    ),
    (
        "a running agent execution with a result",
        |r| {
            let e = r
                .executions
                .iter_mut()
                .find(|e| e.status == ExecutionStatus::Active);
            e.unwrap().result_summary = Some("done".into());
        },
        "comes when it finishes",
    ),
    (
        "an agent index used twice",
        |r| {
            let stage = r.stages.iter().find(|s| s.expected_agent_count == 3);
            let stage = stage.unwrap().id;
            let mut agents = r.executions.iter_mut().filter(|e| e.stage_id == stage);
            let first = agents.next().unwrap().agent_index;
            agents.next().unwrap().agent_index = first;
        },
        "already has agent",
    ),
    (
        "more top-level agents than the stage expects",
        |r| {
            let stage = r.stages.iter_mut().find(|s| s.expected_agent_count == 3);
            stage.unwrap().expected_agent_count = 2;
        },
        "expects 2 agent(s) and already has them",
    ),
    (
        "a sub-agent in another stage than its parent",
        |r| {
            let sub = sub_agent(r);
            let (id, session) = (sub.id, sub.session_id);
            let stage = Uuid::now_v7();
            let mut other = r
                .stages
                .iter()
                .find(|s| s.session_id == session)
                .unwrap()
                .clone();
            (other.id, other.stage_index, other.stage_name) = (stage, 99, "Elsewhere".into());
            (
                other.expected_agent_count,
                other.parallel_type,
                other.success_policy,
            ) = (1, None, None);
            (other.status, other.started_at, other.completed_at) =
                (StageStatus::Pending, None, None);
            other.duration_ms = None;
            r.stages.push(other);
            r.executions
                .iter_mut()
                .filter(|e| e.id == id)
                .for_each(|e| e.stage_id = stage);
            r.messages
                .iter_mut()
                .filter(|m| m.execution_id == id)
                .for_each(|m| m.stage_id = stage);
            let (llm, mcp) = (&mut r.llm_interactions, &mut r.mcp_interactions);
            llm.iter_mut()
                .filter(|l| l.0.execution_id == id)
                .for_each(|l| l.0.stage_id = stage);
            mcp.iter_mut()
                .filter(|m| m.0.execution_id == id)
                .for_each(|m| m.0.stage_id = stage);
            let events = r
                .timeline_events
                .iter_mut()
                .filter(|e| e.execution_id == id);
            events.for_each(|e| e.stage_id = stage);
        },
        "runs in another stage; a sub-agent runs in its parent's stage",
    ),
    (
        "a message of an agent in another stage",
        |r| {
            let other = r
                .stages
                .iter()
                .find(|s| s.id != r.messages[0].stage_id)
                .unwrap()
                .id;
            r.messages[0].stage_id = other;
        },
        "runs in another stage",
    ),
    (
        "a message out of its sequence",
        |r| r.messages[1].sequence_number += 1,
        "its sequence number is 3, where 2 comes next",
    ),
    (
        "a message's own checks",
        |r| {
            let at = first_tool_message(r);
            r.messages[at].tool_call_id = None;
        },
        "a `TOOL` message needs the `toolCallId` it answers",
    ),
    (
        "an answer to a call nobody requested",
        |r| {
            let at = first_tool_message(r);
            r.messages[at].tool_call_id = Some("call_nobody".into());
        },
        "no message of this conversation requested tool call `call_nobody`",
    ),
    (
        "a message id another record holds",
        |r| r.messages[1].id = r.messages[0].id,
        "is already used by another record",
    ),
    (
        "an LLM interaction's own checks",
        |r| r.llm_interactions[0].0.estimated_cost_usd = Some(rust_decimal::Decimal::NEGATIVE_ONE),
        "`totalCostUsd` must be between 0 and",
    ),
    (
        "an LLM interaction sent another agent's conversation",
        |r| {
            let mine = r.llm_interactions[0].0.execution_id;
            let other = r
                .messages
                .iter()
                .find(|m| m.execution_id != mine)
                .unwrap()
                .id;
            r.llm_interactions[0].0.last_message_id = Some(other);
        },
        "is not a message of agent execution",
    ),
    (
        "an MCP interaction's own checks",
        |r| {
            let call = r
                .mcp_interactions
                .iter_mut()
                .find(|m| m.0.tool_call_id.is_some());
            call.unwrap().0.tool_name = None;
        },
        "a `TOOL_CALL` interaction needs `toolName`",
    ),
    (
        "an MCP call nobody requested",
        |r| {
            let call = r
                .mcp_interactions
                .iter_mut()
                .find(|m| m.0.tool_call_id.is_some());
            call.unwrap().0.tool_call_id = Some("call_nobody".into());
        },
        "requested tool call `call_nobody`",
    ),
    (
        "an MCP call's attempt out of order",
        |r| {
            let retry = r.mcp_interactions.iter_mut().find(|m| m.0.attempt > 1);
            retry.unwrap().0.attempt = 3;
        },
        "it is attempt 3 at its tool call, but the next attempt is 2",
    ),
    (
        "an MCP call's attempt taken",
        |r| {
            let retry = r.mcp_interactions.iter_mut().find(|m| m.0.attempt > 1);
            retry.unwrap().0.attempt = 1;
        },
        "it is attempt 1 at its tool call, but the next attempt is 2",
    ),
    (
        "a timeline event out of its sequence",
        |r| r.timeline_events[0].sequence_number = 2,
        "its sequence number is 2, where 1 comes next",
    ),
    (
        "a timeline event's own checks",
        |r| r.timeline_events[0].content = "nul \0".into(),
        "`content` contains a NUL character",
    ),
    (
        "a streaming event of a finished agent",
        |r| {
            let finished: Vec<Uuid> = r
                .executions
                .iter()
                .filter(|e| e.status == ExecutionStatus::Completed)
                .map(|e| e.id)
                .collect();
            let event = r
                .timeline_events
                .iter_mut()
                .find(|e| finished.contains(&e.execution_id));
            event.unwrap().status = TimelineEventStatus::Streaming;
        },
        "it is streaming, but its agent execution is completed",
    ),
    (
        "a timeline event linked to another session's interaction",
        |r| {
            let event = r
                .timeline_events
                .iter()
                .position(|e| e.llm_interaction_id.is_some());
            let event = event.unwrap();
            let session = r.timeline_events[event].session_id;
            let other = r
                .llm_interactions
                .iter()
                .find(|l| l.0.session_id != session);
            r.timeline_events[event].llm_interaction_id = Some(other.unwrap().0.id);
        },
        "belongs to another session",
    ),
    (
        "a notification of a session still running",
        |r| {
            let running = session_id(r, SessionStatus::InProgress);
            r.notifications[0].session_id = running;
        },
        "notifications are written when it has ended",
    ),
    (
        "a notification naming another session's question",
        |r| {
            let question = r.chat_messages[0].clone();
            let other = r
                .notifications
                .iter_mut()
                .find(|n| n.session_id != question.session_id);
            other.unwrap().chat_question_id = Some(question.id);
        },
        "belongs to another session",
    ),
    (
        "a notification's own checks",
        |r| r.notifications[0].destination = String::new(),
        "`destination` must not be empty",
    ),
    (
        "a delivered notification never delivered",
        |r| {
            let delivered = r
                .notifications
                .iter_mut()
                .find(|n| n.status == NotificationStatus::Delivered);
            delivered.unwrap().delivered_at = None;
        },
        "a delivered notification needs `deliveredAt`",
    ),
    (
        "a notification failed for good with attempts left",
        |r| {
            let failed = r
                .notifications
                .iter_mut()
                .find(|n| n.status == NotificationStatus::Failed);
            failed.unwrap().max_attempts += 1;
        },
        "a failed notification cannot have had 3 of its 4 attempts",
    ),
];

#[tokio::test]
async fn refuses_each_rule_naming_the_record_and_writes_nothing() {
    let db = TestDb::start().await;
    let store = db.store();
    let demo = casefile::demo::records();
    for (what, change, words) in CASES {
        let mut records = demo.clone();
        change(&mut records);
        match restore(&store, &records, &restorer()).await {
            Err(Error::BadUserInput(message)) => {
                assert!(message.contains(words), "{what}: refused with {message:?}");
            }
            other => panic!("{what}: {other:?}"),
        }
        assert_eq!(rows(db.db.pool()).await, 0, "{what}: something was written");
    }
    db.stop().await;
}
