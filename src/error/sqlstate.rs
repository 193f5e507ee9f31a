//! What a database failure means, read once from its SQLSTATE (or, when no statement reached
//! the database, from how sqlx failed). Everything that reacts to a kind of failure asks here
//! (the public codes and refusals in words, the write path's id conflicts, the retries of
//! mutations and purge batches), so no code elsewhere compares SQLSTATE strings.

/// A database failure, by what it means for whoever made the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbFailure {
    /// A value its field does not take (class 22, data exceptions).
    BadData(BadData),
    /// A required value is missing (23502).
    Missing,
    /// A value another row already holds (23505 unique, 23P01 exclusion).
    Taken,
    /// A value that breaks another rule of the schema (the rest of class 23: checks, foreign
    /// keys).
    BrokenRule,
    /// The statement ran out of time (57014, `statement_timeout`, or a cancel).
    StatementTimeout,
    /// A lock was not granted in time (55P03, `lock_timeout`).
    LockTimeout,
    /// The transaction sat idle too long (25P03).
    IdleTimeout,
    /// The transaction was aborted to resolve a collision with concurrent ones (40P01 deadlock,
    /// 40001 serialization failure): running it again can succeed.
    Collision,
    /// The database cannot be reached: no connection (class 08, or the pool's own failures), or
    /// the server is shutting down or starting (57P01–57P03).
    Unreachable,
}

/// Which data exception (class 22) a value met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadData {
    /// 22001.
    TooLong,
    /// 22003.
    OutOfRange,
    /// 22007, 22008.
    BadTime,
    /// 22021: a NUL in a text.
    NulInText,
    /// 22P05: a NUL in a JSON value.
    NulInJson,
    /// 22P02.
    BadForm,
    /// 22023: a parameter (a time zone's name, say) the function does not know.
    BadParameter,
    /// Any other data exception.
    Other,
}

impl DbFailure {
    /// What `err` means, when it is one of the failures above.
    pub fn of(err: &sqlx::Error) -> Option<DbFailure> {
        match err {
            sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => {
                Some(DbFailure::Unreachable)
            }
            _ => Self::of_code(&err.as_database_error()?.code()?),
        }
    }

    /// What a SQLSTATE means, when it is one of the failures above.
    pub fn of_code(code: &str) -> Option<DbFailure> {
        Some(match code {
            "23502" => DbFailure::Missing,
            "23505" | "23P01" => DbFailure::Taken,
            c if c.starts_with("23") => DbFailure::BrokenRule,
            c if c.starts_with("22") => DbFailure::BadData(match c {
                "22001" => BadData::TooLong,
                "22003" => BadData::OutOfRange,
                "22007" | "22008" => BadData::BadTime,
                "22021" => BadData::NulInText,
                "22P05" => BadData::NulInJson,
                "22P02" => BadData::BadForm,
                "22023" => BadData::BadParameter,
                _ => BadData::Other,
            }),
            "57014" => DbFailure::StatementTimeout,
            "55P03" => DbFailure::LockTimeout,
            "25P03" => DbFailure::IdleTimeout,
            "40P01" | "40001" => DbFailure::Collision,
            c if c.starts_with("08") || matches!(c, "57P01" | "57P02" | "57P03") => {
                DbFailure::Unreachable
            }
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_read_by_class_and_by_name() {
        assert_eq!(DbFailure::of_code("23503"), Some(DbFailure::BrokenRule));
        assert_eq!(DbFailure::of_code("23P01"), Some(DbFailure::Taken));
        assert_eq!(
            DbFailure::of_code("22P05"),
            Some(DbFailure::BadData(BadData::NulInJson))
        );
        assert_eq!(
            DbFailure::of_code("2200H"),
            Some(DbFailure::BadData(BadData::Other))
        );
        assert_eq!(DbFailure::of_code("08006"), Some(DbFailure::Unreachable));
        assert_eq!(DbFailure::of_code("40001"), Some(DbFailure::Collision));
        assert_eq!(DbFailure::of_code("42P01"), None);
        assert_eq!(
            DbFailure::of(&sqlx::Error::PoolTimedOut),
            Some(DbFailure::Unreachable)
        );
    }
}
