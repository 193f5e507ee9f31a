//! Live fan-out: changes logged by the database (see `migrations/0003_live_changes.sql` and
//! `0004_live_reliability.sql`) are read once per process by the [`Hub`] and queued for every
//! subscriber of their session.

mod hub;
mod slots;
pub mod timeline;

pub use hub::{Change, ChangeRow, Hub, HubOptions, Receiver, SUBSCRIBER_BYTE_BUDGET};
pub use slots::{Slot, SubscriptionSlots};
