//! The API's options: protective limits on what one request may ask for, checked by the
//! runner (`runner::limits`, `runner::text`) and by every paginated field.

use clap::Args;

use crate::store::write::notifications;

/// Room for an LLM interaction's request and response JSON (4 MiB each at most).
const DEFAULT_MAX_BODY_BYTES: usize = 8 * 1024 * 1024;
/// The query text alone, the tokens in it and its nesting: graphql-java's parser limits (1 MiB,
/// 15,000 tokens), far above any query a person or a code generator writes.
const DEFAULT_MAX_QUERY_BYTES: usize = 1024 * 1024;
const DEFAULT_MAX_QUERY_TOKENS: usize = 15_000;
const DEFAULT_MAX_QUERY_NESTING: usize = 64;
const DEFAULT_MAX_SELECTIONS: usize = 10_000;
const DEFAULT_MAX_QUERY_DEPTH: usize = 16;
const DEFAULT_MAX_QUERY_COMPLEXITY: usize = 250_000;
const DEFAULT_MAX_BATCH_OPERATIONS: usize = 10;
const DEFAULT_MAX_ALIASES: usize = 50;
const DEFAULT_MAX_ROOT_FIELDS: usize = 20;
const DEFAULT_MAX_RESPONSE_BYTES: usize = 32 * 1024 * 1024;
pub const DEFAULT_MAX_PAGE_SIZE: usize = 100;

/// Protective limits on what one request may ask for.
#[derive(Debug, Clone, Copy, Args)]
pub struct Limits {
    /// Largest accepted request body, in bytes.
    #[arg(long, env = "CASEFILE_MAX_BODY_BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,

    /// Largest accepted query text, in bytes (variables are not part of it).
    #[arg(long, env = "CASEFILE_MAX_QUERY_BYTES", default_value_t = DEFAULT_MAX_QUERY_BYTES)]
    pub max_query_bytes: usize,

    /// Most tokens (names, punctuation, values) in a query text; checked before it is parsed.
    #[arg(long, env = "CASEFILE_MAX_QUERY_TOKENS", default_value_t = DEFAULT_MAX_QUERY_TOKENS)]
    pub max_query_tokens: usize,

    /// Deepest nesting of braces, brackets and parentheses in a query text; checked before it
    /// is parsed.
    #[arg(long, env = "CASEFILE_MAX_QUERY_NESTING", default_value_t = DEFAULT_MAX_QUERY_NESTING)]
    pub max_query_nesting: usize,

    /// Most selections a document expands to: every field, fragment spread and inline fragment,
    /// with its arguments' values and directives, counted as often as fragment spreads repeat
    /// it. Measured without expanding anything, before validation.
    #[arg(long, env = "CASEFILE_MAX_SELECTIONS", default_value_t = DEFAULT_MAX_SELECTIONS)]
    pub max_selections: usize,

    /// Deepest accepted query nesting.
    #[arg(long, env = "CASEFILE_MAX_QUERY_DEPTH", default_value_t = DEFAULT_MAX_QUERY_DEPTH)]
    pub max_query_depth: usize,

    /// Highest accepted cost of one request, summed over the operations of a batch (a field of
    /// a row costs 1; a page of N multiplies its selection by N, an unpaginated list by a
    /// realistic bound on its length; counts and roll-ups cost what their SQL does).
    #[arg(long, env = "CASEFILE_MAX_QUERY_COMPLEXITY", default_value_t = DEFAULT_MAX_QUERY_COMPLEXITY)]
    pub max_query_complexity: usize,

    /// Most operations in one JSON batch.
    #[arg(long, env = "CASEFILE_MAX_BATCH_OPERATIONS", default_value_t = DEFAULT_MAX_BATCH_OPERATIONS)]
    pub max_batch_operations: usize,

    /// Most aliased fields in one document.
    #[arg(long, env = "CASEFILE_MAX_ALIASES", default_value_t = DEFAULT_MAX_ALIASES)]
    pub max_aliases: usize,

    /// Most root fields in one operation.
    #[arg(long, env = "CASEFILE_MAX_ROOT_FIELDS", default_value_t = DEFAULT_MAX_ROOT_FIELDS)]
    pub max_root_fields: usize,

    /// Largest response of a query or mutation, in bytes of JSON (about); a larger one is
    /// refused with RESPONSE_TOO_LARGE as soon as it is known, instead of being built whole.
    #[arg(long, env = "CASEFILE_MAX_RESPONSE_BYTES", default_value_t = DEFAULT_MAX_RESPONSE_BYTES)]
    pub max_response_bytes: usize,

    /// Largest page (`first`) any connection accepts.
    #[arg(long, env = "CASEFILE_MAX_PAGE_SIZE", default_value_t = DEFAULT_MAX_PAGE_SIZE)]
    pub max_page_size: usize,
}

impl Default for Limits {
    fn default() -> Self {
        crate::options::defaults()
    }
}

/// How the notification outbox retries: the backoff after a failed attempt and the attempts a
/// notification gets when its writer names none.
#[derive(Debug, Clone, Copy, Args)]
pub struct NotificationOptions {
    /// The wait after a notification's first failed attempt, in seconds; it doubles with each
    /// further one, up to `--notification-backoff-max-secs`.
    #[arg(
        long,
        env = "CASEFILE_NOTIFICATION_BACKOFF_BASE_SECS",
        default_value_t = notifications::BACKOFF_BASE_SECONDS,
        value_parser = clap::value_parser!(i32).range(1..=86_400)
    )]
    pub notification_backoff_base_secs: i32,

    /// The longest wait between a notification's attempts, in seconds (below the base, every
    /// wait is this long).
    #[arg(
        long,
        env = "CASEFILE_NOTIFICATION_BACKOFF_MAX_SECS",
        default_value_t = notifications::BACKOFF_CAP_SECONDS,
        value_parser = clap::value_parser!(i32).range(1..=604_800)
    )]
    pub notification_backoff_max_secs: i32,

    /// Attempts a notification gets when its writer gives no `maxAttempts` (1–100).
    #[arg(
        long,
        env = "CASEFILE_NOTIFICATION_MAX_ATTEMPTS",
        default_value_t = notifications::DEFAULT_MAX_ATTEMPTS,
        value_parser = clap::value_parser!(i32).range(1..=notifications::MAX_ATTEMPTS as i64)
    )]
    pub notification_max_attempts: i32,
}

impl Default for NotificationOptions {
    fn default() -> Self {
        crate::options::defaults()
    }
}

impl NotificationOptions {
    /// The backoff, as the store applies it.
    pub fn backoff(&self) -> notifications::Backoff {
        notifications::Backoff {
            base_seconds: self.notification_backoff_base_secs,
            max_seconds: self.notification_backoff_max_secs,
        }
    }
}
