//! How many questions were asked in a chat (`Chat.questionCount`), by chat.

use std::collections::HashMap;

use super::{Load, LoadError};
use crate::store::{Key, Store};

loader!(
    /// Counts of the questions of a chat.
    QuestionCountsByChat: Key => i64, |store, keys| store.question_counts_by_chat(keys)
);
