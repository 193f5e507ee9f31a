//! The size of a response, counted while it is built where its bytes come from: the text and
//! JSON of rows (see [`crate::api::scalars`]). Everything else in a response (ids, numbers,
//! enums, timestamps) is small and bounded by the query's cost. Past the limit, counted fields
//! fail, so their parents stop resolving, and the whole response is replaced by one error.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use async_graphql::{ServerResult, Value};

use super::limits::{RESPONSE_TOO_LARGE, coded_error};

/// The bytes of one response (or of one event of a subscription), in the operation's data.
pub struct ResponseSize {
    limit: usize,
    bytes: AtomicUsize,
    exceeded: AtomicBool,
}

impl ResponseSize {
    pub fn new(limit: usize) -> Arc<ResponseSize> {
        Arc::new(ResponseSize {
            limit,
            bytes: AtomicUsize::new(0),
            exceeded: AtomicBool::new(false),
        })
    }

    /// Adds `bytes`; an error once the total is over the limit.
    pub fn add(&self, bytes: usize) -> ServerResult<()> {
        let total = self.bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if total > self.limit {
            self.exceeded.store(true, Ordering::Relaxed);
            return Err(coded_error(RESPONSE_TOO_LARGE, "response too large"));
        }
        Ok(())
    }

    /// Whether the response went over the limit; starts counting the next one.
    pub fn take_exceeded(&self) -> bool {
        self.bytes.store(0, Ordering::Relaxed);
        self.exceeded.swap(false, Ordering::Relaxed)
    }
}

/// About how many bytes `value` takes as JSON.
pub fn size_of(value: &Value) -> usize {
    match value {
        Value::Null => 4,
        Value::Boolean(_) => 5,
        Value::Number(_) => 8,
        Value::String(s) => s.len() + 2,
        Value::Enum(name) => name.len() + 2,
        Value::Binary(bytes) => bytes.len() * 4 / 3 + 2,
        Value::List(items) => items.iter().map(size_of).sum::<usize>() + items.len() + 1,
        Value::Object(fields) => fields
            .iter()
            .map(|(key, v)| key.len() + 4 + size_of(v))
            .sum::<usize>()
            .saturating_add(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_the_limit_is_an_error_until_the_next_response() {
        let size = ResponseSize::new(10);
        assert!(size.add(6).is_ok());
        assert!(size.add(6).is_err());
        assert!(size.take_exceeded());
        assert!(size.add(6).is_ok(), "the next response starts from zero");
        assert!(!size.take_exceeded());
    }
}
