//! The schema hash-partitioned by session: each distributed table (`docs/scale-out.md`) becomes
//! a table partitioned by its session column into `n` partitions, with everything it had: its
//! columns, keys, checks, indexes, foreign keys both ways, triggers (and whether each fires
//! under replication), owned sequences, storage parameters (on each partition), and the views
//! and functions built on it. PostgreSQL's
//! declarative partitioning imposes the rules a distributed PostgreSQL (Citus) does (every
//! unique key holds the partition key; each row lives in its session's partition), so a suite
//! that passes on this layout shows the schema and its triggers fit one.
//!
//! Migrations build the plain schema (`CREATE INDEX CONCURRENTLY`, which several use, does not
//! work on a partitioned table); this converts it afterwards, in one transaction, rows and all.
//! Tables already partitioned are left as they are, so it can run again after later migrations
//! add a table; what it cannot carry over (row security, grants, comments, a replica identity, identity columns, column settings, extended statistics, rules,
//! inheritance) it refuses rather than drop.

use sqlx::{Executor as _, PgConnection};

use super::Store;
use crate::error::{Error, Result};

/// A table to partition, and the column that names its session.
#[derive(Debug, Clone, Copy)]
pub struct SessionTable<'a> {
    pub name: &'a str,
    pub column: &'a str,
}

/// What [`Store::partition_by_session`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partitioned {
    /// The tables it converted (none when every one already was).
    pub converted: Vec<String>,
}

/// One object to drop before the tables are replaced and to create again after.
#[derive(sqlx::FromRow)]
struct Definition {
    /// The table it is on (views: the view itself; functions: empty).
    table_name: String,
    name: String,
    definition: String,
}

impl Store {
    /// Partitions `tables` by session into `partitions` partitions each (see the module's
    /// documentation); tables already partitioned into as many are left as they are.
    pub async fn partition_by_session(
        &self,
        tables: &[SessionTable<'_>],
        partitions: u32,
    ) -> Result<Partitioned> {
        if !(1..=1024).contains(&partitions) {
            return Err(Error::BadUserInput(format!(
                "cannot partition into {partitions} partitions: from 1 to 1024"
            )));
        }
        let mut tx = self.pool.begin().await?;
        let plain = not_yet_partitioned(&mut tx, tables, partitions).await?;
        if plain.is_empty() {
            return Ok(Partitioned { converted: vec![] });
        }
        // Every table, converted or not, for the whole conversion: foreign keys between them
        // are dropped and added again. The pool's lock timeout applies: a running server's
        // writes make it fail rather than queue every request behind it.
        for table in tables {
            run(
                &mut tx,
                format!("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE", quoted(table.name)),
            )
            .await?;
        }
        let names: Vec<&str> = plain.iter().map(|t| t.name).collect();
        refuse_what_cannot_be_carried_over(&mut tx, &names).await?;
        let saved = Saved::read(&mut tx, &names).await?;
        saved.drop_dependents(&mut tx).await?;
        for table in &plain {
            replace_with_partitioned(&mut tx, *table, partitions).await?;
        }
        saved.drop_functions(&mut tx).await?;
        for name in &names {
            run(&mut tx, format!("DROP TABLE {}", quoted(&old_name(name)))).await?;
        }
        saved.restore(&mut tx, &names).await?;
        tx.commit().await?;
        // Statistics for the rows carried over, and none for an empty partition. Analyzed, an
        // empty partition is known to be empty: each connection's generic plan, made then,
        // reads it sequentially and keeps doing so as it grows (the ingest benchmark's
        // partitioned runs scanned 10 million rows of `session_event_runs` a minute that way).
        // Never analyzed, it is planned as a new plain table is (small, but read by its
        // indexes) until autovacuum analyzes it. A table whose partitions all hold rows is
        // analyzed whole (its own statistics too, which autovacuum never gathers).
        for name in &names {
            let mut filled = Vec::new();
            for remainder in 0..partitions {
                let partition = quoted(&partition_name(name, remainder));
                let holds_rows: bool =
                    sqlx::query_scalar(&format!("SELECT EXISTS (SELECT FROM {partition})"))
                        .fetch_one(&self.pool)
                        .await?;
                if holds_rows {
                    filled.push(partition);
                }
            }
            let analyzed = if filled.len() == partitions as usize {
                vec![quoted(name)]
            } else {
                filled
            };
            for table in analyzed {
                sqlx::query(&format!("ANALYZE {table}"))
                    .execute(&self.pool)
                    .await?;
            }
        }
        Ok(Partitioned {
            converted: names.into_iter().map(str::to_owned).collect(),
        })
    }
}

/// The tables of `tables` not partitioned yet; an error if one is missing, or partitioned
/// into another number of partitions.
async fn not_yet_partitioned<'a>(
    conn: &mut PgConnection,
    tables: &[SessionTable<'a>],
    partitions: u32,
) -> Result<Vec<SessionTable<'a>>> {
    let mut plain = Vec::new();
    for table in tables {
        let found: Option<(String, i64)> = sqlx::query_as(
            "SELECT c.relkind::text, (SELECT count(*) FROM pg_inherits i WHERE i.inhparent = c.oid) \
             FROM pg_class c WHERE c.oid = to_regclass(format('public.%I', $1::text))",
        )
        .bind(table.name)
        .fetch_optional(&mut *conn)
        .await?;
        match found {
            None => {
                return Err(Error::Internal(format!(
                    "cannot partition {}: no such table",
                    table.name
                )));
            }
            Some((kind, count)) if kind == "p" => {
                if count != i64::from(partitions) {
                    return Err(Error::BadUserInput(format!(
                        "{} is partitioned into {count} partitions, not {partitions}",
                        table.name
                    )));
                }
            }
            Some(_) => plain.push(*table),
        }
    }
    Ok(plain)
}

