//! Retention (seed 000 Q12): a purge runs a policy — sessions soft-deleted or finished before a
//! cutoff, idempotency receipts older than one — in small batches, and leaves a record of what
//! it did. `casefile purge` runs it once (`cli/purge.rs`); the server runs the same policy on a
//! schedule (`--retention-…`), the only way on the embedded database while it serves.
//!
//! `policy.rs` says what goes, `batches.rs` deletes it, `archive.rs` keeps a copy of each
//! session first when asked, `schedule.rs` runs the server's policy, and `options.rs` holds
//! their flags. The SQL is in `store/retention.rs` (SQL lives only in `store/`).

mod archive;
mod batches;
mod options;
mod policy;
mod schedule;

pub use archive::Archive;
pub use batches::{PurgeFailed, Purged, purge};
pub use options::{PurgeBatches, RetentionOptions};
pub use policy::{Cutoff, Policy, parse_cutoff};
pub use schedule::spawn_schedule;
