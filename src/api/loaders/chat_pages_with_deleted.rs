//! Pages of the chats of a session, the deleted ones too
//! (`Session.chatsConnection(includeDeleted: true)`), by session and page.

use std::collections::HashMap;
use std::sync::Arc;

use super::{Load, LoadError};
use crate::store::{ChatRow, CountedPage, RecordPageKey, Store};

loader!(
    /// Pages of the chats of a session, deleted or not, oldest first.
    ChatPagesWithDeleted: RecordPageKey => CountedPage<Arc<ChatRow>>,
    |store, keys| store.chat_pages_with_deleted(keys)
);