/// Runs one statement of the conversion.
async fn run(conn: &mut PgConnection, statement: String) -> Result<()> {
    conn.execute(statement.as_str()).await?;
    Ok(())
}

/// What the tables being replaced have, and what is built on them, read before any is touched.
struct Saved {
    /// Every view of the schema (any may read a replaced table, or a function made again),
    /// in the order they were made.
    views: Vec<Definition>,
    /// Functions whose signature names a replaced table's row type (`name`: its oid).
    functions: Vec<Definition>,
    /// Primary keys, unique keys and exclusions of the replaced tables (checks come with
    /// their columns, as they were parsed).
    constraints: Vec<Definition>,
    /// Foreign keys from or to a replaced table.
    foreign_keys: Vec<Definition>,
    /// Indexes of the replaced tables that back no constraint.
    indexes: Vec<Definition>,
    /// Triggers of the replaced tables.
    triggers: Vec<Definition>,
    /// Triggers that fire otherwise than by default (`definition`: `ENABLE ALWAYS`, …).
    trigger_firing: Vec<Definition>,
    /// Sequences owned by a replaced table's column (`definition`: the column).
    owned_sequences: Vec<Definition>,
}

impl Saved {
    async fn read(conn: &mut PgConnection, tables: &[&str]) -> Result<Saved> {
        let mut saved = Vec::with_capacity(8);
        for sql in [
            VIEWS,
            FUNCTIONS,
            CONSTRAINTS,
            FOREIGN_KEYS,
            INDEXES,
            TRIGGERS,
            TRIGGER_FIRING,
            OWNED_SEQUENCES,
        ] {
            saved.push(
                sqlx::query_as::<_, Definition>(sql)
                    .bind(tables)
                    .fetch_all(&mut *conn)
                    .await?,
            );
        }
        let mut saved = saved.into_iter();
        let mut next = || saved.next().expect("one list per statement");
        Ok(Saved {
            views: next(),
            functions: next(),
            constraints: next(),
            foreign_keys: next(),
            indexes: next(),
            triggers: next(),
            trigger_firing: next(),
            owned_sequences: next(),
        })
    }
}

impl Saved {
    /// Drops what would keep the old tables from being dropped, or would stay pointed at them:
    /// the views and the foreign keys; sequences are disowned (a table's drop drops those it
    /// owns).
    async fn drop_dependents(&self, conn: &mut PgConnection) -> Result<()> {
        for view in self.views.iter().rev() {
            run(conn, format!("DROP VIEW {}", quoted(&view.name))).await?;
        }
        for key in &self.foreign_keys {
            run(
                conn,
                format!(
                    "ALTER TABLE {} DROP CONSTRAINT {}",
                    quoted(&key.table_name),
                    quoted(&key.name)
                ),
            )
            .await?;
        }
        for sequence in &self.owned_sequences {
            run(
                conn,
                format!("ALTER SEQUENCE {} OWNED BY NONE", quoted(&sequence.name)),
            )
            .await?;
        }
        Ok(())
    }

