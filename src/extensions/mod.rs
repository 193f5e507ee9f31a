//! async-graphql extensions applied to every request.

mod error_codes;
pub mod limits;

pub use error_codes::ErrorCodes;
pub use limits::{CostBudget, RequestLimits};
