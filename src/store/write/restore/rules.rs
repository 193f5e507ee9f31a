//! What a restore checks before it writes anything: each record against the live writers' own
//! checks, as if it were created now (the same functions, so the same limits and rules), and
//! the whole against what holds of the history the live writers leave behind: statuses and
//! times agree, a child belongs to its parent's session and stage, numbers run 1, 2, 3, …
//! without gaps, a stage's status is what its agents add up to, a session's fits its chain.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::commands::{
    completion, finish, new_chain, new_chat, new_event, new_execution, new_llm, new_mcp,
    new_message, new_notification, new_session, new_stage,
};
use super::{Records, refused};
use crate::error::{Error, Result};
use crate::model::{
    ExecutionStatus, NotificationStatus, SessionStatus, StageStatus, TimelineEventStatus,
};
use crate::store::write::chats::check_question;
use crate::store::write::executions::place;
use crate::store::write::interactions::check_count;
use crate::store::write::notifications;
use crate::store::write::sessions::check_failure;
use crate::store::write::stages::aggregate;
use crate::store::write::{
    check_optional, is_finished_execution, is_finished_session, is_finished_stage, limits, snake,
};
use crate::store::{
    ChatRow, ChatUserMessageRow, ExecutionRow, NotificationRow, Record, SessionRow, StageRow,
    TimelineEventRow,
};

/// Refuses the records, naming the first one that breaks a rule and the rule it breaks;
/// returns how many tool calls their messages request.
pub(super) fn check(records: &Records) -> Result<usize> {
    each(&records.chains, |chain| new_chain(chain)?.check())?;
    let sessions = index(&records.sessions)?;
    let chats = index(&records.chats)?;
    let stages = index(&records.stages)?;
    each(&records.chats, |chat| check_chat(chat, &sessions))?;
    each(&records.chat_messages, |question| {
        check_question_of(question, &chats)
    })?;
    each(&records.stages, |stage| {
        parent(&sessions, stage.session_id, stage.session_id, |s| s.id).map(drop)
    })?;
    let executions = check_executions(records, &stages)?;
    each(&records.stages, |stage| {
        let agents = records.executions.iter().filter(|e| e.stage_id == stage.id);
        check_stage(stage, agents)
    })?;
    each(&records.sessions, |session| {
        // A chat's answers run on a finished session: the chain is the rest.
        let chain = records.executions.iter().filter(|e| {
            e.session_id == session.id
                && stages.get(&e.stage_id).is_some_and(|s| s.chat_id.is_none())
        });
        check_session(session, chain)
    })?;
    let mut numbers = Numbering::default();
    let mut tool_calls = 0;
    each(&records.messages, |message| {
        let (execution, session, stage) =
            (message.execution_id, message.session_id, message.stage_id);
        in_execution(&executions, execution, session, stage)?;
        tool_calls += new_message(message)?.check()?.len();
        numbers.next(execution, i64::from(message.sequence_number))
    })?;
    for llm in &records.llm_interactions {
        let row = &llm.0;
        in_execution(&executions, row.execution_id, row.session_id, row.stage_id)
            .and_then(|_| new_llm(llm).check())
            .map_err(refused(row))?;
    }
    for mcp in &records.mcp_interactions {
        let row = &mcp.0;
        in_execution(&executions, row.execution_id, row.session_id, row.stage_id)
            .and_then(|_| new_mcp(mcp).check())
            .map_err(refused(row))?;
    }
    let questions = index(&records.chat_messages)?;
    each(&records.notifications, |notification| {
        check_notification(notification, &sessions, &questions)
    })?;
    let mut numbers = Numbering::default();
    each(&records.timeline_events, |event| {
        let execution = in_execution(
            &executions,
            event.execution_id,
            event.session_id,
            event.stage_id,
        )?;
        check_event(event, execution)?;
        numbers.next(event.session_id, event.sequence_number)
    })?;
    Ok(tool_calls)
}

/// Checks each record in turn; the first refused is named.
fn each<'r, R: Record>(records: &'r [R], mut check: impl FnMut(&'r R) -> Result<()>) -> Result<()> {
    records
        .iter()
        .try_for_each(|record| check(record).map_err(refused(record)))
}