    /// Drops the functions whose signature names an old table's row type: by oid, since the
    /// text of their signature now names the new table's.
    async fn drop_functions(&self, conn: &mut PgConnection) -> Result<()> {
        for function in &self.functions {
            let signature: String = sqlx::query_scalar("SELECT $1::text::oid::regprocedure::text")
                .bind(&function.name)
                .fetch_one(&mut *conn)
                .await?;
            run(conn, format!("DROP FUNCTION {signature}")).await?;
        }
        Ok(())
    }

    /// Makes everything again on the new tables: functions, keys, indexes (each partition's
    /// copy named after its index), foreign keys, triggers and how they fire, sequences'
    /// owners, views.
    async fn restore(&self, conn: &mut PgConnection, tables: &[&str]) -> Result<()> {
        for function in &self.functions {
            run(conn, function.definition.clone()).await?;
        }
        for key in &self.constraints {
            run(conn, add_constraint(key)).await?;
        }
        for index in &self.indexes {
            run(conn, index.definition.clone()).await?;
        }
        // PostgreSQL names a partition's copy of an index after the partition and its
        // columns; named after the index (`…_idx_p2`), a plan says which index a partition is
        // read by, and a unique violation which key it broke.
        let copies: Vec<(String, String)> = sqlx::query_as(PARTITION_INDEX_NAMES)
            .bind(tables)
            .fetch_all(&mut *conn)
            .await?;
        for (copy, name) in copies {
            run(
                conn,
                format!("ALTER INDEX {} RENAME TO {}", quoted(&copy), quoted(&name)),
            )
            .await?;
        }
        for key in &self.foreign_keys {
            run(conn, add_constraint(key)).await?;
        }
        for trigger in &self.triggers {
            run(conn, trigger.definition.clone()).await?;
        }
        for firing in &self.trigger_firing {
            run(
                conn,
                format!(
                    "ALTER TABLE {} {} TRIGGER {}",
                    quoted(&firing.table_name),
                    firing.definition,
                    quoted(&firing.name)
                ),
            )
            .await?;
        }
        for sequence in &self.owned_sequences {
            run(
                conn,
                format!(
                    "ALTER SEQUENCE {} OWNED BY {}.{}",
                    quoted(&sequence.name),
                    quoted(&sequence.table_name),
                    quoted(&sequence.definition)
                ),
            )
            .await?;
        }
        for view in &self.views {
            run(conn, view.definition.clone()).await?;
        }
        Ok(())
    }
}

fn add_constraint(key: &Definition) -> String {
    format!(
        "ALTER TABLE {} ADD CONSTRAINT {} {}",
        quoted(&key.table_name),
        quoted(&key.name),
        key.definition
    )
}

/// `$1`: the names of the tables being replaced, as `oid`s of schema `public`.
macro_rules! replaced {
    () => {
        "(SELECT to_regclass(format('public.%I', n)) FROM unnest($1::text[]) n)"
    };
}

const VIEWS: &str = "SELECT c.relname::text AS table_name, c.relname::text AS name, \
         format('CREATE VIEW %I%s AS %s', c.relname, \
             CASE WHEN c.reloptions IS NULL THEN '' \
                 ELSE format(' WITH (%s)', array_to_string(c.reloptions, ', ')) END, \
             pg_get_viewdef(c.oid)) AS definition \
     FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'v' \
       AND $1::text[] IS NOT NULL /* every statement of Saved::read is given the tables */ \
     ORDER BY c.oid";

const FUNCTIONS: &str = concat!(
    "SELECT DISTINCT '' AS table_name, p.oid::text AS name, \
         pg_get_functiondef(p.oid) AS definition \
     FROM pg_depend d JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND p.oid = d.objid \
       JOIN pg_class t ON d.refclassid = 'pg_type'::regclass AND d.refobjid = t.reltype \
     WHERE t.oid IN ",
    replaced!()
);

