//! Live fan-out. Triggers log every change in the writing transaction (see
//! `migrations/0003_live_changes.sql` and after); each process follows that log once
//! ([`follower`]), woken by NOTIFY ([`listen`]), and its [`Hub`] queues each change for the
//! subscribers of its session ([`queue`]). Every stream resumes the same way ([`resume`]:
//! replay from the database, then live, no gap and no duplicate) and supplies only its source:
//! [`timeline`], [`events`], [`session_changes`], [`feed`].

mod change;
pub mod envelope;
pub mod event_pages;
pub mod events;
pub mod feed;
mod follower;
mod hub;
mod listen;
mod options;
mod queue;
mod resume;
pub mod session_changes;
mod slots;
pub mod timeline;

pub use change::{Change, Named};
pub use hub::{FollowerHealth, Hub};
pub use options::{HubOptions, LiveOptions};
pub use queue::{Interrupted, Receiver};
pub use slots::{NoSlot, Slot, SubscriptionSlots};
