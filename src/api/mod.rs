//! The GraphQL API: schema, types, loaders and pagination.

mod compiled;
pub mod cost;
pub mod guards;
pub mod ids;
pub mod loaders;
mod mutation;
mod options;
pub mod pagination;
mod query;
pub mod runner;
pub mod scalars;
mod subscription;
pub mod types;

use std::sync::Arc;

use async_graphql::{SDLExportOptions, Schema, SchemaBuilder};

use crate::store::Store;
pub use loaders::Loaders;
pub use mutation::Mutation;
pub use options::{Limits, NotificationOptions};
pub use query::{Query, session_filter_from_json};
pub use runner::Runner;
pub use subscription::Subscription;

use crate::auth::Authenticator;
use crate::live::{Hub, SubscriptionSlots};

pub type CasefileSchema = Schema<Query, Mutation, Subscription>;

/// What `DateTime` means here (async-graphql's own description is written for Rust readers).
const DATE_TIME: &str = "A point in time, as an RFC 3339 string with its offset \
    (`2026-11-23T07:05:39.123+00:00`). casefile answers in UTC, with the precision it stored \
    (microseconds at most); it accepts any offset.";
/// What `UUID` means here.
const UUID: &str = "A UUID in its hyphenated form (`0193a8c2-5b7e-7d31-9f0a-2c4e6b8d1f3a`); \
    casefile makes time-ordered version 7 UUIDs, and accepts any version.";

/// What `Decimal` means here: money, exact.
const DECIMAL: &str = "An exact decimal number, as a string (`\"0.0125\"`): amounts of US \
    dollars (costs to 10 decimal places, prices per million tokens), never rounded through a \
    binary float. casefile answers without trailing zeros. It accepts a string (exact), or a \
    number, read without the noise of its binary float (0.1 is 0.1).";

pub(crate) fn builder() -> SchemaBuilder<Query, Mutation, Subscription> {
    Schema::build(Query, Mutation, Subscription)
        .override_output_type_description::<rust_decimal::Decimal>(DECIMAL)
        .override_input_type_description::<rust_decimal::Decimal>(DECIMAL)
        .override_output_type_description::<chrono::DateTime<chrono::Utc>>(DATE_TIME)
        .override_input_type_description::<chrono::DateTime<chrono::Utc>>(DATE_TIME)
        .override_output_type_description::<uuid::Uuid>(UUID)
        .override_input_type_description::<uuid::Uuid>(UUID)
}

/// The origin browsers reach this server at, when configured (`--public-origin`): where the
/// URLs casefile hands out point. Unset: `http://` and the host each request was sent to.
#[derive(Clone, Default)]
pub struct PublicOrigin(pub Option<Arc<str>>);

/// What the schema is served with, with its limits. Each request must also get the caller's
/// [`crate::auth::Identity`]; its loaders come from the [`Runner`].
pub fn build_runner(
    store: Store,
    hub: Arc<Hub>,
    auth: Arc<Authenticator>,
    slots: Arc<SubscriptionSlots>,
    limits: Limits,
    notifications: NotificationOptions,
    public_origin: PublicOrigin,
) -> Runner {
    let build = || {
        builder()
            .data(store.clone())
            .data(hub.clone())
            .data(auth.clone())
            .data(slots.clone())
            .data(limits)
            .data(notifications)
            .data(public_origin.clone())
    };
    Runner::new(build, store.clone(), limits)
}

/// The SDL of the served schema (what `schema.graphql` holds), with each scalar's
/// `@specifiedBy` as introspection reports it.
pub fn sdl() -> String {
    builder()
        .finish()
        .sdl_with_options(SDLExportOptions::new().include_specified_by())
}
