//! The retention options: the server's schedule (`--retention-…`) and how every purge paces its
//! batches (`--purge-batch-…`, for the schedule and `casefile purge` alike).

use clap::Args;

use crate::options::parse_period;

/// What the server deletes on its own schedule: `casefile purge`'s policy (the only way to run
/// it on the embedded database while it serves). Every replica runs it; a batch skips what
/// another holds, so replicas share the work rather than repeat it.
#[derive(Debug, Clone, Args)]
pub struct RetentionOptions {
    /// Hard-delete sessions soft-deleted longer ago than this (e.g. `30d`). Unset: kept.
    #[arg(
        long = "retention-deleted-before",
        env = "CASEFILE_RETENTION_DELETED_BEFORE",
        value_parser = parse_period
    )]
    pub deleted_before: Option<chrono::Duration>,

    /// Hard-delete sessions that finished longer ago than this, and whose chats have been quiet
    /// as long (e.g. `365d`). Unset: kept.
    #[arg(
        long = "retention-finished-before",
        env = "CASEFILE_RETENTION_FINISHED_BEFORE",
        value_parser = parse_period
    )]
    pub finished_before: Option<chrono::Duration>,

    /// Forget idempotency receipts older than this: a retry of a create whose receipt is gone
    /// gets CONFLICT instead of the record.
    #[arg(
        long = "retention-receipts-before",
        env = "CASEFILE_RETENTION_RECEIPTS_BEFORE",
        default_value = "7d",
        value_parser = parse_period
    )]
    pub receipts_before: chrono::Duration,

    /// Forget audit records older than this (e.g. `400d`), in both the session's and the
    /// others' trail; each purge that forgets any is itself recorded in the trail. Unset: kept.
    #[arg(
        long = "retention-audit-before",
        env = "CASEFILE_RETENTION_AUDIT_BEFORE",
        value_parser = parse_period
    )]
    pub audit_before: Option<chrono::Duration>,

    /// Drop live changes older than this from the shared change log even when a process has not
    /// read them (one that lags so far resumes its subscribers from the data).
    #[arg(
        long = "retention-change-log",
        env = "CASEFILE_RETENTION_CHANGE_LOG",
        default_value = "1h",
        value_parser = parse_period
    )]
    pub change_log: chrono::Duration,

    /// How often the schedule runs (its first run is one interval after start).
    #[arg(
        long = "retention-interval",
        env = "CASEFILE_RETENTION_INTERVAL",
        default_value = "1h",
        value_parser = parse_period
    )]
    pub interval: chrono::Duration,

    /// Archive each session before the schedule deletes it: its export (`casefile export`'s
    /// document), one `<session id>.json` per session in this directory; a session whose
    /// archive cannot be written is not deleted. Unset: no archive.
    #[arg(long = "retention-archive-dir", env = "CASEFILE_RETENTION_ARCHIVE_DIR")]
    pub archive_dir: Option<std::path::PathBuf>,

    #[command(flatten)]
    pub batches: PurgeBatches,
}

impl Default for RetentionOptions {
    fn default() -> Self {
        crate::options::defaults()
    }
}

/// How a purge paces itself: small transactions, with pauses, so it never holds locks (or the
/// embedded database's one connection) for long.
#[derive(Debug, Clone, Copy, Args)]
pub struct PurgeBatches {
    /// Sessions deleted per transaction (each with everything under it).
    #[arg(long = "purge-batch-size", env = "CASEFILE_PURGE_BATCH_SIZE", default_value_t = 50,
          value_parser = clap::value_parser!(i64).range(1..=10_000))]
    pub size: i64,

    /// Milliseconds to wait between batches.
    #[arg(
        long = "purge-batch-pause-ms",
        env = "CASEFILE_PURGE_BATCH_PAUSE_MS",
        default_value_t = 50
    )]
    pub pause_ms: u64,
}

impl Default for PurgeBatches {
    fn default() -> Self {
        crate::options::defaults()
    }
}
