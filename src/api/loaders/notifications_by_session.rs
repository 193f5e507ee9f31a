//! A session's notifications (`Session.notifications`).

use std::collections::HashMap;
use std::sync::Arc;

use uuid::Uuid;

use super::{Load, LoadError};
use crate::store::{NotificationRow, Store};

loader!(
    /// Notifications of a session, oldest first.
    NotificationsBySession: Uuid => Vec<Arc<NotificationRow>>,
    |store, keys| store.notifications_by_session(keys)
);
