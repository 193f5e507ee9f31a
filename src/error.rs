//! The one error type of casefile and its mapping to GraphQL error codes.
//!
//! Resolvers and the store return [`Error`] and use `?` freely; async-graphql keeps the original
//! value as the error's `source`, and [`crate::extensions::ErrorCodes`] maps it once, at the edge,
//! to `extensions.code` and a public message. Internal failures are logged there, never leaked.

/// What went wrong, in terms a client can act on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The addressed record does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The request is malformed or a value is out of range.
    #[error("{0}")]
    BadUserInput(String),
    /// The request is valid but conflicts with the current state.
    #[error("{0}")]
    Conflict(String),
    /// No usable credentials.
    #[error("{0}")]
    Unauthenticated(String),
    /// Authenticated, but the caller's role does not allow this.
    #[error("{0}")]
    Forbidden(String),
    /// A subscriber fell too far behind the live stream; it resumes from its cursor.
    #[error("{0}")]
    SubscriberTooSlow(String),
    /// The database failed; details are logged, not shown.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// Anything else unexpected; details are logged, not shown.
    #[error("internal error: {0}")]
    Internal(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn bad_input(message: impl Into<String>) -> Self {
        Self::BadUserInput(message.into())
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::NotFound(message.into())
    }

    /// The `extensions.code` clients see.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotFound(_) => "NOT_FOUND",
            Self::BadUserInput(_) => "BAD_USER_INPUT",
            Self::Conflict(_) => "CONFLICT",
            Self::Unauthenticated(_) => "UNAUTHENTICATED",
            Self::Forbidden(_) => "FORBIDDEN",
            Self::SubscriberTooSlow(_) => "SUBSCRIBER_TOO_SLOW",
            Self::Database(_) | Self::Internal(_) => "INTERNAL_SERVER_ERROR",
        }
    }

    /// Whether PostgreSQL aborted the transaction to resolve a collision with concurrent ones (a
    /// deadlock, SQLSTATE 40P01, or a serialization failure, 40001): running it again can
    /// succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Database(sqlx::Error::Database(db)) => {
                matches!(db.code().as_deref(), Some("40P01" | "40001"))
            }
            _ => false,
        }
    }

    /// Whether this is our fault (logged, message hidden) rather than the client's.
    pub fn is_internal(&self) -> bool {
        matches!(self, Self::Database(_) | Self::Internal(_))
    }

    /// The message clients see.
    pub fn public_message(&self) -> String {
        if self.is_internal() {
            "internal server error".to_owned()
        } else {
            self.to_string()
        }
    }
}
