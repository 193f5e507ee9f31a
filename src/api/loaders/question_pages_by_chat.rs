//! Pages of the questions asked in a chat (`Chat.questionsConnection`), by chat and page.

use std::collections::HashMap;
use std::sync::Arc;

use super::{Load, LoadError};
use crate::store::{ChatUserMessageRow, CountedPage, RecordPageKey, Store};

loader!(
    /// Pages of the questions of a chat, oldest first, with how many it has.
    QuestionPagesByChat: RecordPageKey => CountedPage<Arc<ChatUserMessageRow>>,
    |store, keys| store.question_pages(keys)
);
