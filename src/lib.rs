//! casefile: a GraphQL API server that stores and serves the records of AI-agent investigation
//! sessions.
//!
//! Layers, from the edge inwards: [`http`] (axum: GraphQL over HTTP, GraphiQL, probes) →
//! [`api`] (async-graphql types, batched loaders, pagination) → [`store`] (SQL) → [`db`]
//! (a pool on external or embedded PostgreSQL). The commands that run them are in [`cli`]; each
//! module's options live in that module (see [`options`]).

pub mod api;
pub mod auth;
pub mod cli;
pub mod cursor;
pub mod db;
pub mod demo;
pub mod distribution;
pub mod error;
pub mod fair;
pub mod http;
pub mod live;
pub mod model;
pub mod observe;
pub mod options;
pub mod pricing;
pub mod retention;
pub mod server;
pub mod store;
