//! What PostgreSQL spends on a measured run: CPU of the bench database's backends (from
//! `/proc`) and statements executed (from `pg_stat_statements`, when it is loaded).

use sqlx::PgPool;

use crate::cpu::Backends;

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

    /// CPU ticks of the bench database's backends at this moment.
    pub async fn backends(&self) -> Backends {
        Backends::of(&self.pool, &self.database).await
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
