//! Chain versions as read: the list of them, the versions sessions ran, and the sessions that
//! ran each version (seed 000's Q4.2, impact analysis), many versions' pages in one statement.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::{Arguments as _, FromRow, Postgres, QueryBuilder, Row as _};
use uuid::Uuid;

use super::child_pages::KeyPart;
use super::page::{Joined, NewestFirst, Page, Slice};
use super::records::SESSION_COLUMNS;
use super::{ChainKey, ChainRow, Record as _, RecordKey, SessionRow, Store};
use crate::error::Result;

/// Which chain versions to list.
#[derive(Debug, Clone, Default)]
pub struct ChainListFilter {
    /// Only this chain's versions.
    pub name: Option<String>,
    /// Deprecated versions too.
    pub include_deprecated: bool,
}

/// The chain list: latest registered first, along `chains_created_at_idx` (or
/// `chains_name_created_at_idx` for one chain's versions).
const NEWEST_FIRST: NewestFirst = NewestFirst {
    table: "chains",
    columns: ChainRow::COLUMNS,
    at: "created_at",
};

/// The sessions that ran a chain version: those not deleted, or all of them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChainSessions {
    pub chain: ChainKey,
    pub include_deleted: bool,
}

/// A page of the sessions that ran a chain version, newest first (by creation, then id: the
/// order of `sessions` by `CREATED_AT`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChainSessionsPageKey {
    pub sessions: ChainSessions,
    pub slice: Slice<RecordKey>,
}

/// The sessions of the chain version `k` names, as `t`: by `sessions_chain_version_idx`.
const OF_CHAIN: &str = "t.chain_id = k.name AND t.chain_version = k.version \
    AND (k.include_deleted OR t.deleted_at IS NULL)";

impl Store {
    /// A page of the chain versions `filter` selects, latest registered first.
    pub async fn list_chains(
        &self,
        filter: &ChainListFilter,
        slice: &Slice<RecordKey>,
    ) -> Result<Page<ChainRow>> {
        NEWEST_FIRST
            .fetch(self, &|qb| push_filter(qb, filter), slice)
            .await
    }

    /// How many chain versions `filter` selects.
    pub async fn count_chains(&self, filter: &ChainListFilter) -> Result<i64> {
        NEWEST_FIRST
            .count(self, &|qb| push_filter(qb, filter))
            .await
    }

    /// Chain versions by name and version; those not registered are absent.
    pub async fn chains_by_key(
        &self,
        keys: &[ChainKey],
    ) -> Result<HashMap<ChainKey, Arc<ChainRow>>> {
        let (names, versions): (Vec<&str>, Vec<&str>) = keys
            .iter()
            .map(|k| (k.name.as_str(), k.version.as_str()))
            .unzip();
        let rows: Vec<ChainRow> = sqlx::query_as(&format!(
            "SELECT {} FROM chains \
             WHERE (name, version) IN (SELECT * FROM unnest($1::text[], $2::text[]))",
            ChainRow::COLUMNS
        ))
        .bind(names)
        .bind(versions)
        .fetch_all(self.reader().await?.traced())
        .await?;
        Ok(rows.into_iter().map(|r| (r.key(), Arc::new(r))).collect())
    }

    /// How many sessions ran each chain version.
    pub async fn session_counts_by_chain(
        &self,
        keys: &[ChainSessions],
    ) -> Result<HashMap<ChainSessions, i64>> {
        let mut arguments = PgArguments::default();
        let bound = (|| {
            arguments.add(
                keys.iter()
                    .map(|k| k.chain.name.as_str())
                    .collect::<Vec<_>>(),
            )?;
            arguments.add(
                keys.iter()
                    .map(|k| k.chain.version.as_str())
                    .collect::<Vec<_>>(),
            )?;
            arguments.add(keys.iter().map(|k| k.include_deleted).collect::<Vec<_>>())?;
            Ok::<_, sqlx::error::BoxDynError>(())
        })();
        bound.map_err(sqlx::Error::Encode)?;
        let counts: Vec<(i64, i64)> = sqlx::query_as_with(
            &format!(
                "SELECT k.ord, (SELECT count(*) FROM sessions t WHERE {OF_CHAIN}) \
                 FROM unnest($1::text[], $2::text[], $3::boolean[]) \
                      WITH ORDINALITY AS k(name, version, include_deleted, ord)"
            ),
            arguments,
        )
        .fetch_all(self.reader().await?.traced())
        .await?;
        Ok(counts
            .into_iter()
            .map(|(ord, count)| (keys[(ord - 1) as usize].clone(), count))
            .collect())
    }

    /// Pages of the sessions that ran chain versions, one statement for all of them.
    pub async fn session_pages_by_chain(
        &self,
        keys: &[ChainSessionsPageKey],
    ) -> Result<HashMap<ChainSessionsPageKey, Page<Arc<SessionRow>>>> {
        struct Row {
            ord: i64,
            earlier: bool,
            later: bool,
            session: Joined<SessionRow>,
        }
        impl<'r> FromRow<'r, PgRow> for Row {
            fn from_row(row: &'r PgRow) -> sqlx::Result<Self> {
                Ok(Row {
                    ord: row.try_get("ord")?,
                    earlier: row.try_get("earlier")?,
                    later: row.try_get("later")?,
                    session: Joined::from_row(row)?,
                })
            }
        }
        if keys.is_empty() {
            return Ok(HashMap::new());
        }
        let rows: Vec<Row> =
            sqlx::query_as_with(&session_pages_statement(""), page_arguments(keys)?)
                .fetch_all(self.reader().await?.traced())
                .await?;
        let mut read: Vec<(Vec<Arc<SessionRow>>, bool, bool)> =
            keys.iter().map(|_| (Vec::new(), false, false)).collect();
        for row in rows {
            let (sessions, earlier, later) = &mut read[(row.ord - 1) as usize];
            (*earlier, *later) = (row.earlier, row.later);
            sessions.extend(row.session.0.map(Arc::new));
        }
        Ok(keys
            .iter()
            .zip(read)
            .map(|(key, (sessions, earlier, later))| {
                (key.clone(), Page::new(sessions, &key.slice, earlier, later))
            })
            .collect())
    }

