//! What each record shows its audit trail: the fields a change to it can touch, named as the
//! API names them. Left out everywhere: secrets (a token's hash, a ticket's secret) and what a
//! record's own history already holds. Large payloads (alert data, analyses, error messages,
//! tasks, a chain's definition, a notification's integration data) are shown by [`summary`]:
//! their length and SHA-256, enough to tell that and when they changed, and to match a copy,
//! without copying up to a megabyte into every record.

use serde_json::{Value as Json, json};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::Audited;
use crate::model::db_name;
use crate::store::prices::ModelPriceRow;
use crate::store::retention::PurgeRow;
use crate::store::share_links::ShareLinkRow;
use crate::store::tickets::TicketRow;
use crate::store::tokens::ApiTokenRow;
use crate::store::{
    ChainRow, ChatRow, ChatUserMessageRow, ExecutionRow, NotificationRow, SessionRow, StageRow,
};

/// What a record is, which one (`id`: the field holding its id) and the session it belongs to
/// (`session`: the field holding it; none when absent).
macro_rules! target {
    ($name:literal, $id:ident) => {
        const TARGET_TYPE: &'static str = $name;
        fn target_id(&self) -> String {
            self.$id.to_string()
        }
        fn session_id(&self) -> Option<Uuid> {
            None
        }
    };
    ($name:literal, $id:ident, $session:ident) => {
        const TARGET_TYPE: &'static str = $name;
        fn target_id(&self) -> String {
            self.$id.to_string()
        }
        fn session_id(&self) -> Option<Uuid> {
            Some(self.$session)
        }
    };
}

/// A large text as its length in characters and its SHA-256 (null stays null).
fn summary(text: Option<&str>) -> Json {
    text.map_or(Json::Null, |text| {
        json!({
            "characters": text.chars().count(),
            "sha256": hex::encode(Sha256::digest(text.as_bytes())),
        })
    })
}

/// A JSON value, summarised as its compact text.
fn json_summary(value: Option<&serde_json::value::RawValue>) -> Json {
    summary(value.map(serde_json::value::RawValue::get))
}

impl Audited for SessionRow {
    target!("Session", id, id);
    fn audit_fields(&self) -> Vec<(&'static str, Json)> {
        vec![
            ("status", json!(self.status)),
            ("alertType", json!(self.alert_type)),
            ("alertData", json_summary(Some(&self.alert_data))),
            ("chainId", json!(self.chain_id)),
            ("chainVersion", json!(self.chain_version)),
            (
                "chainOverrides",
                json_summary(self.chain_overrides.as_ref().map(|j| &*j.0)),
            ),
            ("author", json!(self.author)),
            ("runbookUrl", json!(self.runbook_url)),
            ("createdBy", json!(self.created_by)),
            ("finalAnalysis", summary(self.final_analysis.as_deref())),
            (
                "executiveSummary",
                summary(self.executive_summary.as_deref()),
            ),
            ("errorMessage", summary(self.error_message.as_deref())),
            ("startedAt", json!(self.started_at)),
            ("completedAt", json!(self.completed_at)),
            ("deletedAt", json!(self.deleted_at)),
        ]
    }
}

impl Audited for StageRow {
    target!("Stage", id, session_id);
    fn audit_fields(&self) -> Vec<(&'static str, Json)> {
        vec![
            ("stageName", json!(self.stage_name)),
            ("stageIndex", json!(self.stage_index)),
            ("expectedAgentCount", json!(self.expected_agent_count)),
            ("parallelType", json!(self.parallel_type)),
            ("successPolicy", json!(self.success_policy)),
            ("status", json!(self.status)),
            ("chatId", json!(self.chat_id)),
            ("chatUserMessageId", json!(self.chat_user_message_id)),
        ]
    }
}

impl Audited for ExecutionRow {
    target!("AgentExecution", id, session_id);
    fn audit_fields(&self) -> Vec<(&'static str, Json)> {
        vec![
            ("stageId", json!(self.stage_id)),
            ("parentExecutionId", json!(self.parent_execution_id)),
            ("agentName", json!(self.agent_name)),
            ("agentIndex", json!(self.agent_index)),
            ("agentType", json!(self.agent_type)),
            ("teamName", json!(self.team_name)),
            ("iterationStrategy", json!(self.iteration_strategy)),
            ("llmProvider", json!(self.llm_provider)),
            ("llmModel", json!(self.llm_model)),
            ("status", json!(self.status)),
            ("task", summary(self.task.as_deref())),
            ("resultSummary", summary(self.result_summary.as_deref())),
            ("errorMessage", summary(self.error_message.as_deref())),
            ("startedAt", json!(self.started_at)),
            ("completedAt", json!(self.completed_at)),
        ]
    }
}

impl Audited for ChatRow {
    target!("Chat", id, session_id);
    fn audit_fields(&self) -> Vec<(&'static str, Json)> {
        vec![
            ("createdBy", json!(self.created_by)),
            ("title", json!(self.title)),
            ("deletedAt", json!(self.deleted_at)),
            ("deletedBy", json!(self.deleted_by)),
        ]
    }
}

