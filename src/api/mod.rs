//! The GraphQL API: schema, types, loaders and pagination.

pub mod ids;
pub mod loaders;
mod mutation;
pub mod pagination;
mod query;
pub mod types;

use async_graphql::{EmptySubscription, Schema, SchemaBuilder};

use crate::config::Limits;
use crate::extensions::ErrorCodes;
use crate::store::Store;
pub use loaders::Loaders;
pub use mutation::Mutation;
pub use query::Query;

pub type CasefileSchema = Schema<Query, Mutation, EmptySubscription>;

fn builder() -> SchemaBuilder<Query, Mutation, EmptySubscription> {
    Schema::build(Query, Mutation, EmptySubscription).extension(ErrorCodes)
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
