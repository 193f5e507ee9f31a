//! Whether the schema can be distributed by session on a distributed PostgreSQL (Citus), as
//! `docs/scale-out.md` describes: where each table lives ([`placements`], read from that
//! document), and what each placement requires of a table's keys ([`rules`]).
//! `casefile check-distribution` runs it on a database's catalog.

pub mod placements;
pub mod rules;

pub use placements::{Placement, Placements};
pub use rules::{Finding, Problem, check};
