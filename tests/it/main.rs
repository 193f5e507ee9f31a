//! Integration tests: the real server on a fresh database, spoken to over HTTP.

mod access;
mod bad_input;
mod common;
mod connections;
mod db_timeouts;
mod deadlocks;
mod demo;
mod embedded_db;
mod events;
mod faults;
mod graphiql;
mod hardening;
mod http;
mod input_limits;
mod integrity;
mod lifecycle;
mod limits;
mod live;
mod live_hub;
mod operations;
mod pagination;
mod query_api;
mod schema_file;
mod telemetry;
mod token_cli;
mod websocket;
pub mod write_api;
