//! The rules a schema keeps so that it can be distributed by session (`docs/scale-out.md`):
//! every table placed; every distributed table carries its session, in every key and in every
//! foreign key to another distributed table; no foreign key a distributed PostgreSQL cannot keep
//! between placements.

use std::fmt;

use super::placements::{Placement, Placements};
use crate::store::catalog::{Catalog, ForeignKey, Key, KeyKind};

/// The distribution column: the session a row belongs to.
const SESSION_COLUMN: &str = "session_id";

/// The sessions themselves, which every distributed table is colocated with.
const SESSIONS: &str = "sessions";

/// The column a distributed table is sharded by: `session_id`, except in `sessions`, whose `id`
/// is the session id.
pub fn distribution_column(table: &str) -> &'static str {
    if table == SESSIONS {
        "id"
    } else {
        SESSION_COLUMN
    }
}

/// What is wrong with one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub table: String,
    pub problem: Problem,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// In the database, not in the document.
    Unclassified,
    /// In the document, not in the database.
    NotInDatabase,
    /// Distributed, without its distribution column.
    NoDistributionColumn { column: &'static str },
    /// Distributed, with a distribution column that may be null.
    NullableDistributionColumn { column: &'static str },
    /// Distributed, without a primary key.
    NoPrimaryKey,
    /// A distributed table's primary key, unique constraint or unique index without the
    /// distribution column (an expression over it does not count).
    KeyWithoutDistributionColumn {
        kind: KeyKind,
        name: String,
        columns: Vec<String>,
        column: &'static str,
    },
    /// A foreign key between distributed tables that does not refer from one's distribution
    /// column to the other's.
    ForeignKeyWithoutSession {
        name: String,
        references: String,
        column: &'static str,
        referenced_column: &'static str,
    },
    /// A foreign key between placements that a distributed PostgreSQL cannot keep.
    ForeignKeyAcrossPlacements {
        name: String,
        placement: Placement,
        references: String,
        referenced: Placement,
    },
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.table)?;
        match &self.problem {
            Problem::Unclassified => write!(
                f,
                "not in docs/scale-out.md (place it: distributed, reference or local)"
            ),
            Problem::NotInDatabase => write!(f, "in docs/scale-out.md but not in the database"),
            Problem::NoDistributionColumn { column } => {
                write!(f, "distributed, but has no `{column}` column")
            }
            Problem::NullableDistributionColumn { column } => {
                write!(f, "distributed, but `{column}` may be null")
            }
            Problem::NoPrimaryKey => write!(f, "distributed, but has no primary key"),
            Problem::KeyWithoutDistributionColumn {
                kind,
                name,
                columns,
                column,
            } => {
                let kind = match kind {
                    KeyKind::Primary => "primary key",
                    KeyKind::Unique => "unique constraint",
                    KeyKind::UniqueIndex => "unique index",
                };
                write!(
                    f,
                    "{kind} {name} ({}) does not contain `{column}`",
                    columns.join(", ")
                )
            }
            Problem::ForeignKeyWithoutSession {
                name,
                references,
                column,
                referenced_column,
            } => write!(
                f,
                "foreign key {name} to {references} does not refer from `{column}` to \
                 {references}.`{referenced_column}`"
            ),
            Problem::ForeignKeyAcrossPlacements {
                name,
                placement,
                references,
                referenced,
            } => write!(
                f,
                "foreign key {name} refers from a {placement} table to {references}, a \
                 {referenced} one: a distributed PostgreSQL cannot keep it"
            ),
        }
    }
}

/// Whether a foreign key from a `from` table to a `to` table, `references`, cannot be kept by
/// a distributed PostgreSQL. Local tables that refer to `sessions` are allowed: on one
/// PostgreSQL the session's delete cascades to their rows; distributed, the retention purge is
/// to delete them by `session_id` instead (docs/scale-out.md).
fn crosses_placements(from: Placement, to: Placement, references: &str) -> bool {
    use Placement::*;
    match (from, to) {
        // Between distributed tables, a key is kept if it refers by session: checked apart.
        (Distributed, Distributed | Reference) | (Reference, Reference) => false,
        (Local, Local | Reference) => false,
        (Local, Distributed) => references != SESSIONS,
        (Distributed, Local) | (Reference, Distributed | Local) => true,
    }
}

