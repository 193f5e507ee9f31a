//! Tool calls joined to their results by the id the model gave each call: the assistant
//! message that requested it, the tool message answering it, the MCP interactions executing it
//! (one per attempt, `migrations/0098_mcp_interaction_attempts.sql`) and the timeline events
//! showing it (`migrations/0013_tool_call_links.sql`).

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value as Json;
use sqlx::FromRow;
use uuid::Uuid;

use super::{McpInteractionRow, MessageRow, Record, Store, TimelineEventRow};
use crate::error::Result;
use crate::model::TimelineEventType;

/// A tool call as its parts name it: the conversation (execution, in its session) and the
/// model's call id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CallKey {
    pub session_id: Uuid,
    pub execution_id: Uuid,
    pub call_id: String,
}

/// One call an assistant message requested.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestedCall {
    /// Its place in the message's `tool_calls` array, from 0.
    pub position: i32,
    pub call_id: String,
    pub tool_name: String,
    pub arguments: Json,
}

/// The calls in an assistant message's `tool_calls`, in order. A call is an element with a
/// string `id` and a name: `name` (Anthropic's and the flat form) or `function.name`
/// (OpenAI's). Its arguments are `arguments`, `input` or `function.arguments`; OpenAI sends
/// them as a JSON string, which is read as the JSON it holds. Elements that are not calls are
/// skipped (the write API refuses them; rows stored before it did may hold them).
pub fn requested_calls(tool_calls: &Json) -> Vec<RequestedCall> {
    let Some(elements) = tool_calls.as_array() else {
        return Vec::new();
    };
    elements
        .iter()
        .enumerate()
        .filter_map(|(position, call)| {
            let call_id = call.get("id")?.as_str()?;
            let function = call.get("function");
            let name = call
                .get("name")
                .or_else(|| function?.get("name"))?
                .as_str()?;
            let arguments = call
                .get("arguments")
                .or_else(|| call.get("input"))
                .or_else(|| function?.get("arguments"))
                .map_or(Json::Null, |a| match a {
                    Json::String(text) => serde_json::from_str(text).unwrap_or_else(|_| a.clone()),
                    other => other.clone(),
                });
            Some(RequestedCall {
                position: i32::try_from(position).ok()?,
                call_id: call_id.to_owned(),
                tool_name: name.to_owned(),
                arguments,
            })
        })
        .collect()
}

/// The timeline events showing a call: the model asking for it, the tool running.
#[derive(Debug, Clone, Default)]
pub struct CallEvents {
    /// The `LLM_TOOL_CALL` event (the first, in timeline order).
    pub request: Option<Arc<TimelineEventRow>>,
    /// The `MCP_TOOL_CALL` event (the first likewise).
    pub execution: Option<Arc<TimelineEventRow>>,
}

/// Rows by the call they name (`key` gives the row's session, execution and call id, if any).
fn by_call<R>(
    rows: Vec<R>,
    key: impl Fn(&R) -> (Uuid, Uuid, Option<String>),
) -> HashMap<CallKey, Arc<R>> {
    rows.into_iter()
        .filter_map(|row| {
            let (session_id, execution_id, call_id) = key(&row);
            let key = CallKey {
                session_id,
                execution_id,
                call_id: call_id?,
            };
            Some((key, Arc::new(row)))
        })
        .collect()
}

impl Store {
    /// The rows of `sql`, whose keys are [`CALL_KEYS`]: every key bound as three parallel
    /// arrays.
    async fn rows_by_call<R>(&self, sql: &str, keys: &[CallKey]) -> Result<Vec<R>>
    where
        R: for<'r> FromRow<'r, sqlx::postgres::PgRow> + Send + Unpin,
    {
        let executions: Vec<Uuid> = keys.iter().map(|k| k.execution_id).collect();
        let calls: Vec<&str> = keys.iter().map(|k| k.call_id.as_str()).collect();
        let sessions: Vec<Uuid> = keys.iter().map(|k| k.session_id).collect();
        Ok(sqlx::query_as(sql)
            .bind(&executions)
            .bind(&calls)
            .bind(&sessions)
            .fetch_all(self.reader().await?.traced())
            .await?)
    }

