//! Live fan-out. Triggers log every change in the writing transaction (see
//! `migrations/0003_live_changes.sql` and after); each process follows that log once
//! ([`follower`]), woken by NOTIFY ([`listen`]), and its [`Hub`] queues each change for the
//! subscribers of its session ([`queue`]). Subscriptions ([`timeline`]) turn changes into what
//! their clients are sent.

mod change;
pub mod envelope;
pub mod events;
mod follower;
mod hub;
mod listen;
mod options;
mod queue;
pub mod resumable;
mod slots;
pub mod timeline;

pub use change::Change;
pub use hub::{FollowerHealth, Hub};
pub use options::{HubOptions, LiveOptions};
pub use queue::{Interrupted, Receiver};
pub use slots::{NoSlot, Slot, SubscriptionSlots};
