//! The audit trail: one record per control-plane change, written by the store in the change's
//! own transaction (a rolled-back change leaves none; a retry that changes nothing writes
//! none). [`diff`] is the one place a record's "what changed" is built, and [`fields`] the one
//! place that says which fields of each record it shows (and which it leaves out). A change
//! within a session is kept with the session (`session_audit_records`); others in
//! `audit_records`; [`log`] reads both.

mod fields;
pub mod log;

use serde_json::{Value as Json, json};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::error::Result;
use crate::store::traced::traced;

/// Data-plane mutations: no audit record (the records they write are their own trail, and a
/// record per appended chunk would halve write throughput).
pub const EXEMPT: &[&str] = &[
    "appendTimelineContent",
    "appendMessage",
    "recordLLMInteraction",
    "recordMCPInteraction",
    "createTimelineEvent",
    "finishTimelineEvent",
    "recordSystemNotice",
];

/// Mutations whose change leaves one audit record (the test of the whole Mutation type reads
/// this list and [`EXEMPT`]: a mutation in neither fails it). `ingest` leaves one for each
/// control-plane operation it holds, named as that operation's mutation.
pub const AUDITED: &[&str] = &[
    "createSession",
    "registerChain",
    "deprecateChain",
    "startSession",
    "completeSession",
    "failSession",
    "timeOutSession",
    "requestSessionCancellation",
    "deleteSession",
    "restoreSession",
    "createStage",
    "createAgentExecution",
    "startAgentExecution",
    "finishAgentExecution",
    "createEventStreamTicket",
    "openChat",
    "postChatMessage",
    "renameChat",
    "deleteChat",
    "restoreChat",
    "ingest",
    "setModelPrice",
    "claimNotifications",
    "markNotificationSent",
    "markNotificationDelivered",
    "markNotificationFailed",
    "createApiToken",
    "revokeApiToken",
    "createShareLink",
    "revokeShareLink",
];

/// Who asked for a change, and from where.
#[derive(Debug, Clone, Default)]
pub struct Origin {
    /// The caller's identity, as `createdBy` records it.
    pub actor: Option<String>,
    /// The mutation's name in the schema: the record's action.
    pub action: String,
    pub request_id: Option<String>,
    pub client_address: Option<String>,
    pub user_agent: Option<String>,
}

impl Origin {
    /// The same caller doing `action` (an operation of an `ingest` batch, named as its own
    /// mutation).
    pub fn doing(&self, action: &str) -> Origin {
        Origin {
            action: action.to_owned(),
            ..self.clone()
        }
    }
}

/// A record the audit trail describes: what it is, which one, the session it belongs to (if
/// any), and the fields a change to it shows.
pub trait Audited {
    const TARGET_TYPE: &'static str;
    fn target_id(&self) -> String;
    /// The session it belongs to: its records are kept with the session's.
    fn session_id(&self) -> Option<Uuid>;
    /// Its fields as the API names them, large payloads summarised and secrets left out.
    fn audit_fields(&self) -> Vec<(&'static str, Json)>;
}

/// `row`, created (every field from nothing).
pub fn created<R: Audited>(row: &R) -> Change<'static> {
    changed(None, row)
}

/// `after`, changed from `before` (none: created).
pub fn changed<R: Audited>(before: Option<&R>, after: &R) -> Change<'static> {
    Change {
        target_type: R::TARGET_TYPE,
        target_id: after.target_id(),
        session_id: after.session_id(),
        before: before.map(Audited::audit_fields),
        after: after.audit_fields(),
    }
}

/// What a change did to one record: its fields as name and JSON value, before (none when it was
/// created) and after. Fields that hold secrets or large payloads are not given.
pub struct Change<'a> {
    pub target_type: &'static str,
    /// A uuid, or a number (a price's id).
    pub target_id: String,
    /// The session it belongs to, if any.
    pub session_id: Option<Uuid>,
    pub before: Option<Vec<(&'a str, Json)>>,
    pub after: Vec<(&'a str, Json)>,
}

/// The fields whose value differs, as `[{field, before, after}]` (before `null` for a new
/// record), in the order `after` lists them.
pub fn diff(before: Option<&[(&str, Json)]>, after: &[(&str, Json)]) -> Vec<Json> {
    after
        .iter()
        .filter_map(|(field, value)| {
            let was = before
                .and_then(|fields| fields.iter().find(|(name, _)| name == field))
                .map_or(&Json::Null, |(_, was)| was);
            (was != value || before.is_none())
                .then(|| json!({ "field": field, "before": was, "after": value }))
        })
        .collect()
}

/// Records `change` by `origin`, unless it changed nothing. Whether it recorded one.
pub async fn record(conn: &mut PgConnection, origin: &Origin, change: &Change<'_>) -> Result<bool> {
    let changes = diff(change.before.as_deref(), &change.after);
    if changes.is_empty() {
        return Ok(false);
    }
    // The same columns in both tables; the session's own carries its key.
    let insert = match change.session_id {
        Some(_) => {
            "INSERT INTO session_audit_records (session_id, id, actor, action, target_type, \
                 target_id, request_id, client_address, user_agent, changes) \
             VALUES ($10, $1, $2, $3, $4, $5, left($6, 128), left($7, 100), left($8, 500), $9)"
        }
        None => {
            "INSERT INTO audit_records (id, actor, action, target_type, target_id, request_id, \
                 client_address, user_agent, changes) \
             VALUES ($1, $2, $3, $4, $5, left($6, 128), left($7, 100), left($8, 500), $9)"
        }
    };
    let query = sqlx::query(insert)
        .bind(Uuid::now_v7())
        .bind(&origin.actor)
        .bind(&origin.action)
        .bind(change.target_type)
        .bind(&change.target_id)
        .bind(&origin.request_id)
        .bind(&origin.client_address)
        .bind(&origin.user_agent)
        .bind(Json::Array(changes));
    let query = match change.session_id {
        Some(session) => query.bind(session),
        None => query,
    };
    query.execute(traced(conn)).await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_names_only_the_fields_that_changed() {
        let before = [("a", json!(1)), ("b", json!(null))];
        let after = [("a", json!(1)), ("b", json!("x"))];
        assert_eq!(
            diff(Some(&before), &after),
            vec![json!({ "field": "b", "before": null, "after": "x" })]
        );
        assert!(diff(Some(&after), &after).is_empty());
    }

    #[test]
    fn a_new_record_lists_every_field_from_null() {
        let after = [("a", json!(1)), ("b", json!(null))];
        assert_eq!(diff(None, &after).len(), 2);
    }
}