    /// The assistant message requesting each call, and the call's place in it.
    pub async fn requests_by_call(
        &self,
        keys: &[CallKey],
    ) -> Result<HashMap<CallKey, (i32, Arc<MessageRow>)>> {
        #[derive(FromRow)]
        struct Row {
            call_id: String,
            position: i32,
            #[sqlx(flatten)]
            message: MessageRow,
        }
        let rows: Vec<Row> = self
            .rows_by_call(
                &format!(
                    "SELECT t.call_id, t.position, m.* FROM {CALL_KEYS} \
                     JOIN tool_calls t USING (execution_id, call_id, session_id) \
                     JOIN messages m ON m.id = t.message_id AND m.session_id = t.session_id"
                ),
                keys,
            )
            .await?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let key = CallKey {
                    session_id: r.message.session_id,
                    execution_id: r.message.execution_id,
                    call_id: r.call_id,
                };
                (key, (r.position, Arc::new(r.message)))
            })
            .collect())
    }

    /// The `TOOL` message answering each call (the first, in conversation order).
    pub async fn answers_by_call(
        &self,
        keys: &[CallKey],
    ) -> Result<HashMap<CallKey, Arc<MessageRow>>> {
        let rows: Vec<MessageRow> = self
            .rows_by_call(
                &format!(
                    "SELECT DISTINCT ON (m.session_id, m.execution_id, m.tool_call_id) m.* \
                     FROM {CALL_KEYS} \
                     JOIN messages m ON m.execution_id = k.execution_id \
                       AND m.tool_call_id = k.call_id AND m.session_id = k.session_id \
                     ORDER BY m.session_id, m.execution_id, m.tool_call_id, m.sequence_number"
                ),
                keys,
            )
            .await?;
        Ok(by_call(rows, |m| {
            (m.session_id, m.execution_id, m.tool_call_id.clone())
        }))
    }

    /// The MCP interactions executing each call: its attempts, in order.
    pub async fn mcp_interactions_by_call(
        &self,
        keys: &[CallKey],
    ) -> Result<HashMap<CallKey, Vec<Arc<McpInteractionRow>>>> {
        let sql = format!(
            "SELECT {} FROM {CALL_KEYS} \
             JOIN mcp_interactions i ON i.execution_id = k.execution_id \
               AND i.tool_call_id = k.call_id AND i.session_id = k.session_id \
             ORDER BY i.attempt",
            prefixed("i", McpInteractionRow::COLUMNS)
        );
        let rows: Vec<McpInteractionRow> = self.rows_by_call(&sql, keys).await?;
        let mut attempts: HashMap<CallKey, Vec<Arc<McpInteractionRow>>> = HashMap::new();
        for row in rows {
            let Some(call_id) = row.tool_call_id.clone() else {
                continue;
            };
            let key = CallKey {
                session_id: row.session_id,
                execution_id: row.execution_id,
                call_id,
            };
            attempts.entry(key).or_default().push(Arc::new(row));
        }
        Ok(attempts)
    }

    /// The timeline events showing each call.
    pub async fn events_by_call(&self, keys: &[CallKey]) -> Result<HashMap<CallKey, CallEvents>> {
        #[derive(FromRow)]
        struct Row {
            call_id: String,
            #[sqlx(flatten)]
            event: TimelineEventRow,
        }
        let sql = format!(
            "SELECT DISTINCT ON (e.session_id, e.execution_id, k.call_id, e.event_type) \
                    k.call_id, e.* \
             FROM {CALL_KEYS} \
             JOIN {} e ON e.execution_id = k.execution_id AND e.session_id = k.session_id \
               AND e.metadata ->> 'tool_call_id' = k.call_id \
               AND e.event_type IN ('llm_tool_call', 'mcp_tool_call') \
             ORDER BY e.session_id, e.execution_id, k.call_id, e.event_type, e.sequence_number",
            TimelineEventRow::source(None)
        );
        let rows: Vec<Row> = self.rows_by_call(&sql, keys).await?;
        let mut events: HashMap<CallKey, CallEvents> = HashMap::new();
        for Row { call_id, event } in rows {
            let key = CallKey {
                session_id: event.session_id,
                execution_id: event.execution_id,
                call_id,
            };
            let slot = events.entry(key).or_default();
            match event.event_type {
                TimelineEventType::LlmToolCall => slot.request = Some(Arc::new(event)),
                _ => slot.execution = Some(Arc::new(event)),
            }
        }
        Ok(events)
    }
}

/// The keys of a statement about calls, as the table `k`.
const CALL_KEYS: &str =
    "unnest($1::uuid[], $2::text[], $3::uuid[]) AS k (execution_id, call_id, session_id)";

/// `columns`, each qualified by `alias`.
fn prefixed(alias: &str, columns: &str) -> String {
    columns
        .split(',')
        .map(|c| format!("{alias}.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ")
}
