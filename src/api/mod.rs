//! The GraphQL API: schema, types, loaders and pagination.

pub mod cost;
pub mod guards;
pub mod ids;
pub mod loaders;
mod mutation;
pub mod pagination;
mod query;
pub mod runner;
pub mod scalars;
mod subscription;
pub mod types;

use std::sync::Arc;

use async_graphql::{Schema, SchemaBuilder};

use crate::config::Limits;
use crate::store::Store;
pub use loaders::Loaders;
pub use mutation::Mutation;
pub use query::Query;
pub use runner::Runner;
pub use subscription::Subscription;

use crate::auth::Authenticator;
use crate::live::{Hub, SubscriptionSlots};

pub type CasefileSchema = Schema<Query, Mutation, Subscription>;

fn builder() -> SchemaBuilder<Query, Mutation, Subscription> {
    Schema::build(Query, Mutation, Subscription)
}

/// What the schema is served with, with its limits. Each request must also get the caller's
/// [`crate::auth::Identity`]; its loaders come from the [`Runner`].
pub fn build_runner(
    store: Store,
    hub: Arc<Hub>,
    auth: Arc<Authenticator>,
    slots: Arc<SubscriptionSlots>,
    limits: Limits,
) -> Runner {
    let build = || {
        builder()
            .data(store.clone())
            .data(hub.clone())
            .data(auth.clone())
            .data(slots.clone())
            .data(limits)
    };
    Runner::new(build, store.clone(), limits)
}

/// The SDL of the served schema (what `schema.graphql` holds).
pub fn sdl() -> String {
    builder().finish().sdl()
}