/// Checks `catalog` against `placements`. The findings come in the order of their tables'
/// names.
pub fn check(catalog: &Catalog, placements: &Placements) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut found = |table: &str, problem: Problem| {
        findings.push(Finding {
            table: table.to_owned(),
            problem,
        })
    };
    for table in &catalog.tables {
        match placements.get(&table.name) {
            None => found(&table.name, Problem::Unclassified),
            Some(Placement::Distributed) => {
                let column = distribution_column(&table.name);
                match table.columns.iter().find(|c| c.name == column) {
                    None => found(&table.name, Problem::NoDistributionColumn { column }),
                    Some(c) if !c.not_null => {
                        found(&table.name, Problem::NullableDistributionColumn { column })
                    }
                    Some(_) => {}
                }
                let keys: Vec<&Key> = catalog
                    .keys
                    .iter()
                    .filter(|key| key.table == table.name)
                    .collect();
                if !keys.iter().any(|key| key.kind == KeyKind::Primary) {
                    found(&table.name, Problem::NoPrimaryKey);
                }
                for key in keys {
                    if !key.columns.iter().any(|c| c == column) {
                        found(
                            &table.name,
                            Problem::KeyWithoutDistributionColumn {
                                kind: key.kind,
                                name: key.name.clone(),
                                columns: key.columns.clone(),
                                column,
                            },
                        );
                    }
                }
            }
            Some(Placement::Reference | Placement::Local) => {}
        }
    }
    for key in &catalog.foreign_keys {
        let (Some(from), Some(to)) = (placements.get(&key.table), placements.get(&key.references))
        else {
            continue; // an unplaced table is a finding of its own
        };
        if from == Placement::Distributed && to == Placement::Distributed {
            if !refers_by_session(key) {
                found(
                    &key.table,
                    Problem::ForeignKeyWithoutSession {
                        name: key.name.clone(),
                        references: key.references.clone(),
                        column: distribution_column(&key.table),
                        referenced_column: distribution_column(&key.references),
                    },
                );
            }
        } else if crosses_placements(from, to, &key.references) {
            found(
                &key.table,
                Problem::ForeignKeyAcrossPlacements {
                    name: key.name.clone(),
                    placement: from,
                    references: key.references.clone(),
                    referenced: to,
                },
            );
        }
    }
    let in_database = |table: &str| catalog.tables.iter().any(|t| t.name == table);
    for (table, _) in placements.iter().filter(|(table, _)| !in_database(table)) {
        found(table, Problem::NotInDatabase);
    }
    findings.sort_by(|a, b| a.table.cmp(&b.table));
    findings
}