/// Records by id; an id given twice is refused (the second would silently be dropped).
fn index<R: Record>(records: &[R]) -> Result<HashMap<Uuid, &R>> {
    let mut index = HashMap::with_capacity(records.len());
    for record in records {
        if index.insert(record.id(), record).is_some() {
            return Err(refused(record)(Error::bad_input("it is given twice")));
        }
    }
    Ok(index)
}

/// The parent a record names, which is restored with it, in the record's own session.
fn parent<'r, P: Record>(
    index: &HashMap<Uuid, &'r P>,
    id: Uuid,
    session_id: Uuid,
    session_of: impl Fn(&P) -> Uuid,
) -> Result<&'r P> {
    let parent = index.get(&id).ok_or_else(|| {
        Error::bad_input(format!("its {} {id} is not among the records", P::NAME))
    })?;
    if session_of(parent) != session_id {
        return Err(Error::bad_input(format!(
            "its {} {id} belongs to another session",
            P::NAME
        )));
    }
    Ok(parent)
}

/// The execution a record was made by, in the record's own session and stage.
fn in_execution<'r>(
    executions: &HashMap<Uuid, &'r ExecutionRow>,
    id: Uuid,
    session_id: Uuid,
    stage_id: Uuid,
) -> Result<&'r ExecutionRow> {
    let execution = parent(executions, id, session_id, |e| e.session_id)?;
    if execution.stage_id != stage_id {
        return Err(Error::bad_input(format!(
            "its agent execution {id} runs in another stage"
        )));
    }
    Ok(execution)
}

/// Checks the executions, each after its parent (parents first, as they are written).
fn check_executions<'r>(
    records: &'r Records,
    stages: &HashMap<Uuid, &StageRow>,
) -> Result<HashMap<Uuid, &'r ExecutionRow>> {
    let mut executions = HashMap::with_capacity(records.executions.len());
    each(&records.executions, |execution| {
        parent(stages, execution.stage_id, execution.session_id, |s| {
            s.session_id
        })?;
        let parent = match execution.parent_execution_id {
            None => None,
            Some(id) => Some(*executions.get(&id).ok_or_else(|| {
                Error::bad_input(format!(
                    "its parent execution {id} is not among the executions before it"
                ))
            })?),
        };
        check_execution(execution, parent)?;
        match executions.insert(execution.id, execution) {
            Some(_) => Err(Error::bad_input("it is given twice")),
            None => Ok(()),
        }
    })?;
    Ok(executions)
}

fn check_chat(chat: &ChatRow, sessions: &HashMap<Uuid, &SessionRow>) -> Result<()> {
    let session = parent(sessions, chat.session_id, chat.session_id, |s| s.id)?;
    new_chat(chat).check()?;
    // As `deleteChat` leaves it: who deleted it only with when.
    check_optional("deletedBy", chat.deleted_by.as_deref(), limits::NAME)?;
    if chat.deleted_by.is_some() && chat.deleted_at.is_none() {
        return Err(Error::bad_input(
            "it names who deleted it (`deleted_by`) but not when (`deleted_at`)",
        ));
    }
    if !is_finished_session(session.status) {
        return Err(Error::bad_input(format!(
            "its session is {}; a chat is opened on a finished session",
            snake(session.status)
        )));
    }
    Ok(())
}

fn check_question_of(question: &ChatUserMessageRow, chats: &HashMap<Uuid, &ChatRow>) -> Result<()> {
    parent(chats, question.chat_id, question.session_id, |c| {
        c.session_id
    })?;
    check_question(
        &question.content,
        question.author.as_deref(),
        question.created_by.as_deref(),
    )
}

