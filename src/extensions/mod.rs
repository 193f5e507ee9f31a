//! async-graphql extensions applied to every request.

mod batching;
mod error_codes;
pub mod limits;

pub use batching::Batching;
pub use error_codes::ErrorCodes;
pub use limits::{CostBudget, RequestLimits};
