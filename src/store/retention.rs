//! Retention (seed 000 Q12): hard-deleting the sessions a policy selects, with everything under
//! them, in small batches; forgetting old idempotency receipts; and the record each purge
//! leaves (`migrations/0017_retention.sql`).

use chrono::{DateTime, Utc};
use serde_json::{Value as Json, json};
use sqlx::{FromRow, Postgres, QueryBuilder};
use uuid::Uuid;

use super::Store;
use super::audit::{self, Change, Origin};
use super::export::Exported;
use super::traced::traced;
use crate::error::Result;
use crate::model::{PurgeStatus, PurgeTrigger};

/// Which sessions a purge deletes: those matching either condition given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionCriteria {
    /// Soft-deleted before this instant.
    pub deleted_before: Option<DateTime<Utc>>,
    /// Finished (completed, failed, timed out or cancelled) before this instant, with no chat
    /// activity since: a follow-up conversation keeps its session, unless it was deleted (a
    /// deleted chat is one its owner gave up on).
    pub finished_before: Option<DateTime<Utc>>,
}

impl SessionCriteria {
    pub fn is_empty(&self) -> bool {
        self.deleted_before.is_none() && self.finished_before.is_none()
    }
}

/// What one batch did: the sessions it locked, and of those the ones it deleted (a session can
/// stop qualifying between the two: restored, or asked a question). A batch that locks fewer
/// than it may is the last.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PurgedBatch {
    pub locked: i64,
    pub deleted: i64,
}

/// What a purge would delete: the sessions, and the rows under them (which go with them).
#[derive(Debug, Clone, Default, PartialEq, Eq, FromRow)]
pub struct PurgeCounts {
    pub sessions: i64,
    pub stages: i64,
    pub agent_executions: i64,
    pub timeline_events: i64,
    pub messages: i64,
    pub llm_interactions: i64,
    pub mcp_interactions: i64,
    pub chats: i64,
    pub session_events: i64,
    /// Runs of appends (`migrations/0123`): rows of the session's event log kept apart.
    pub session_event_runs: i64,
}

