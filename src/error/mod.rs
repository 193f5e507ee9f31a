//! The one error type of casefile and its mapping to GraphQL error codes.
//!
//! Resolvers and the store return [`Error`] and use `?` freely; async-graphql keeps the original
//! value as the error's `source`, and [`crate::api::runner::codes`] maps it once, at the edge,
//! to `extensions.code` and a public message. Internal failures are logged there, never leaked;
//! the database's refusals of a client's values are the client's errors, said in words
//! ([`refusals`]), and what a database failure means is read once from its SQLSTATE
//! ([`sqlstate`]).

pub mod refusals;
pub mod sqlstate;

use refusals::Refused;
use sqlstate::DbFailure;

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
    /// The process (or the connection) holds as many subscriptions as it may.
    #[error("{0}")]
    TooManySubscriptions(String),
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

    /// What the client sees of this error, and how loudly it is logged. A database error that
    /// refuses the client's values (SQLSTATE classes 22 and 23, see [`refusals`]) is the
    /// client's: said in words, logged as a warning.
    pub fn public(&self) -> Public {
        let (code, log) = match self {
            Self::NotFound(_) => ("NOT_FOUND", Log::No),
            Self::BadUserInput(_) => ("BAD_USER_INPUT", Log::No),
            Self::Conflict(_) => ("CONFLICT", Log::No),
            Self::Unauthenticated(_) => ("UNAUTHENTICATED", Log::No),
            Self::Forbidden(_) => ("FORBIDDEN", Log::No),
            Self::SubscriberTooSlow(_) => ("SUBSCRIBER_TOO_SLOW", Log::No),
            Self::TooManySubscriptions(_) => ("TOO_MANY_SUBSCRIPTIONS", Log::No),
            Self::Database(err) => {
                if let Some(refusal) = refusals::of(err) {
                    let code = match refusal.kind {
                        Refused::BadInput => "BAD_USER_INPUT",
                        Refused::Conflict => "CONFLICT",
                        Refused::Timeout => "TIMEOUT",
                        Refused::Unavailable => "SERVICE_UNAVAILABLE",
                    };
                    return Public {
                        code,
                        message: refusal.message,
                        log: Log::Warn,
                    };
                }
                ("INTERNAL_SERVER_ERROR", Log::Error)
            }
            Self::Internal(_) => ("INTERNAL_SERVER_ERROR", Log::Error),
        };
        let message = match log {
            Log::Error => "internal server error".to_owned(),
            _ => self.to_string(),
        };
        Public { code, message, log }
    }

    /// What the database failure behind this error means, if it is one.
    pub fn db_failure(&self) -> Option<DbFailure> {
        match self {
            Self::Database(err) => DbFailure::of(err),
            _ => None,
        }
    }

    /// Whether PostgreSQL aborted the transaction to resolve a collision with concurrent ones (a
    /// deadlock or a serialization failure): running it again can succeed.
    pub fn is_transient(&self) -> bool {
        self.db_failure() == Some(DbFailure::Collision)
    }
}

/// An error as the client sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Public {
    /// `extensions.code`.
    pub code: &'static str,
    pub message: String,
    pub log: Log,
}

/// How an error is logged (with its details, which the client never sees).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Log {
    /// The client's mistake, told to it in full.
    No,
    /// The client's mistake that only the database caught.
    Warn,
    /// Our fault.
    Error,
}
