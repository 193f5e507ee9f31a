//! The GraphQL API: schema, types, loaders and pagination.

pub mod ids;
pub mod loaders;
pub mod pagination;
mod query;
pub mod types;

use async_graphql::{EmptyMutation, EmptySubscription, Schema, SchemaBuilder};

use crate::config::Limits;
use crate::extensions::ErrorCodes;
use crate::store::Store;
pub use loaders::Loaders;
pub use query::Query;

pub type CasefileSchema = Schema<Query, EmptyMutation, EmptySubscription>;

fn builder() -> SchemaBuilder<Query, EmptyMutation, EmptySubscription> {
    Schema::build(Query, EmptyMutation, EmptySubscription).extension(ErrorCodes)
}

/// The schema served, with its limits. Each request must also get fresh [`Loaders`].
pub fn build_schema(store: Store, limits: Limits) -> CasefileSchema {
    builder()
        .data(store)
        .data(limits)
        .limit_depth(limits.max_query_depth)
        .limit_complexity(limits.max_query_complexity)
        .finish()
}

/// The SDL of the served schema (what `schema.graphql` holds).
pub fn sdl() -> String {
    builder().finish().sdl()
}