const CONSTRAINTS: &str = concat!(
    "SELECT (SELECT r.relname FROM pg_class r WHERE r.oid = c.conrelid)::text AS table_name, c.conname::text AS name, \
         pg_get_constraintdef(c.oid) AS definition \
     FROM pg_constraint c WHERE c.contype IN ('p', 'u', 'x') AND c.conrelid IN ",
    replaced!(),
    " ORDER BY c.conrelid, c.contype <> 'p', c.conname"
);

const FOREIGN_KEYS: &str = concat!(
    "SELECT (SELECT r.relname FROM pg_class r WHERE r.oid = c.conrelid)::text AS table_name, c.conname::text AS name, \
         pg_get_constraintdef(c.oid) AS definition \
     FROM pg_constraint c WHERE c.contype = 'f' AND c.conparentid = 0 \
       AND (c.conrelid IN ",
    replaced!(),
    " OR c.confrelid IN ",
    replaced!(),
    ") ORDER BY c.conrelid, c.conname"
);

const INDEXES: &str = concat!(
    "SELECT (SELECT r.relname FROM pg_class r WHERE r.oid = x.indrelid)::text AS table_name, i.relname::text AS name, \
         pg_get_indexdef(x.indexrelid) AS definition \
     FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid \
     WHERE x.indrelid IN ",
    replaced!(),
    " AND NOT EXISTS (SELECT FROM pg_constraint c WHERE c.conindid = x.indexrelid \
                      AND c.conrelid = x.indrelid AND c.contype IN ('p', 'u', 'x')) \
     ORDER BY x.indrelid, i.relname"
);

const TRIGGERS: &str = concat!(
    "SELECT (SELECT r.relname FROM pg_class r WHERE r.oid = t.tgrelid)::text AS table_name, t.tgname::text AS name, \
         pg_get_triggerdef(t.oid) AS definition \
     FROM pg_trigger t WHERE NOT t.tgisinternal AND t.tgrelid IN ",
    replaced!(),
    " ORDER BY t.tgrelid, t.tgname"
);

const TRIGGER_FIRING: &str = concat!(
    "SELECT (SELECT r.relname FROM pg_class r WHERE r.oid = t.tgrelid)::text AS table_name, t.tgname::text AS name, \
         CASE t.tgenabled WHEN 'A' THEN 'ENABLE ALWAYS' WHEN 'R' THEN 'ENABLE REPLICA' \
             ELSE 'DISABLE' END AS definition \
     FROM pg_trigger t WHERE NOT t.tgisinternal AND t.tgenabled <> 'O' AND t.tgrelid IN ",
    replaced!(),
    " ORDER BY t.tgrelid, t.tgname"
);

const OWNED_SEQUENCES: &str = concat!(
    "SELECT (SELECT r.relname FROM pg_class r WHERE r.oid = d.refobjid)::text AS table_name, s.relname::text AS name, \
         a.attname::text AS definition \
     FROM pg_depend d JOIN pg_class s ON d.classid = 'pg_class'::regclass AND s.oid = d.objid \
       JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid \
     WHERE s.relkind = 'S' AND d.deptype = 'a' AND d.refobjid IN ",
    replaced!(),
    " ORDER BY s.relname"
);

/// Each index of a partition that copies an index of a replaced table, and its name after that
/// index and the partition's number.
const PARTITION_INDEX_NAMES: &str = concat!(
    "SELECT copy.relname::text, index.relname || substring(t.relname from '_p[0-9]+$') \
     FROM pg_inherits i JOIN pg_class copy ON copy.oid = i.inhrelid \
       JOIN pg_class index ON index.oid = i.inhparent AND index.relkind = 'I' \
       JOIN pg_index x ON x.indexrelid = copy.oid JOIN pg_class t ON t.oid = x.indrelid \
       JOIN pg_inherits tp ON tp.inhrelid = t.oid \
     WHERE tp.inhparent IN ",
    replaced!()
);

