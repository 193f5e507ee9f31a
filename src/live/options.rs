//! The live options: bounds on subscriptions and streams (flags), and how the hub bounds each
//! subscriber's queue and shares the change log with other processes (set by the server from
//! its flags).

use std::time::Duration;

use clap::Args;

use crate::options::parse_seconds;

/// Bounds on live streams.
#[derive(Debug, Clone, Copy, Args)]
pub struct LiveOptions {
    /// Subscriptions one WebSocket connection may run at once (past it, that subscription gets
    /// an error; the connection stays).
    #[arg(
        long,
        env = "CASEFILE_MAX_SUBSCRIPTIONS_PER_CONNECTION",
        default_value_t = 100
    )]
    pub max_subscriptions_per_connection: usize,

    /// Subscriptions the process holds open at once, over every transport.
    #[arg(long, env = "CASEFILE_MAX_SUBSCRIPTIONS", default_value_t = 20_000)]
    pub max_subscriptions: usize,

    /// Subscriptions one identity (token, proxy user, or client address without
    /// authentication) may hold open at once, over every transport, so that no caller takes
    /// what everyone shares. Default: a tenth of --max-subscriptions (2,000 with its default).
    #[arg(
        long,
        env = "CASEFILE_MAX_SUBSCRIPTIONS_PER_IDENTITY",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..)
    )]
    pub max_subscriptions_per_identity: Option<usize>,

    /// WebSocket connections one identity may have open at once. Past it, the upgrade is
    /// refused with 429 (without authentication), or the connection is closed with 4429 at
    /// `connection_init` (where its identity is known).
    #[arg(
        long,
        env = "CASEFILE_MAX_WEBSOCKETS_PER_IDENTITY",
        default_value_t = 100,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..)
    )]
    pub max_websockets_per_identity: usize,

    /// SSE, multipart and `/sessions/{id}/events` streams one identity may have open at once.
    /// Past it: 429.
    #[arg(
        long,
        env = "CASEFILE_MAX_STREAMS_PER_IDENTITY",
        default_value_t = 100,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..)
    )]
    pub max_streams_per_identity: usize,

    /// Seconds an SSE or multipart stream may go without delivering anything before it is
    /// ended (the client subscribes again with its cursor).
    #[arg(
        long = "stream-idle-secs",
        env = "CASEFILE_STREAM_IDLE_SECS",
        default_value = "1800",
        value_parser = parse_seconds
    )]
    pub stream_idle: Duration,

    /// Seconds an SSE or multipart stream may stay open at all.
    #[arg(
        long = "stream-lifetime-secs",
        env = "CASEFILE_STREAM_LIFETIME_SECS",
        default_value = "21600",
        value_parser = parse_seconds
    )]
    pub stream_lifetime: Duration,
}

impl LiveOptions {
    /// The subscriptions one identity may hold: as set, else a tenth of the process's (at
    /// least one).
    pub fn subscriptions_per_identity(&self) -> usize {
        self.max_subscriptions_per_identity
            .unwrap_or((self.max_subscriptions / 10).max(1))
    }
}

/// Approximate bytes of changes one subscriber may have pending.
const SUBSCRIBER_BYTE_BUDGET: usize = 64 * 1024 * 1024;

/// How the hub bounds subscribers, and how it shares the log with other processes.
#[derive(Debug, Clone)]
pub struct HubOptions {
    /// How many changes a subscriber may have pending before it is told to resume.
    pub buffer: usize,
    /// How many bytes (approximately) a subscriber may have pending.
    pub byte_budget: usize,
    /// A reader not heard from for this long no longer holds the log back.
    pub reader_timeout: Duration,
    /// Changes older than this are pruned even when a reader has not read them.
    pub max_age: Duration,
    /// How often this process records its position.
    pub heartbeat_every: Duration,
    /// How often this process prunes the log.
    pub prune_every: Duration,
}

impl HubOptions {
    /// Room for `buffer` changes a subscriber; the rest as the server has it by default.
    pub fn with_buffer(buffer: usize) -> HubOptions {
        HubOptions {
            buffer,
            byte_budget: SUBSCRIBER_BYTE_BUDGET,
            reader_timeout: Duration::from_secs(300),
            max_age: Duration::from_secs(3600),
            heartbeat_every: Duration::from_secs(5),
            prune_every: Duration::from_secs(60),
        }
    }
}
