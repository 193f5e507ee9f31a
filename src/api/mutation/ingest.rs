//! Batched ingest: a busy agent sends many appends and records in one request, applied in one
//! transaction.

use async_graphql::{Context, OneofObject, Result, Union};

use super::inputs::*;
use super::{Audit, TimelineAppend, origin, transaction};
use crate::api::ids::{self, NodeType, decode_as};
use crate::api::types::{
    AgentExecution, LlmInteraction, McpInteraction, Message, Stage, TimelineEvent,
};
use crate::error::Error;
use crate::error::refusals::{self, Refusal, Refused};
use crate::observe::metrics::{INGEST_APPENDED_BYTES, INGEST_BATCHED_OPERATIONS};
use crate::store::audit::Origin;
use crate::store::prices::PriceCache;
use crate::store::write::locks::{LockPlan, Owners, Target};
use crate::store::write::{executions, interactions, limits, messages, stages, timeline};

/// One operation of a batch: exactly one field is set.
#[derive(OneofObject)]
pub enum IngestOperation {
    /// As `createStage`.
    CreateStage(CreateStageInput),
    /// As `createAgentExecution`.
    CreateAgentExecution(CreateAgentExecutionInput),
    /// As `startAgentExecution`.
    StartAgentExecution(StartAgentExecutionInput),
    /// As `finishAgentExecution`.
    FinishAgentExecution(FinishAgentExecutionInput),
    /// As `createTimelineEvent`.
    CreateTimelineEvent(CreateTimelineEventInput),
    /// As `appendTimelineContent`.
    AppendTimelineContent(AppendTimelineContentInput),
    /// As `finishTimelineEvent`.
    FinishTimelineEvent(FinishTimelineEventInput),
    /// As `appendMessage`.
    AppendMessage(AppendMessageInput),
    /// As `recordLLMInteraction`.
    #[graphql(name = "recordLLMInteraction")]
    RecordLlmInteraction(RecordLlmInteractionInput),
    /// As `recordMCPInteraction`.
    #[graphql(name = "recordMCPInteraction")]
    RecordMcpInteraction(RecordMcpInteractionInput),
}

/// The result of one operation of a batch.
#[derive(Union)]
pub enum IngestItem {
    Stage(Stage),
    AgentExecution(AgentExecution),
    TimelineEvent(TimelineEvent),
    TimelineAppend(TimelineAppend),
    Message(Message),
    LlmInteraction(LlmInteraction),
    McpInteraction(McpInteraction),
}

/// An operation with its ids resolved, ready to run.
enum Command {
    CreateStage(stages::NewStage),
    CreateExecution(executions::NewExecution),
    StartExecution(uuid::Uuid),
    FinishExecution(executions::Finish),
    CreateEvent(timeline::NewEvent),
    Append(timeline::Append),
    FinishEvent(timeline::Finish),
    AppendMessage(messages::NewMessage),
    RecordLlm(interactions::NewLlmInteraction),
    RecordMcp(interactions::NewMcpInteraction),
}

impl Command {
    fn from_input(op: IngestOperation, max_attempts: i32) -> crate::error::Result<Command> {
        Ok(match op {
            IngestOperation::CreateStage(i) => Command::CreateStage(i.into_command()?),
            IngestOperation::CreateAgentExecution(i) => Command::CreateExecution(i.into_command()?),
            IngestOperation::StartAgentExecution(i) => {
                Command::StartExecution(decode_as(NodeType::AgentExecution, &i.id)?)
            }
            IngestOperation::FinishAgentExecution(i) => {
                Command::FinishExecution(i.into_command(max_attempts)?)
            }
            IngestOperation::CreateTimelineEvent(i) => Command::CreateEvent(i.into_command()?),
            IngestOperation::AppendTimelineContent(i) => Command::Append(i.into_command()?),
            IngestOperation::FinishTimelineEvent(i) => Command::FinishEvent(i.into_command()?),
            IngestOperation::AppendMessage(i) => Command::AppendMessage(i.into_command()?),
            IngestOperation::RecordLlmInteraction(i) => Command::RecordLlm(i.into_command()?),
            IngestOperation::RecordMcpInteraction(i) => Command::RecordMcp(i.into_command()?),
        })
    }

