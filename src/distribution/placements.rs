//! Where each table lives, as `docs/scale-out.md` says: the rows of its table whose first cell
//! is a table's name in backticks and whose second is its placement. The document is the one
//! source: it is compiled in, and parsed strictly.

use std::collections::BTreeMap;
use std::fmt;

/// `docs/scale-out.md`, as this binary was built with it.
const DOCUMENT: &str = include_str!("../../docs/scale-out.md");

/// Where a table lives on a distributed PostgreSQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Sharded by its session, colocated with `sessions`.
    Distributed,
    /// Replicated to every node.
    Reference,
    /// Kept on the coordinator.
    Local,
}

impl Placement {
    fn parse(word: &str) -> Option<Placement> {
        match word {
            "distributed" => Some(Placement::Distributed),
            "reference" => Some(Placement::Reference),
            "local" => Some(Placement::Local),
            _ => None,
        }
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Placement::Distributed => "distributed",
            Placement::Reference => "reference",
            Placement::Local => "local",
        })
    }
}

/// Why a document's placements could not be read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlacementsError {
    #[error(
        "line {line}: `{table}` has placement {placement:?}: not distributed, reference or local"
    )]
    UnknownPlacement {
        line: usize,
        table: String,
        placement: String,
    },
    #[error("line {line}: `{table}` is placed a second time")]
    PlacedTwice { line: usize, table: String },
    #[error("no table rows (| `table` | placement | why |) found")]
    Empty,
}

/// Each table's placement, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placements(BTreeMap<String, Placement>);

impl Placements {
    /// The placements of `docs/scale-out.md`.
    pub fn documented() -> Result<Placements, PlacementsError> {
        Self::parse(DOCUMENT)
    }

    /// The placements in the rows of a Markdown document's placement table: the table whose
    /// header starts `| table | placement |` (the document's other tables are not read).
    pub fn parse(document: &str) -> Result<Placements, PlacementsError> {
        let mut placements = BTreeMap::new();
        let mut in_placements = false;
        for (index, line) in document.lines().enumerate() {
            let Some(row) = line.trim().strip_prefix('|') else {
                in_placements = false;
                continue;
            };
            let mut cells = row.split('|').map(str::trim);
            let first = cells.next().unwrap_or_default();
            if first == "table" {
                in_placements = cells.next() == Some("placement");
                continue;
            }
            if !in_placements {
                continue;
            }
            let Some(table) = first.strip_prefix('`').and_then(|c| c.strip_suffix('`')) else {
                continue; // the header's rule
            };
            let word = cells.next().unwrap_or_default();
            let line = index + 1;
            let placement =
                Placement::parse(word).ok_or_else(|| PlacementsError::UnknownPlacement {
                    line,
                    table: table.to_owned(),
                    placement: word.to_owned(),
                })?;
            if placements.insert(table.to_owned(), placement).is_some() {
                return Err(PlacementsError::PlacedTwice {
                    line,
                    table: table.to_owned(),
                });
            }
        }
        if placements.is_empty() {
            return Err(PlacementsError::Empty);
        }
        Ok(Placements(placements))
    }

    /// Places `table` (or places it anew).
    pub fn place(&mut self, table: &str, placement: Placement) {
        self.0.insert(table.to_owned(), placement);
    }

    pub fn get(&self, table: &str) -> Option<Placement> {
        self.0.get(table).copied()
    }

    /// The tables and their placements, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Placement)> {
        self.0
            .iter()
            .map(|(table, placement)| (table.as_str(), *placement))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_places_every_table() {
        let placements = Placements::documented().unwrap();
        assert_eq!(placements.get("sessions"), Some(Placement::Distributed));
        assert_eq!(placements.get("messages"), Some(Placement::Distributed));
        assert_eq!(placements.get("api_tokens"), Some(Placement::Reference));
        assert_eq!(placements.get("live_changes"), Some(Placement::Distributed));
        assert_eq!(placements.get("session_feed"), Some(Placement::Local));
        assert_eq!(placements.get("_sqlx_migrations"), Some(Placement::Local));
        assert_eq!(placements.get("table"), None, "the header is no row");
    }