/// A notification: the live writer's checks, of a finished session (notifications are written
/// with a session's end or a chat answer's), naming a question of its own session, and its
/// delivery's times and attempts as a worker's reports leave them.
fn check_notification(
    n: &NotificationRow,
    sessions: &HashMap<Uuid, &SessionRow>,
    questions: &HashMap<Uuid, &ChatUserMessageRow>,
) -> Result<()> {
    let session = parent(sessions, n.session_id, n.session_id, |s| s.id)?;
    if !is_finished_session(session.status) {
        return Err(Error::bad_input(format!(
            "its session is {}; notifications are written when it has ended",
            snake(session.status)
        )));
    }
    if let Some(question) = n.chat_question_id {
        parent(questions, question, n.session_id, |q| q.session_id)?;
    }
    notifications::check(&[new_notification(n)?])?;
    check_optional("lastError", n.last_error.as_deref(), notifications::ERROR)?;
    use NotificationStatus as S;
    let times = [
        (
            "sentAt",
            n.sent_at,
            matches!(n.status, S::Sent | S::Delivered),
        ),
        ("deliveredAt", n.delivered_at, n.status == S::Delivered),
        ("failedAt", n.failed_at, n.status == S::Failed),
        (
            "nextAttemptAt",
            n.next_attempt_at,
            matches!(n.status, S::Pending | S::Sending),
        ),
    ];
    for (field, at, expected) in times {
        if at.is_some() != expected {
            return Err(Error::bad_input(format!(
                "a {} notification {} `{field}`",
                snake(n.status),
                if expected { "needs" } else { "has no" }
            )));
        }
    }
    let most = if n.status == S::Failed {
        n.attempts == n.max_attempts
    } else {
        n.attempts <= n.max_attempts
    };
    if !most || (n.status != S::Pending && n.attempts == 0) {
        return Err(Error::bad_input(format!(
            "a {} notification cannot have had {} of its {} attempts",
            snake(n.status),
            n.attempts,
            n.max_attempts
        )));
    }
    Ok(())
}

/// Whether a record with a lifecycle has started, by its status.
#[derive(Clone, Copy)]
enum Started {
    No,
    Yes,
    /// It may have ended before it started (a pending one cancelled, say).
    Either,
}

/// Refuses times that disagree with a status: what has not started has no start time, what
/// has has one; what is finished has its end time, no earlier than its start, and what is
/// not has none.
fn check_span(
    status: &str,
    started: Started,
    finished: bool,
    started_at: Option<DateTime<Utc>>,
    completed_at: Option<DateTime<Utc>>,
) -> Result<()> {
    let refuse = |why: &str| Err(Error::bad_input(format!("it is {status}, {why}")));
    match (started, started_at) {
        (Started::No, Some(_)) => return refuse("but has a `startedAt`"),
        (Started::Yes, None) => return refuse("but has no `startedAt`"),
        _ => {}
    }
    match (finished, completed_at) {
        (true, None) => refuse("but has no `completedAt`"),
        (false, Some(_)) => refuse("but has a `completedAt`"),
        (true, Some(end)) if started_at.is_some_and(|start| end < start) => {
            refuse("but its `completedAt` is before its `startedAt`")
        }
        _ => Ok(()),
    }
}

/// A duration is 0 or more, and only a finished record has one.
fn check_duration(status: &str, finished: bool, duration_ms: Option<i64>) -> Result<()> {
    check_count("durationMs", duration_ms)?;
    if !finished && duration_ms.is_some() {
        return Err(Error::bad_input(format!(
            "it is {status}, but has a `durationMs`"
        )));
    }
    Ok(())
}

/// Numbers that run 1, 2, 3, … under each parent, in the order the records come.
#[derive(Default)]
struct Numbering(HashMap<Uuid, i64>);

impl Numbering {
    fn next(&mut self, parent: Uuid, number: i64) -> Result<()> {
        let next = self.0.entry(parent).or_default();
        *next += 1;
        if number != *next {
            return Err(Error::bad_input(format!(
                "its sequence number is {number}, where {next} comes next"
            )));
        }
        Ok(())
    }
}