/// The record of a purge.
#[derive(Debug, Clone, FromRow)]
pub struct PurgeRow {
    pub id: Uuid,
    pub actor: String,
    pub trigger: PurgeTrigger,
    pub criteria: Json,
    pub status: PurgeStatus,
    pub sessions_deleted: i64,
    pub receipts_deleted: i64,
    pub audit_records_deleted: i64,
    pub error_message: Option<String>,
    pub started_at: DateTime<Utc>,
    pub heartbeat_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl Store {
    /// How many sessions `criteria` selects, and how many rows lie under them.
    pub async fn count_purgeable(&self, criteria: &SessionCriteria) -> Result<PurgeCounts> {
        let mut qb = QueryBuilder::new("WITH doomed AS MATERIALIZED (SELECT id FROM sessions");
        push_criteria(&mut qb, criteria);
        qb.push(") SELECT (SELECT count(*) FROM doomed) AS sessions");
        for table in [
            "stages",
            "agent_executions",
            "timeline_events",
            "messages",
            "llm_interactions",
            "mcp_interactions",
            "chats",
            "session_events",
            "session_event_runs",
        ] {
            qb.push(format_args!(
                ", (SELECT count(*) FROM {table} WHERE session_id IN (SELECT id FROM doomed)) \
                 AS {table}"
            ));
        }
        Ok(qb
            .build_query_as()
            .fetch_one(self.reader().await?.traced())
            .await?)
    }

    /// How many idempotency receipts are older than `before`.
    pub async fn count_old_receipts(&self, before: DateTime<Utc>) -> Result<i64> {
        Ok(
            sqlx::query_scalar("SELECT count(*) FROM create_receipts WHERE created_at < $1")
                .bind(before)
                .fetch_one(self.reader().await?.traced())
                .await?,
        )
    }

    /// How many audit records (of both tables) were made before `before`.
    pub async fn count_old_audit_records(&self, before: DateTime<Utc>) -> Result<i64> {
        Ok(
            sqlx::query_scalar("SELECT count(*) FROM audit_log WHERE at < $1")
                .bind(before)
                .fetch_one(self.reader().await?.traced())
                .await?,
        )
    }

    /// Records that a purge starts; its id. Purges still `running` whose last batch is an hour
    /// old lost their process (killed, or its machine gone): they are recorded as failed first.
    pub async fn begin_purge(
        &self,
        actor: &str,
        trigger: PurgeTrigger,
        criteria: &Json,
    ) -> Result<Uuid> {
        sqlx::query(
            "UPDATE purges SET status = 'failed', finished_at = heartbeat_at, \
                 error_message = 'its process stopped before it finished' \
             WHERE status = 'running' AND heartbeat_at < now() - interval '1 hour'",
        )
        .execute(self.pool())
        .await?;
        let id = Uuid::now_v7();
        sqlx::query("INSERT INTO purges (id, actor, trigger, criteria) VALUES ($1, $2, $3, $4)")
            .bind(id)
            .bind(actor)
            .bind(trigger)
            .bind(criteria)
            .execute(self.pool())
            .await?;
        Ok(id)
    }

    /// Up to `limit` of the sessions `criteria` selects, by id, without locking them: what a
    /// purge that archives exports before its batch.
    pub async fn purge_candidates(
        &self,
        criteria: &SessionCriteria,
        limit: i64,
    ) -> Result<Vec<Uuid>> {
        let mut select = QueryBuilder::new("SELECT id FROM sessions");
        push_criteria(&mut select, criteria);
        select.push(" ORDER BY id LIMIT ").push_bind(limit);
        Ok(select
            .build_query_scalar()
            .fetch_all(self.reader().await?.traced())
            .await?)
    }

    /// Deletes up to `limit` of the sessions `criteria` selects, with everything under them,
    /// in one short transaction, and adds them to purge `purge`'s count; how many it deleted.
    /// With `archived`, only those sessions, and only those unchanged since their export (the
    /// same `updated_at` and the same last event-log position): one that changed is left for
    /// the next batch to export again.
    /// Sessions a writer holds (a chat question being posted, a restore) are skipped, not
    /// waited for: the next batch or run takes them if they still qualify. The sessions are
    /// locked first and deleted by a second statement, which sees everything committed until
    /// they were locked: a session restored, or a chat question posted, meanwhile stays.
    pub async fn purge_sessions(
        &self,
        purge: Uuid,
        criteria: &SessionCriteria,
        limit: i64,
        archived: Option<&[Exported]>,
    ) -> Result<PurgedBatch> {
        let mut tx = self.begin().await?;
        // A batch never waits long behind a lock (nor keeps others queued behind it). A batch
        // of one session may take long (a session with millions of events): it holds the locks
        // of that session's rows alone, which only its own writers (there are none) would want.
        sqlx::query(
            "SELECT set_config('lock_timeout', '2s', true), set_config('statement_timeout', \
                 coalesce($1, current_setting('statement_timeout')), true)",
        )
        .bind((limit == 1).then_some("10min"))
        .execute(&mut *tx)
        .await?;
        let mut lock = QueryBuilder::new("SELECT id FROM sessions");
        push_criteria(&mut lock, criteria);
        if let Some(archived) = archived {
            let ids: Vec<Uuid> = archived.iter().map(|a| a.session).collect();
            lock.push(" AND id = ANY(").push_bind(ids).push(")");
        }
        lock.push(" LIMIT ")
            .push_bind(limit)
            .push(" FOR UPDATE SKIP LOCKED");
        let locked: Vec<Uuid> = lock.build_query_scalar().fetch_all(traced(&mut tx)).await?;
        if locked.is_empty() {
            tx.commit().await?;
            return Ok(PurgedBatch::default());
        }
        let mut delete = QueryBuilder::new("WITH gone AS (DELETE FROM sessions");
        push_criteria(&mut delete, criteria);
        delete.push(" AND id = ANY(").push_bind(&locked).push(")");
        if let Some(archived) = archived {
            // Unchanged since its export: what the archive holds is all there was.
            delete
                .push(
                    " AND (id, updated_at, session_last_position(sessions.id)) \
                     IN (SELECT * FROM unnest(",
                )
                .push_bind(archived.iter().map(|a| a.session).collect::<Vec<_>>())
                .push("::uuid[], ")
                .push_bind(archived.iter().map(|a| a.updated_at).collect::<Vec<_>>())
                .push("::timestamptz[], ")
                .push_bind(archived.iter().map(|a| a.last_position).collect::<Vec<_>>())
                .push("::bigint[]))");
        }
        delete.push(
                " RETURNING id) \
                 UPDATE purges SET sessions_deleted = sessions_deleted + (SELECT count(*) FROM gone), \
                     heartbeat_at = now() \
                 WHERE id = ",
            )
            .push_bind(purge)
            .push(" RETURNING actor, ARRAY(SELECT id FROM gone) AS gone");
        let (actor, gone): (String, Vec<Uuid>) =
            delete.build_query_as().fetch_one(traced(&mut tx)).await?;
        // Each session's trail (which outlives it) ends with its purge, by the purge's actor.
        let origin = purger(actor);
        for session in &gone {
            let purged = Change {
                target_type: "Session",
                target_id: session.to_string(),
                session_id: Some(*session),
                before: None,
                after: vec![("purgeId", json!(purge))],
            };
            audit::record(&mut tx, &origin, &purged).await?;
        }
        let deleted = gone.len() as i64;
        tx.commit().await?;
        Ok(PurgedBatch {
            locked: locked.len() as i64,
            deleted,
        })
    }

    /// Forgets up to `limit` idempotency receipts older than `before` (oldest first), adding
    /// them to purge `purge`'s count; how many it forgot. A retry of a create whose receipt is
    /// gone is refused as a `CONFLICT` (the id is taken) instead of answered again.
    pub async fn purge_receipts(
        &self,
        purge: Uuid,
        before: DateTime<Utc>,
        limit: i64,
    ) -> Result<i64> {
        Ok(sqlx::query_scalar(
            "WITH gone AS (DELETE FROM create_receipts WHERE id IN ( \
                 SELECT id FROM create_receipts WHERE created_at < $1 \
                 ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING 1) \
             UPDATE purges SET receipts_deleted = receipts_deleted + (SELECT count(*) FROM gone), \
                 heartbeat_at = now() \
             WHERE id = $3 RETURNING (SELECT count(*) FROM gone)",
        )
        .bind(before)
        .bind(limit)
        .bind(purge)
        .fetch_one(self.pool())
        .await?)
    }

    /// Forgets up to `limit` audit records of each table made before `before` (oldest
    /// first), adding them to purge `purge`'s count: the most it took from one table, and how
    /// many it forgot.
    pub async fn purge_audit_records(
        &self,
        purge: Uuid,
        before: DateTime<Utc>,
        limit: i64,
    ) -> Result<(i64, i64)> {
        Ok(sqlx::query_as(
            "WITH others AS (DELETE FROM audit_records WHERE id IN ( \
                 SELECT id FROM audit_records WHERE at < $1 \
                 ORDER BY at LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING 1), \
             sessions AS (DELETE FROM session_audit_records WHERE (session_id, id) IN ( \
                 SELECT session_id, id FROM session_audit_records WHERE at < $1 \
                 ORDER BY at LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING 1), \
             counted AS (SELECT (SELECT count(*) FROM others) AS others, \
                                (SELECT count(*) FROM sessions) AS sessions) \
             UPDATE purges SET heartbeat_at = now(), \
                 audit_records_deleted = audit_records_deleted + counted.others + counted.sessions \
             FROM counted WHERE id = $3 \
             RETURNING greatest(counted.others, counted.sessions), counted.others + counted.sessions",
        )
        .bind(before)
        .bind(limit)
        .bind(purge)
        .fetch_one(self.pool())
        .await?)
    }

    /// Records how a purge ended; one that deleted anything is recorded in the audit trail
    /// too, in the same transaction, as done by its actor.
    pub async fn finish_purge(
        &self,
        purge: Uuid,
        status: PurgeStatus,
        error: Option<&str>,
    ) -> Result<()> {
        let mut tx = self.begin().await?;
        let row: PurgeRow = sqlx::query_as(
            "UPDATE purges SET status = $2, error_message = $3, finished_at = now() WHERE id = $1 \
             RETURNING *",
        )
        .bind(purge)
        .bind(status)
        .bind(error)
        .fetch_one(traced(&mut tx))
        .await?;
        if row.sessions_deleted + row.receipts_deleted + row.audit_records_deleted > 0 {
            audit::record(&mut tx, &purger(row.actor.clone()), &audit::created(&row)).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Drops the record of a scheduled purge that deleted nothing (so the schedule's quiet runs
    /// leave no trace).
    pub async fn forget_empty_purge(&self, purge: Uuid) -> Result<()> {
        sqlx::query(
            "DELETE FROM purges WHERE id = $1 AND sessions_deleted = 0 AND receipts_deleted = 0 \
                 AND audit_records_deleted = 0",
        )
        .bind(purge)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// The latest purges, newest first.
    pub async fn purges(&self, limit: i64) -> Result<Vec<PurgeRow>> {
        Ok(
            sqlx::query_as("SELECT * FROM purges ORDER BY started_at DESC, id DESC LIMIT $1")
                .bind(limit)
                .fetch_all(self.reader().await?.traced())
                .await?,
        )
    }
}

/// A purge run by `actor`, as its audit records name it.
fn purger(actor: String) -> Origin {
    Origin {
        actor: Some(actor),
        action: "purge".to_owned(),
        ..Origin::default()
    }
}

/// ` WHERE (…)` selecting the sessions `criteria` names (none when it names none), each
/// condition written as its index's expression (`sessions_deleted_at_idx`,
/// `sessions_completed_at_idx`).
fn push_criteria(qb: &mut QueryBuilder<'_, Postgres>, criteria: &SessionCriteria) {
    qb.push(" WHERE (FALSE");
    if let Some(before) = criteria.deleted_before {
        qb.push(" OR deleted_at < ").push_bind(before);
    }
    if let Some(before) = criteria.finished_before {
        // Unfinished sessions sit at the index's low end (their coalesced year 1): skipped.
        qb.push(
            " OR (coalesce(completed_at, '0001-01-01 00:00:00+00') > '0001-01-01 00:00:00+00' \
             AND coalesce(completed_at, '0001-01-01 00:00:00+00') < ",
        )
        .push_bind(before)
        .push(
            " AND NOT EXISTS (SELECT 1 FROM chats c WHERE c.session_id = sessions.id \
                                 AND c.deleted_at IS NULL AND c.updated_at >= ",
        )
        .push_bind(before)
        .push("))");
    }
    qb.push(")");
}