    /// Adds the locks this operation takes to the batch's.
    fn plan(&self, plan: &mut LockPlan) {
        match self {
            Command::CreateStage(new) => plan.session_of(Target::Session(new.session_id)),
            Command::CreateExecution(new) => plan.session_of(Target::Stage(new.stage_id)),
            Command::StartExecution(id) => plan.session_of(Target::Execution(*id)),
            Command::FinishExecution(finish) => plan.finishing(finish.id),
            Command::CreateEvent(new) => plan.session_of(Target::Execution(new.execution_id)),
            Command::Append(append) => plan.stream(append.event_id),
            Command::FinishEvent(finish) => {
                plan.session_of(Target::Event(finish.event_id));
                plan.stream(finish.event_id);
            }
            Command::AppendMessage(new) => plan.session_of(Target::Execution(new.execution_id)),
            Command::RecordLlm(new) => plan.session_of(Target::Execution(new.execution_id)),
            Command::RecordMcp(new) => plan.session_of(Target::Execution(new.execution_id)),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Command::CreateStage(_) => "createStage",
            Command::CreateExecution(_) => "createAgentExecution",
            Command::StartExecution(_) => "startAgentExecution",
            Command::FinishExecution(..) => "finishAgentExecution",
            Command::CreateEvent(_) => "createTimelineEvent",
            Command::Append(_) => "appendTimelineContent",
            Command::FinishEvent(_) => "finishTimelineEvent",
            Command::AppendMessage(_) => "appendMessage",
            Command::RecordLlm(_) => "recordLLMInteraction",
            Command::RecordMcp(_) => "recordMCPInteraction",
        }
    }

    /// Applies the command: what it did, and the bytes of timeline text it stored. The
    /// sessions of the records it creates join `owners`, for the later commands that name them;
    /// the prices it looks up join `prices`, for the later calls to the same model.
    async fn run(
        &self,
        conn: &mut sqlx::PgConnection,
        owners: &mut Owners,
        prices: &mut PriceCache,
        origin: &Origin,
    ) -> crate::error::Result<(IngestItem, usize)> {
        // A control-plane operation is audited as its own mutation would be.
        let audited = || origin.doing(self.name());
        let item = match self {
            Command::CreateStage(new) => {
                let stage = stages::create(conn, new, &audited()).await?;
                owners.learn(Target::Stage(stage.id), stage.session_id);
                IngestItem::Stage(Stage(stage.into()))
            }
            Command::CreateExecution(new) => {
                let execution = executions::create(conn, owners, new, &audited()).await?;
                owners.learn(Target::Execution(execution.id), execution.session_id);
                IngestItem::AgentExecution(AgentExecution(execution.into()))
            }
            Command::StartExecution(id) => IngestItem::AgentExecution(AgentExecution(
                executions::start(conn, owners, *id, &audited())
                    .await?
                    .into(),
            )),
            Command::FinishExecution(finish) => IngestItem::AgentExecution(AgentExecution(
                executions::finish(conn, owners, finish, &audited())
                    .await?
                    .into(),
            )),
            Command::CreateEvent(new) => {
                let event = timeline::create(conn, owners, new).await?;
                owners.learn(Target::Event(event.id), event.session_id);
                IngestItem::TimelineEvent(TimelineEvent(event.into()))
            }
            Command::Append(append) => {
                let done = timeline::append(conn, owners, append).await?;
                let item = IngestItem::TimelineAppend(TimelineAppend {
                    event_id: ids::encode(NodeType::TimelineEvent, append.event_id),
                    offset: append.offset,
                    end: done.end,
                    applied: done.stored,
                });
                return Ok((item, done.stored_bytes));
            }
            Command::FinishEvent(finish) => IngestItem::TimelineEvent(TimelineEvent(
                timeline::finish(conn, owners, finish).await?.into(),
            )),
            Command::AppendMessage(new) => {
                IngestItem::Message(Message(messages::append(conn, owners, new).await?.into()))
            }
            Command::RecordLlm(new) => IngestItem::LlmInteraction(LlmInteraction(
                interactions::record_llm(conn, owners, prices, new)
                    .await?
                    .into(),
            )),
            Command::RecordMcp(new) => IngestItem::McpInteraction(McpInteraction(
                interactions::record_mcp(conn, owners, new).await?.into(),
            )),
        };
        Ok((item, 0))
    }
}

/// Says which operation of the batch failed, keeping the error's kind (and so its code): the
/// client's mistakes, including those only the database caught (its refusals, in words).
fn in_operation(index: usize, name: &str, err: Error) -> Error {
    let at = |m: String| format!("operation {index} ({name}): {m}");
    match err {
        Error::NotFound(m) => Error::NotFound(at(m)),
        Error::BadUserInput(m) => Error::BadUserInput(at(m)),
        Error::Conflict(m) => Error::Conflict(at(m)),
        Error::Database(db) => match refusals::of(&db) {
            Some(Refusal {
                kind: kind @ (Refused::BadInput | Refused::Conflict),
                message,
            }) => {
                // The input checks missed it: worth a look, as at the edge.
                tracing::warn!(
                    operation = index,
                    "the database refused a batch's value: {db}"
                );
                if kind == Refused::BadInput {
                    Error::BadUserInput(at(message))
                } else {
                    Error::Conflict(at(message))
                }
            }
            _ => Error::Database(db),
        },
        other => other,
    }
}