fn check_session<'r>(
    session: &SessionRow,
    chain: impl Iterator<Item = &'r ExecutionRow>,
) -> Result<()> {
    new_session(session)?.check()?;
    completion(session).check()?;
    check_optional(
        "errorMessage",
        session.error_message.as_deref(),
        limits::TEXT,
    )?;
    let status = snake(session.status);
    let finished = is_finished_session(session.status);
    let started = match session.status {
        SessionStatus::Pending => Started::No,
        SessionStatus::InProgress | SessionStatus::Cancelling | SessionStatus::Completed => {
            Started::Yes
        }
        _ => Started::Either,
    };
    check_span(
        &status,
        started,
        finished,
        session.started_at,
        session.completed_at,
    )?;
    if matches!(
        session.status,
        SessionStatus::Failed | SessionStatus::TimedOut
    ) {
        check_failure(session.error_message.as_deref().unwrap_or_default())?;
    }
    if session.deleted_at.is_some() && !finished {
        return Err(Error::bad_input(format!(
            "it is {status}, but deleted: only a finished session can be deleted"
        )));
    }
    let chain: Vec<&ExecutionRow> = chain.collect();
    let running = chain.iter().find(|e| !is_finished_execution(e.status));
    let active = chain.iter().any(|e| e.status == ExecutionStatus::Active);
    let why = match (session.status, running) {
        (SessionStatus::Pending, _)
            if chain.iter().any(|e| e.status != ExecutionStatus::Pending) =>
        {
            "a pending session's agent executions have not started (the first to start starts it)"
        }
        (SessionStatus::Cancelling, _) if !active => {
            "a cancelling session has an agent execution still active (without one it is \
             cancelled)"
        }
        (_, Some(_)) if finished => {
            "a finished session has no agent execution still running (ending it ends them)"
        }
        _ => return Ok(()),
    };
    Err(Error::bad_input(format!("it is {status}: {why}")))
}

fn check_stage<'r>(
    stage: &StageRow,
    executions: impl IntoIterator<Item = &'r ExecutionRow>,
) -> Result<()> {
    new_stage(stage).check()?;
    check_optional("errorMessage", stage.error_message.as_deref(), limits::TEXT)?;
    let status = snake(stage.status);
    let finished = is_finished_stage(stage.status);
    let started = match stage.status {
        StageStatus::Pending => Started::No,
        _ => Started::Yes,
    };
    check_span(
        &status,
        started,
        finished,
        stage.started_at,
        stage.completed_at,
    )?;
    check_duration(&status, finished, stage.duration_ms)?;
    let (follows, _) = aggregate(stage, executions);
    if follows != stage.status {
        return Err(Error::bad_input(format!(
            "it is {status}, but its agents add up to {}",
            snake(follows)
        )));
    }
    Ok(())
}

fn check_execution(execution: &ExecutionRow, parent: Option<&ExecutionRow>) -> Result<()> {
    let new = new_execution(execution);
    new.check()?;
    let place = place(&new, parent)?;
    if place
        != (
            execution.agent_type,
            execution.team_name.clone(),
            execution.depth,
        )
    {
        let (agent_type, team, depth) = place;
        return Err(Error::bad_input(format!(
            "its place in its agent tree does not follow from its parent: it is a {} of team \
             {} at depth {depth}",
            snake(agent_type),
            team.as_deref().unwrap_or("(none)")
        )));
    }
    let status = snake(execution.status);
    let finished = is_finished_execution(execution.status);
    let started = match execution.status {
        ExecutionStatus::Pending => Started::No,
        ExecutionStatus::Active | ExecutionStatus::Completed => Started::Yes,
        _ => Started::Either,
    };
    check_span(
        &status,
        started,
        finished,
        execution.started_at,
        execution.completed_at,
    )?;
    check_duration(&status, finished, execution.duration_ms)?;
    if finished {
        return finish(execution).check();
    }
    if execution.error_message.is_some() || execution.result_summary.is_some() {
        return Err(Error::bad_input(format!(
            "it is {status}: an `errorMessage` or a `resultSummary` comes when it finishes"
        )));
    }
    Ok(())
}

fn check_event(event: &TimelineEventRow, execution: &ExecutionRow) -> Result<()> {
    new_event(event)?.check()?;
    if event.status == TimelineEventStatus::Streaming && is_finished_execution(execution.status) {
        return Err(Error::bad_input(format!(
            "it is streaming, but its agent execution is {} (a finishing execution ends its \
             streaming events)",
            snake(execution.status)
        )));
    }
    Ok(())
}
