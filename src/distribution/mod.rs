//! Whether the schema can be distributed by session on a distributed PostgreSQL (Citus), as
//! `docs/scale-out.md` describes: where each table lives ([`placements`], read from that
//! document), and what each placement requires of a table's keys ([`rules`]).
//! `casefile check-distribution` runs it on a database's catalog.

pub mod placements;
pub mod rules;

pub use placements::{Placement, Placements};
pub use rules::{Finding, Problem, check, distribution_column};

use crate::store::Store;
use crate::store::partitioning::{Partitioned, SessionTable};

/// Partitions every table `docs/scale-out.md` places as distributed by its session column
/// into `partitions` hash partitions (`casefile migrate --partition-by-session`): the layout
/// a distributed PostgreSQL imposes, on one PostgreSQL.
pub async fn partition_by_session(store: &Store, partitions: u32) -> anyhow::Result<Partitioned> {
    let placements = Placements::documented()?;
    let tables: Vec<SessionTable<'_>> = placements
        .iter()
        .filter(|(_, placement)| *placement == Placement::Distributed)
        .map(|(name, _)| SessionTable {
            name,
            column: distribution_column(name),
        })
        .collect();
    Ok(store.partition_by_session(&tables, partitions).await?)
}
