//! The schema as the database's catalog describes it: the tables of schema `public`, their
//! columns, keys and foreign keys, read for `casefile check-distribution`.
//!
//! A partition is left out with everything on it: it is its partitioned table's, and carries
//! copies of that table's keys.

use sqlx::FromRow;

use super::Store;
use crate::error::Result;

/// The tables, keys and foreign keys of schema `public`.
#[derive(Debug, Clone)]
pub struct Catalog {
    pub tables: Vec<Table>,
    pub keys: Vec<Key>,
    pub foreign_keys: Vec<ForeignKey>,
}

/// A table (plain or partitioned).
#[derive(Debug, Clone)]
pub struct Table {
    pub name: String,
    pub columns: Vec<Column>,
}

#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    pub not_null: bool,
}

/// What makes a key unique.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    Primary,
    Unique,
    /// A unique index that backs no constraint (possibly partial, or on expressions).
    UniqueIndex,
}

/// A primary key, unique constraint or unique index.
#[derive(Debug, Clone)]
pub struct Key {
    pub table: String,
    pub name: String,
    pub kind: KeyKind,
    /// Its key columns in order; an expression appears as its text (`lower(name)`), so only a
    /// plain column is ever equal to a column's name.
    pub columns: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct ForeignKey {
    pub table: String,
    pub name: String,
    pub columns: Vec<String>,
    pub references: String,
    /// The referenced columns, each in the place of the column that refers to it.
    pub referenced_columns: Vec<String>,
}

#[derive(FromRow)]
struct TableRow {
    name: String,
    columns: Vec<String>,
    not_null: Vec<bool>,
}

#[derive(FromRow)]
struct KeyRow {
    table_name: String,
    name: String,
    kind: String,
    columns: Vec<String>,
}

#[derive(FromRow)]
struct ForeignKeyRow {
    table_name: String,
    name: String,
    columns: Vec<String>,
    referenced_table: String,
    referenced_columns: Vec<String>,
}

/// `t` is a table of schema `public` other than a partition.
const IN_PUBLIC: &str = "t.relnamespace = 'public'::regnamespace AND t.relkind IN ('r', 'p') \
     AND NOT t.relispartition";

/// The names of `keys` (an array of attribute numbers) of table `rel`, in the array's order.
fn column_names(keys: &str, rel: &str) -> String {
    format!(
        "ARRAY(SELECT a.attname::text FROM unnest({keys}) WITH ORDINALITY k(attnum, n) \
         JOIN pg_attribute a ON a.attrelid = {rel} AND a.attnum = k.attnum ORDER BY k.n)"
    )
}

impl Store {
    /// Reads the catalog of schema `public`, in one snapshot.
    pub async fn catalog(&self) -> Result<Catalog> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await?;
        let tables: Vec<TableRow> = sqlx::query_as(&format!(
            "SELECT t.relname::text AS name, \
                 ARRAY(SELECT a.attname::text FROM pg_attribute a \
                       WHERE a.attrelid = t.oid AND a.attnum > 0 AND NOT a.attisdropped \
                       ORDER BY a.attnum) AS columns, \
                 ARRAY(SELECT a.attnotnull FROM pg_attribute a \
                       WHERE a.attrelid = t.oid AND a.attnum > 0 AND NOT a.attisdropped \
                       ORDER BY a.attnum) AS not_null \
             FROM pg_class t WHERE {IN_PUBLIC} ORDER BY t.relname"
        ))
        .fetch_all(&mut *tx)
        .await?;
        // A partitioned table's constraint has copies with a parent (`conparentid`): on its
        // partitions, and for each partition of a partitioned table it refers to. The one
        // without a parent stands for them all.
        let constraints: Vec<KeyRow> = sqlx::query_as(&format!(
            "SELECT t.relname::text AS table_name, c.conname::text AS name, \
                 c.contype::text AS kind, {columns} AS columns \
             FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid \
             WHERE {IN_PUBLIC} AND c.contype IN ('p', 'u') AND c.conparentid = 0 \
             ORDER BY t.relname, c.conname",
            columns = column_names("c.conkey", "c.conrelid"),
        ))
        .fetch_all(&mut *tx)
        .await?;
        let indexes: Vec<KeyRow> = sqlx::query_as(&format!(
            "SELECT t.relname::text AS table_name, i.relname::text AS name, 'i' AS kind, \
                 ARRAY(SELECT pg_get_indexdef(x.indexrelid, k.n, true) \
                       FROM generate_series(1, x.indnkeyatts::int) k(n) ORDER BY k.n) AS columns \
             FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid \
               JOIN pg_class t ON t.oid = x.indrelid \
             WHERE {IN_PUBLIC} AND x.indisunique \
               AND NOT EXISTS (SELECT FROM pg_constraint c \
                               WHERE c.conindid = x.indexrelid AND c.contype IN ('p', 'u', 'x')) \
             ORDER BY t.relname, i.relname"
        ))
        .fetch_all(&mut *tx)
        .await?;
        let foreign_keys: Vec<ForeignKeyRow> = sqlx::query_as(&format!(
            "SELECT t.relname::text AS table_name, c.conname::text AS name, \
                 {columns} AS columns, r.relname::text AS referenced_table, \
                 {referenced} AS referenced_columns \
             FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid \
               JOIN pg_class r ON r.oid = c.confrelid \
             WHERE {IN_PUBLIC} AND c.contype = 'f' AND c.conparentid = 0 \
             ORDER BY t.relname, c.conname",
            columns = column_names("c.conkey", "c.conrelid"),
            referenced = column_names("c.confkey", "c.confrelid"),
        ))
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;

        Ok(Catalog {
            tables: tables
                .into_iter()
                .map(|row| Table {
                    name: row.name,
                    columns: row
                        .columns
                        .into_iter()
                        .zip(row.not_null)
                        .map(|(name, not_null)| Column { name, not_null })
                        .collect(),
                })
                .collect(),
            keys: constraints
                .into_iter()
                .chain(indexes)
                .map(|row| Key {
                    table: row.table_name,
                    name: row.name,
                    kind: match row.kind.as_str() {
                        "p" => KeyKind::Primary,
                        "u" => KeyKind::Unique,
                        _ => KeyKind::UniqueIndex,
                    },
                    columns: row.columns,
                })
                .collect(),
            foreign_keys: foreign_keys
                .into_iter()
                .map(|row| ForeignKey {
                    table: row.table_name,
                    name: row.name,
                    columns: row.columns,
                    references: row.referenced_table,
                    referenced_columns: row.referenced_columns,
                })
                .collect(),
        })
    }
}