impl Audited for ChatUserMessageRow {
    target!("ChatUserMessage", id, session_id);
    fn audit_fields(&self) -> Vec<(&'static str, Json)> {
        vec![
            ("chatId", json!(self.chat_id)),
            ("author", json!(self.author)),
            ("createdBy", json!(self.created_by)),
            ("content", summary(Some(&self.content))),
        ]
    }
}

impl Audited for NotificationRow {
    target!("Notification", id, session_id);
    fn audit_fields(&self) -> Vec<(&'static str, Json)> {
        vec![
            ("type", json!(self.notification_type)),
            ("destination", json!(self.destination)),
            ("status", json!(self.status)),
            ("attempts", json!(self.attempts)),
            ("maxAttempts", json!(self.max_attempts)),
            ("nextAttemptAt", json!(self.next_attempt_at)),
            ("claimId", json!(self.claim_id)),
            ("lastError", summary(self.last_error.as_deref())),
            (
                "integrationData",
                json_summary(Some(&self.integration_data)),
            ),
            ("sentAt", json!(self.sent_at)),
            ("deliveredAt", json!(self.delivered_at)),
            ("failedAt", json!(self.failed_at)),
        ]
    }
}

/// A ticket is recorded with its session (its secret and hash are left out).
impl Audited for TicketRow {
    target!("EventStreamTicket", session_id, session_id);
    fn audit_fields(&self) -> Vec<(&'static str, Json)> {
        vec![
            ("actor", json!(self.actor)),
            ("role", json!(db_name(self.role))),
            ("fromProxy", json!(self.from_proxy)),
            ("expiresAt", json!(self.expires_at)),
        ]
    }
}

/// A share link's secret and hash are left out.
impl Audited for ShareLinkRow {
    target!("ShareLink", id, session_id);
    fn audit_fields(&self) -> Vec<(&'static str, Json)> {
        vec![
            ("note", summary(self.note.as_deref())),
            ("expiresAt", json!(self.expires_at)),
            ("revokedAt", json!(self.revoked_at)),
            ("revokedBy", json!(self.revoked_by)),
        ]
    }
}

impl Audited for ChainRow {
    target!("Chain", id);
    fn audit_fields(&self) -> Vec<(&'static str, Json)> {
        vec![
            ("name", json!(self.name)),
            ("version", json!(self.version)),
            ("stageCount", json!(self.stage_count)),
            ("definition", json_summary(Some(&self.definition))),
            ("deprecatedAt", json!(self.deprecated_at)),
            ("deprecatedBy", json!(self.deprecated_by)),
        ]
    }
}

/// A token's secret hash is left out; `lastUsedAt` is not a change anyone makes.
impl Audited for ApiTokenRow {
    target!("ApiToken", id);
    fn audit_fields(&self) -> Vec<(&'static str, Json)> {
        vec![
            ("name", json!(self.name)),
            ("role", json!(db_name(self.role))),
            ("expiresAt", json!(self.expires_at)),
            ("revokedAt", json!(self.revoked_at)),
            ("revokedBy", json!(self.revoked_by)),
        ]
    }
}

/// Prices are never changed: a new one shows every field, amounts as decimal text, as the API
/// gives them.
impl Audited for ModelPriceRow {
    target!("ModelPrice", id);
    fn audit_fields(&self) -> Vec<(&'static str, Json)> {
        let amount =
            |value: Option<rust_decimal::Decimal>| json!(value.map(|v| v.normalize().to_string()));
        vec![
            ("model", json!(self.model_name)),
            ("provider", json!(self.provider)),
            ("effectiveFrom", json!(self.effective_from)),
            ("inputPerMillionUsd", amount(Some(self.input_per_million))),
            ("outputPerMillionUsd", amount(Some(self.output_per_million))),
            (
                "cachedInputPerMillionUsd",
                amount(self.cached_input_per_million),
            ),
            ("thinkingPerMillionUsd", amount(self.thinking_per_million)),
        ]
    }
}

/// A purge that deleted anything, as it ended (recorded once, so from nothing).
impl Audited for PurgeRow {
    target!("Purge", id);
    fn audit_fields(&self) -> Vec<(&'static str, Json)> {
        vec![
            ("trigger", json!(self.trigger)),
            ("criteria", self.criteria.clone()),
            ("status", json!(self.status)),
            ("sessionsDeleted", json!(self.sessions_deleted)),
            ("receiptsDeleted", json!(self.receipts_deleted)),
            ("auditRecordsDeleted", json!(self.audit_records_deleted)),
            ("errorMessage", summary(self.error_message.as_deref())),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_text_is_shown_by_its_length_and_digest() {
        assert_eq!(summary(None), Json::Null);
        let shown = summary(Some("héllo"));
        assert_eq!(shown["characters"], 5);
        assert_eq!(
            shown["sha256"],
            "3c48591d8d098a4538f5e013dfcf406e948eac4d3277b10bf614e295d6068179"
        );
    }
}