/// Whether `key` refers from its table's distribution column to the referenced table's.
fn refers_by_session(key: &ForeignKey) -> bool {
    let (column, referenced) = (
        distribution_column(&key.table),
        distribution_column(&key.references),
    );
    key.columns
        .iter()
        .zip(&key.referenced_columns)
        .any(|(c, r)| c == column && r == referenced)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::catalog::{Column, Table};

    fn table(name: &str, columns: &[&str]) -> Table {
        Table {
            name: name.to_owned(),
            columns: columns
                .iter()
                .map(|c| Column {
                    name: c.trim_end_matches('?').to_owned(),
                    not_null: !c.ends_with('?'),
                })
                .collect(),
        }
    }

    fn key(table: &str, name: &str, kind: KeyKind, columns: &[&str]) -> Key {
        Key {
            table: table.to_owned(),
            name: name.to_owned(),
            kind,
            columns: columns.iter().map(|c| c.to_string()).collect(),
        }
    }

    fn foreign_key(
        table: &str,
        name: &str,
        columns: &[&str],
        references: &str,
        to: &[&str],
    ) -> ForeignKey {
        ForeignKey {
            table: table.to_owned(),
            name: name.to_owned(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            references: references.to_owned(),
            referenced_columns: to.iter().map(|c| c.to_string()).collect(),
        }
    }

    /// `sessions`, `stages` under it, and `tokens`, placed and keyed as they should be.
    fn sound() -> (Catalog, Placements) {
        let catalog = Catalog {
            tables: vec![
                table("sessions", &["id", "title?"]),
                table("stages", &["id", "session_id", "stage_index"]),
                table("tokens", &["id"]),
                table("receipts", &["id", "session_id"]),
            ],
            keys: vec![
                key("sessions", "sessions_pkey", KeyKind::Primary, &["id"]),
                key(
                    "stages",
                    "stages_pkey",
                    KeyKind::Primary,
                    &["id", "session_id"],
                ),
                key(
                    "stages",
                    "stages_index",
                    KeyKind::UniqueIndex,
                    &["session_id", "stage_index"],
                ),
                key("tokens", "tokens_pkey", KeyKind::Primary, &["id"]),
            ],
            foreign_keys: vec![
                foreign_key(
                    "stages",
                    "stages_session",
                    &["session_id"],
                    "sessions",
                    &["id"],
                ),
                foreign_key(
                    "receipts",
                    "receipts_session",
                    &["session_id"],
                    "sessions",
                    &["id"],
                ),
            ],
        };
        let placements = Placements::parse(
            "| table | placement | why |\n\
             | `sessions` | distributed | |\n| `stages` | distributed | |\n\
             | `tokens` | reference | |\n| `receipts` | local | |\n",
        )
        .unwrap();
        (catalog, placements)
    }

    fn problems(catalog: &Catalog, placements: &Placements) -> Vec<String> {
        check(catalog, placements)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn the_sessions_distribute_by_their_id_and_local_tables_may_refer_to_them() {
        let (catalog, placements) = sound();
        assert_eq!(problems(&catalog, &placements), Vec::<String>::new());
    }

    #[test]
    fn a_key_must_name_the_session_itself_and_a_foreign_key_map_it_to_the_session() {
        let (mut catalog, placements) = sound();
        catalog
            .tables
            .push(table("agents", &["id", "stage_id", "session_id"]));
        catalog.keys.extend([
            key(
                "agents",
                "agents_pkey",
                KeyKind::Primary,
                &["id", "session_id"],
            ),
            key(
                "agents",
                "agents_place",
                KeyKind::UniqueIndex,
                &["stage_id", "(session_id::text)"],
            ),
        ]);
        catalog.foreign_keys.extend([
            // Both columns are there, but each refers to the other's.
            foreign_key(
                "agents",
                "agents_stage",
                &["stage_id", "session_id"],
                "stages",
                &["session_id", "id"],
            ),
            foreign_key(
                "agents",
                "agents_session",
                &["session_id"],
                "sessions",
                &["id"],
            ),
            foreign_key(
                "stages",
                "stages_session_by_id",
                &["id"],
                "sessions",
                &["id"],
            ),
        ]);
        let mut placements = placements;
        placements.place("agents", Placement::Distributed);
        assert_eq!(
            problems(&catalog, &placements),
            [
                "agents: unique index agents_place (stage_id, (session_id::text)) does not contain \
                 `session_id`",
                "agents: foreign key agents_stage to stages does not refer from `session_id` to \
                 stages.`session_id`",
                "stages: foreign key stages_session_by_id to sessions does not refer from \
                 `session_id` to sessions.`id`",
            ]
        );
    }

    #[test]
    fn a_distributed_table_has_its_session_not_null_and_a_primary_key() {
        let (mut catalog, mut placements) = sound();
        catalog.tables.push(table("notes", &["id", "session_id?"]));
        catalog.tables.push(table("sessionless", &["id"]));
        catalog.keys.push(key(
            "sessionless",
            "sessionless_pkey",
            KeyKind::Primary,
            &["id"],
        ));
        placements.place("notes", Placement::Distributed);
        placements.place("sessionless", Placement::Distributed);
        let findings = check(&catalog, &placements);
        assert_eq!(
            findings
                .iter()
                .map(|f| (f.table.as_str(), &f.problem))
                .collect::<Vec<_>>(),
            [
                (
                    "notes",
                    &Problem::NullableDistributionColumn {
                        column: "session_id"
                    }
                ),
                ("notes", &Problem::NoPrimaryKey),
                (
                    "sessionless",
                    &Problem::NoDistributionColumn {
                        column: "session_id"
                    }
                ),
                (
                    "sessionless",
                    &Problem::KeyWithoutDistributionColumn {
                        kind: KeyKind::Primary,
                        name: "sessionless_pkey".into(),
                        columns: vec!["id".into()],
                        column: "session_id"
                    }
                ),
            ]
        );
    }

    #[test]
    fn foreign_keys_across_placements_are_refused_but_from_local_tables_to_sessions() {
        let (mut catalog, placements) = sound();
        catalog.foreign_keys.extend([
            foreign_key("tokens", "tokens_session", &["id"], "sessions", &["id"]),
            foreign_key("tokens", "tokens_receipt", &["id"], "receipts", &["id"]),
            foreign_key(
                "receipts",
                "receipts_stage",
                &["id", "session_id"],
                "stages",
                &["id", "session_id"],
            ),
            foreign_key("receipts", "receipts_token", &["id"], "tokens", &["id"]),
            foreign_key("stages", "stages_receipt", &["id"], "receipts", &["id"]),
            foreign_key("stages", "stages_token", &["id"], "tokens", &["id"]),
        ]);
        assert_eq!(
            problems(&catalog, &placements),
            [
                "receipts: foreign key receipts_stage refers from a local table to stages, a \
                 distributed one: a distributed PostgreSQL cannot keep it",
                "stages: foreign key stages_receipt refers from a distributed table to receipts, \
                 a local one: a distributed PostgreSQL cannot keep it",
                "tokens: foreign key tokens_session refers from a reference table to sessions, a \
                 distributed one: a distributed PostgreSQL cannot keep it",
                "tokens: foreign key tokens_receipt refers from a reference table to receipts, a \
                 local one: a distributed PostgreSQL cannot keep it",
            ]
        );
    }

    #[test]
    fn every_table_is_placed_and_every_placed_table_exists() {
        let (mut catalog, mut placements) = sound();
        catalog.tables.push(table("things", &["id"]));
        catalog.foreign_keys.push(foreign_key(
            "things",
            "things_stage",
            &["id"],
            "stages",
            &["id"],
        ));
        placements.place("gone", Placement::Local);
        assert_eq!(
            problems(&catalog, &placements),
            [
                "gone: in docs/scale-out.md but not in the database",
                "things: not in docs/scale-out.md (place it: distributed, reference or local)",
            ]
        );
    }
}
