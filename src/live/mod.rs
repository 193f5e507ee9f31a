//! Live fan-out: changes logged by the database (see `migrations/0003_live_changes.sql`) are
//! read once per process by the [`Hub`] and broadcast to every subscriber of their session.

mod hub;
pub mod timeline;

pub use hub::{Change, Hub};
