//! async-graphql extensions applied to every request.

mod error_codes;

pub use error_codes::ErrorCodes;
