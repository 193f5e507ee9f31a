//! Integration tests: the real server on a fresh database, spoken to over HTTP.

mod access;
mod bad_input;
mod common;
mod deadlocks;
mod demo;
mod http;
mod integrity;
mod lifecycle;
mod live;
mod live_hub;
mod query_api;
mod schema_file;
mod token_cli;
mod websocket;
pub mod write_api;
