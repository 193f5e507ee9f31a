//! What PostgreSQL spends on a measured run: CPU of the bench database's backends (from
//! `/proc`) and statements executed (from `pg_stat_statements`, when it is loaded).

use std::collections::HashMap;

use sqlx::PgPool;

use crate::servers::cpu_ticks;

/// Statements that are not a request's: casefile's change-log follower and LISTEN, catalog
/// queries (PostGraphile's introspection, sqlx's type lookups) and this monitor's own.
const BACKGROUND: &str = "query NOT ILIKE '%pg_stat%' AND query NOT ILIKE '%live_changes%' \
     AND query NOT ILIKE '%pg_current_snapshot%' AND query NOT ILIKE 'LISTEN%' \
     AND query NOT ILIKE '%pg_catalog%' AND query NOT ILIKE '%pg_type%'";

pub struct Postgres {
    pool: PgPool,
    database: String,
    /// Why statements cannot be counted, if they cannot.
    pub statements_unavailable: Option<String>,
}

/// CPU ticks of the bench database's backends at one moment.
pub struct Backends(HashMap<u32, u64>);

impl Postgres {
    pub async fn connect(url: &str, database: &str) -> anyhow::Result<Postgres> {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .connect(url)
            .await?;
        let preload: String = sqlx::query_scalar("SHOW shared_preload_libraries")
            .fetch_one(&pool)
            .await?;
        let statements_unavailable = if preload.contains("pg_stat_statements") {
            sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                .execute(&pool)
                .await?;
            None
        } else {
            Some(
                "n/a (pg_stat_statements not loaded; enable with shared_preload_libraries = \
                 'pg_stat_statements' in postgresql.conf and a restart)"
                    .to_owned(),
            )
        };
        Ok(Postgres {
            pool,
            database: database.to_owned(),
            statements_unavailable,
        })
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    pub async fn backends(&self) -> Backends {
        let pids: Vec<i32> = sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
        )
        .bind(&self.database)
        .fetch_all(&self.pool)
        .await
        .unwrap_or_default();
        Backends(
            pids.into_iter()
                .map(|p| (p as u32, cpu_ticks(p as u32)))
                .collect(),
        )
    }

    /// Starts counting statements afresh.
    pub async fn reset(&self) {
        if self.statements_unavailable.is_none() {
            let _ = sqlx::query("SELECT pg_stat_statements_reset()")
                .execute(&self.pool)
                .await;
        }
    }

    /// Statements executed in the bench database since the last reset (background excluded).
    pub async fn statements(&self) -> Option<i64> {
        self.statements_unavailable
            .as_ref()
            .map_or(Some(()), |_| None)?;
        sqlx::query_scalar(&format!(
            "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements \
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1) AND {BACKGROUND}"
        ))
        .bind(&self.database)
        .fetch_one(&self.pool)
        .await
        .ok()
    }
}

impl Backends {
    /// Ticks spent since `before` by the backends alive now (new ones from zero).
    pub fn since(&self, before: &Backends) -> u64 {
        self.0
            .iter()
            .map(|(pid, ticks)| ticks.saturating_sub(*before.0.get(pid).unwrap_or(&0)))
            .sum()
    }
}