pub(super) async fn run(
    ctx: &Context<'_>,
    operations: Vec<IngestOperation>,
) -> Result<Vec<IngestItem>> {
    if operations.len() > limits::BATCH {
        return Err(Error::bad_input(format!(
            "a batch holds at most {} operations, got {}",
            limits::BATCH,
            operations.len()
        ))
        .into());
    }
    let commands = operations
        .into_iter()
        .enumerate()
        .map(|(i, op)| {
            Command::from_input(op, super::max_attempts(ctx))
                .map_err(|e| in_operation(i, "input", e))
        })
        .collect::<crate::error::Result<Vec<_>>>()?;
    let mut plan = LockPlan::default();
    commands.iter().for_each(|c| c.plan(&mut plan));
    let names: Vec<&'static str> = commands.iter().map(Command::name).collect();
    let batch = (plan, commands);
    let batch = (batch, origin(ctx)?);
    let (items, appended_bytes) = transaction(
        ctx,
        Audit::Caller,
        batch,
        |conn, ((plan, commands), origin)| Box::pin(apply(conn, plan, commands, origin)),
    )
    .await?;
    for name in names {
        metrics::counter!(INGEST_BATCHED_OPERATIONS, "operation" => name).increment(1);
    }
    metrics::counter!(INGEST_APPENDED_BYTES).increment(appended_bytes as u64);
    Ok(items)
}

/// Takes the batch's locks, then applies its operations in order: what each did, and the
/// bytes of timeline text stored.
async fn apply(
    conn: &mut sqlx::PgConnection,
    plan: &LockPlan,
    commands: &[Command],
    origin: &Origin,
) -> crate::error::Result<(Vec<IngestItem>, usize)> {
    let mut owners = plan.acquire(conn).await?;
    let mut prices = PriceCache::default();
    let mut items = Vec::with_capacity(commands.len());
    let mut appended_bytes = 0;
    let mut i = 0;
    while i < commands.len() {
        let run = contiguous_appends(&commands[i..]);
        if run.len() > 1 {
            let (applied, bytes) = append_run(conn, &mut owners, &run)
                .await
                .map_err(|e| in_operation(i, "appendTimelineContent", e))?;
            items.extend(applied);
            appended_bytes += bytes;
            i += run.len();
            continue;
        }
        let command = &commands[i];
        let (item, bytes) = command
            .run(conn, &mut owners, &mut prices, origin)
            .await
            .map_err(|e| in_operation(i, command.name(), e))?;
        items.push(item);
        appended_bytes += bytes;
        i += 1;
    }
    Ok((items, appended_bytes))
}

/// The appends at the start of `commands` that continue one another in the same event (each
/// starting where the previous ended): stored as one chunk, so a batch of token-sized deltas
/// costs one row instead of one per token.
fn contiguous_appends(commands: &[Command]) -> Vec<&timeline::Append> {
    let mut run: Vec<&timeline::Append> = Vec::new();
    let mut merged_len = 0;
    for command in commands {
        let Command::Append(append) = command else {
            break;
        };
        let len = append.delta.chars().count();
        // An append that is invalid on its own runs alone, to be refused with its own message.
        if len == 0 || merged_len + len > limits::DELTA {
            break;
        }
        if let Some(last) = run.last()
            && (last.event_id != append.event_id
                || last.offset + last.delta.chars().count() as i64 != append.offset)
        {
            break;
        }
        merged_len += len;
        run.push(append);
    }
    run
}

/// Applies a run of contiguous appends as one, then reports each as if applied alone: the
/// characters it newly stored are those past what the event already held.
async fn append_run(
    conn: &mut sqlx::PgConnection,
    owners: &mut Owners,
    run: &[&timeline::Append],
) -> crate::error::Result<(Vec<IngestItem>, usize)> {
    let merged = timeline::Append {
        event_id: run[0].event_id,
        offset: run[0].offset,
        delta: run.iter().map(|a| a.delta.as_str()).collect(),
    };
    let done = timeline::append(conn, owners, &merged).await?;
    let held_before = done.end - done.stored;
    let items = run
        .iter()
        .map(|a| {
            let end = a.offset + a.delta.chars().count() as i64;
            IngestItem::TimelineAppend(TimelineAppend {
                event_id: ids::encode(NodeType::TimelineEvent, a.event_id),
                offset: a.offset,
                end,
                applied: (end - held_before.max(a.offset)).max(0),
            })
        })
        .collect();
    Ok((items, done.stored_bytes))
}