    /// How PostgreSQL reads those pages: `EXPLAIN` of the very statement, for the test that
    /// checks the index serves it.
    pub async fn explain_session_pages_by_chain(
        &self,
        keys: &[ChainSessionsPageKey],
    ) -> Result<String> {
        let lines: Vec<String> =
            sqlx::query_scalar_with(&session_pages_statement("EXPLAIN "), page_arguments(keys)?)
                .fetch_all(self.reader().await?.traced())
                .await?;
        Ok(lines.join("\n"))
    }
}

fn push_filter(qb: &mut QueryBuilder<'_, Postgres>, filter: &ChainListFilter) {
    qb.push(" WHERE TRUE");
    if let Some(name) = &filter.name {
        qb.push(" AND name = ").push_bind(name.clone());
    }
    if !filter.include_deprecated {
        qb.push(" AND deprecated_at IS NULL");
    }
}

/// The statement of [`Store::session_pages_by_chain`], after `prefix`. As a relationship's
/// pages (`child_pages`), in the list's order, newest first: the keys are materialized so that
/// each one's flags (whether sessions lie at or before `after`, at or after `before`: the
/// nearest one, read along the index) are read once per key, and each page is read from the
/// end it is taken from. Absent cursors are the greatest and least keys.
fn session_pages_statement(prefix: &str) -> String {
    let window = format!(
        "{OF_CHAIN} AND (t.created_at, t.id) < (k.after_at, k.after_id) \
         AND (t.created_at, t.id) > (k.before_at, k.before_id)"
    );
    let columns = SESSION_COLUMNS;
    format!(
        "{prefix}WITH k AS MATERIALIZED ( \
             SELECT k.*, \
                    (SELECT TRUE FROM sessions t WHERE {OF_CHAIN} \
                       AND (t.created_at, t.id) >= (k.after_at, k.after_id) \
                     ORDER BY t.created_at, t.id LIMIT 1) IS NOT NULL AS earlier, \
                    (SELECT TRUE FROM sessions t WHERE {OF_CHAIN} \
                       AND (t.created_at, t.id) <= (k.before_at, k.before_id) \
                     ORDER BY t.created_at DESC, t.id DESC LIMIT 1) IS NOT NULL AS later \
             FROM unnest($1::text[], $2::text[], $3::boolean[], $4::timestamptz[], $5::uuid[], \
                         $6::timestamptz[], $7::uuid[], $8::bigint[], $9::boolean[]) \
                  WITH ORDINALITY \
                  AS k(name, version, include_deleted, after_at, after_id, before_at, before_id, \
                       lim, from_end, ord)) \
         SELECT k.ord, k.earlier, k.later, c.* \
         FROM k LEFT JOIN LATERAL ( \
             (SELECT {columns} FROM sessions t WHERE NOT k.from_end AND {window} \
              ORDER BY t.created_at DESC, t.id DESC LIMIT k.lim) \
             UNION ALL \
             (SELECT {columns} FROM sessions t WHERE k.from_end AND {window} \
              ORDER BY t.created_at, t.id LIMIT k.lim)) c ON TRUE \
         ORDER BY k.ord, c.created_at DESC, c.id DESC"
    )
}

/// The arguments of that statement: each key's chain, cursors and size, as arrays.
fn page_arguments(keys: &[ChainSessionsPageKey]) -> Result<PgArguments> {
    let greatest = (DateTime::<Utc>::greatest(), Uuid::greatest());
    let least = (DateTime::<Utc>::least(), Uuid::least());
    let afters: Vec<RecordKey> = keys
        .iter()
        .map(|k| k.slice.after.unwrap_or(greatest))
        .collect();
    let befores: Vec<RecordKey> = keys
        .iter()
        .map(|k| k.slice.before.unwrap_or(least))
        .collect();
    let mut arguments = PgArguments::default();
    let bound = (|| {
        let sessions = keys.iter().map(|k| &k.sessions);
        arguments.add(
            sessions
                .clone()
                .map(|s| s.chain.name.as_str())
                .collect::<Vec<_>>(),
        )?;
        arguments.add(
            sessions
                .clone()
                .map(|s| s.chain.version.as_str())
                .collect::<Vec<_>>(),
        )?;
        arguments.add(sessions.map(|s| s.include_deleted).collect::<Vec<_>>())?;
        arguments.add(afters.iter().map(|k| k.0).collect::<Vec<_>>())?;
        arguments.add(afters.iter().map(|k| k.1).collect::<Vec<_>>())?;
        arguments.add(befores.iter().map(|k| k.0).collect::<Vec<_>>())?;
        arguments.add(befores.iter().map(|k| k.1).collect::<Vec<_>>())?;
        arguments.add(keys.iter().map(|k| k.slice.read()).collect::<Vec<_>>())?;
        arguments.add(keys.iter().map(|k| k.slice.from_end).collect::<Vec<_>>())?;
        Ok::<_, sqlx::error::BoxDynError>(())
    })();
    bound.map_err(sqlx::Error::Encode)?;
    Ok(arguments)
}