    #[test]
    fn rows_are_read_from_a_markdown_table() {
        let placements = Placements::parse(
            "Some prose with a `table` in it.\n\
             \n\
             | table | placement | why |\n\
             | --- | --- | --- |\n\
             | `things` | distributed | per session |\n\
             |`tokens`|reference|small|\n",
        )
        .unwrap();
        assert_eq!(
            placements.iter().collect::<Vec<_>>(),
            [
                ("things", Placement::Distributed),
                ("tokens", Placement::Reference)
            ]
        );
    }

    #[test]
    fn an_unknown_placement_is_an_error() {
        let error = Placements::parse(
            "| table | placement | why |\n\
             | --- | --- | --- |\n\
             | `things` | distributed | per session |\n\
             | `stuff` | sharded | a typo |\n",
        )
        .unwrap_err();
        assert_eq!(
            error,
            PlacementsError::UnknownPlacement {
                line: 4,
                table: "stuff".into(),
                placement: "sharded".into()
            }
        );
        assert_eq!(
            Placements::parse("| table | placement |\n| `things` |\n").unwrap_err(),
            PlacementsError::UnknownPlacement {
                line: 2,
                table: "things".into(),
                placement: String::new()
            }
        );
    }

    #[test]
    fn only_the_placement_table_is_read() {
        let placements = Placements::parse(
            "| statement | where | why |\n\
             | --- | --- | --- |\n\
             | `SELECT 1` | here | a table of another kind |\n\
             \n\
             | table | placement | why |\n\
             | --- | --- | --- |\n\
             | `things` | distributed | per session |\n\
             \n\
             | `after` | the table | ended |\n",
        )
        .unwrap();
        assert_eq!(
            placements.iter().collect::<Vec<_>>(),
            [("things", Placement::Distributed)]
        );
    }

    #[test]
    fn a_table_placed_twice_or_none_at_all_is_an_error() {
        assert_eq!(
            Placements::parse(
                "| table | placement |\n| `things` | local | |\n| `things` | distributed | |\n"
            )
            .unwrap_err(),
            PlacementsError::PlacedTwice {
                line: 3,
                table: "things".into()
            }
        );
        assert_eq!(
            Placements::parse("# Nothing here\n| table | placement |\n").unwrap_err(),
            PlacementsError::Empty
        );
    }

    /// The Citus statements of `docs/scale-out.md` distribute every distributed table by its
    /// session column, colocated with `sessions`, and replicate every reference table: each
    /// once, and nothing else.
    #[test]
    fn the_citus_statements_place_every_distributed_and_reference_table() {
        let placements = Placements::documented().unwrap();
        let argument = |line: &str, call: &str| {
            let rest = line.strip_prefix(&format!("SELECT {call}('"))?;
            let (table, rest) = rest.split_once('\'')?;
            Some((table.to_owned(), rest.to_owned()))
        };
        let mut stated = Vec::new();
        for line in DOCUMENT.lines() {
            if let Some((table, rest)) = argument(line, "create_distributed_table") {
                let column = crate::distribution::distribution_column(&table);
                let colocated = if table == "sessions" {
                    ", shard_count => 32);".to_owned()
                } else {
                    ", colocate_with => 'sessions');".to_owned()
                };
                assert_eq!(rest, format!(", '{column}'{colocated}"), "{line}");
                stated.push((table, Placement::Distributed));
            } else if let Some((table, rest)) = argument(line, "create_reference_table") {
                assert_eq!(rest, ");", "{line}");
                stated.push((table, Placement::Reference));
            }
        }
        let mut placed: Vec<(String, Placement)> = placements
            .iter()
            .filter(|(_, placement)| *placement != Placement::Local)
            .map(|(table, placement)| (table.to_owned(), placement))
            .collect();
        let first_distributed = stated
            .iter()
            .position(|(_, p)| *p == Placement::Distributed)
            .unwrap();
        assert_eq!(
            stated[first_distributed].0, "sessions",
            "sessions come first"
        );
        stated.sort_by(|a, b| a.0.cmp(&b.0));
        placed.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(stated, placed);
    }
}
