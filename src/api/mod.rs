//! The GraphQL API: schema, types, loaders and pagination.

pub mod cost;
pub mod guards;
pub mod ids;
pub mod loaders;
mod mutation;
pub mod pagination;
mod query;
pub mod scalars;
mod subscription;
pub mod types;

use std::sync::Arc;

use async_graphql::{Schema, SchemaBuilder};

use crate::config::Limits;
use crate::extensions::{Batching, ErrorCodes, RequestLimits};
use crate::store::Store;
pub use loaders::Loaders;
pub use mutation::Mutation;
pub use query::Query;
pub use subscription::Subscription;

use crate::auth::Authenticator;
use crate::live::{Hub, SubscriptionSlots};

pub type CasefileSchema = Schema<Query, Mutation, Subscription>;

fn builder() -> SchemaBuilder<Query, Mutation, Subscription> {
    Schema::build(Query, Mutation, Subscription).extension(ErrorCodes)
}

/// The schema served, with its limits. Each request must also get the caller's
/// [`crate::auth::Identity`]; its loaders come from the [`Batching`] extension.
pub fn build_schema(
    store: Store,
    hub: Arc<Hub>,
    auth: Arc<Authenticator>,
    slots: Arc<SubscriptionSlots>,
    limits: Limits,
) -> CasefileSchema {
    builder()
        .data(store.clone())
        .data(hub)
        .data(auth)
        .data(slots)
        .data(limits)
        // Inside ErrorCodes, so the limits' own codes are kept.
        .extension(RequestLimits(limits))
        .extension(Batching(store))
        .finish()
}

/// The SDL of the served schema (what `schema.graphql` holds).
pub fn sdl() -> String {
    builder().finish().sdl()
}