/// Anything of the tables the conversion would not carry over: it refuses rather than lose it.
const CANNOT_CARRY_OVER: &str = concat!(
    "SELECT format('%s has %s', c.relname, what) FROM pg_class c, LATERAL (VALUES \
         (c.relrowsecurity, 'row security'), \
         (c.relacl IS NOT NULL, 'grants'), \
         (c.relreplident <> 'd', 'a replica identity'), \
         (obj_description(c.oid, 'pg_class') IS NOT NULL, 'a comment'), \
         (EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attidentity <> ''), \
          'an identity column'), \
         (EXISTS (SELECT FROM pg_attribute a \
                  WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped \
                  AND (a.attacl IS NOT NULL \
                       OR EXISTS (SELECT FROM unnest(a.attoptions) o WHERE o LIKE 'n_distinct%') \
                       OR a.attstattarget >= 0 \
                       OR col_description(c.oid, a.attnum) IS NOT NULL)), \
          'column settings'), \
         (EXISTS (SELECT FROM pg_statistic_ext s WHERE s.stxrelid = c.oid), \
          'extended statistics'), \
         (EXISTS (SELECT FROM pg_rewrite r WHERE r.ev_class = c.oid), 'rules'), \
         (EXISTS (SELECT FROM pg_inherits i WHERE i.inhrelid = c.oid OR i.inhparent = c.oid), \
          'inheritance') \
     ) v (has, what) WHERE has AND c.oid IN ",
    replaced!()
);

async fn refuse_what_cannot_be_carried_over(
    conn: &mut PgConnection,
    tables: &[&str],
) -> Result<()> {
    let problems: Vec<String> = sqlx::query_scalar(CANNOT_CARRY_OVER)
        .bind(tables)
        .fetch_all(conn)
        .await?;
    if problems.is_empty() {
        return Ok(());
    }
    Err(Error::Internal(format!(
        "cannot partition by session: {} (the conversion would lose it)",
        problems.join("; ")
    )))
}

/// Renames `table` aside and puts in its place a table with the same columns (defaults,
/// generated columns, checks, storage, compression), partitioned by its session column, holding its
/// rows. Its keys, indexes and triggers come after every table is replaced.
async fn replace_with_partitioned(
    conn: &mut PgConnection,
    table: SessionTable<'_>,
    partitions: u32,
) -> Result<()> {
    let name = quoted(table.name);
    let old = quoted(&old_name(table.name));
    let (persistence, columns, parameters): (String, Vec<String>, Option<String>) = sqlx::query_as(
        "SELECT c.relpersistence::text, \
             ARRAY(SELECT quote_ident(a.attname) FROM pg_attribute a \
                   WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped \
                     AND a.attgenerated = '' ORDER BY a.attnum), \
             array_to_string(c.reloptions, ', ') \
         FROM pg_class c WHERE c.oid = to_regclass(format('public.%I', $1::text))",
    )
    .bind(table.name)
    .fetch_one(&mut *conn)
    .await?;
    // Only the partitions hold rows, so only they are unlogged: PostgreSQL 18 refuses an
    // unlogged partitioned table (on earlier versions its persistence meant nothing).
    let unlogged = if persistence == "u" { "UNLOGGED " } else { "" };
    // Storage parameters (a fillfactor) belong to the partitions: a partitioned table has none.
    let parameters = parameters.map_or(String::new(), |p| format!(" WITH ({p})"));
    let columns = columns.join(", ");
    let statements = [
        format!("ALTER TABLE {name} RENAME TO {old}"),
        format!(
            "CREATE TABLE {name} (LIKE {old} INCLUDING DEFAULTS INCLUDING GENERATED \
             INCLUDING CONSTRAINTS INCLUDING STORAGE INCLUDING COMPRESSION) PARTITION BY HASH ({})",
            quoted(table.column)
        ),
    ];
    for statement in statements {
        run(conn, statement).await?;
    }
    for remainder in 0..partitions {
        run(
            conn,
            format!(
                "CREATE {unlogged}TABLE {} PARTITION OF {name} \
                 FOR VALUES WITH (MODULUS {partitions}, REMAINDER {remainder}){parameters}",
                quoted(&partition_name(table.name, remainder))
            ),
        )
        .await?;
    }
    run(
        conn,
        format!("INSERT INTO {name} ({columns}) SELECT {columns} FROM {old}"),
    )
    .await?;
    Ok(())
}

/// The partition of `table` that holds the sessions of hash remainder `remainder`.
fn partition_name(table: &str, remainder: u32) -> String {
    format!("{table}_p{remainder}")
}

/// Where a table waits while its partitioned replacement is built.
fn old_name(table: &str) -> String {
    format!("{table}__unpartitioned")
}

fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
