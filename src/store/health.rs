//! What readiness asks of the database: that it answers, and that its schema is the one this
//! binary was built for.

use std::collections::HashMap;

use sqlx::migrate::Migrator;

use super::Store;
use crate::error::Result;

/// How the database's applied migrations compare with the binary's.
#[derive(Debug, PartialEq, Eq)]
pub enum SchemaState {
    Current,
    /// Migrations of this binary not applied (or applied with other contents, or failed).
    Behind(Vec<i64>),
    /// Applied migrations this binary does not know: a newer version migrated the database.
    Ahead(Vec<i64>),
}

impl Store {
    /// Checks, in one statement, that the database answers and how its schema compares with
    /// `migrator`'s.
    pub async fn schema_state(&self, migrator: &Migrator) -> Result<SchemaState> {
        let applied: Vec<(i64, bool, Vec<u8>)> = sqlx::query_as(
            "SELECT version, success, checksum FROM _sqlx_migrations ORDER BY version",
        )
        .fetch_all(&self.pool)
        .await?;
        let applied: HashMap<i64, (bool, Vec<u8>)> = applied
            .into_iter()
            .map(|(version, success, checksum)| (version, (success, checksum)))
            .collect();
        let behind: Vec<i64> = migrator
            .iter()
            .filter(|m| !m.migration_type.is_down_migration())
            .filter(|m| {
                applied.get(&m.version).is_none_or(|(success, checksum)| {
                    !success || checksum.as_slice() != m.checksum.as_ref()
                })
            })
            .map(|m| m.version)
            .collect();
        if !behind.is_empty() {
            return Ok(SchemaState::Behind(behind));
        }
        let ahead: Vec<i64> = applied
            .keys()
            .filter(|version| !migrator.iter().any(|m| m.version == **version))
            .copied()
            .collect();
        if !ahead.is_empty() {
            return Ok(SchemaState::Ahead(ahead));
        }
        Ok(SchemaState::Current)
    }
}
