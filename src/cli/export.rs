//! `casefile export`: sessions as JSON documents ([`crate::store::export`]), on the database
//! directly. One session (`--session ID`): its document. Many (`--since`, `--until`,
//! `--filter`): one document per line (NDJSON), oldest first, listed in keyset batches, each
//! read in a snapshot of its own, so a run of any length holds one row and a few chunks.
//!
//! Resumable: into `--output FILE`, a run continues after the last whole line the file holds
//! (a line cut off by the interruption is dropped first); to standard output, `--after ID`
//! continues after the session the run reported last.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use chrono::{DateTime, TimeDelta, Utc};
use clap::Args;
use tokio::fs::OpenOptions;
use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _, AsyncWrite, AsyncWriteExt as _};
use uuid::Uuid;

use super::database::with_database;
use crate::db::DatabaseArgs;
use crate::retention::{Cutoff, parse_cutoff};
use crate::store::export::{DocumentWriter, write_chunks};
use crate::store::page::Slice;
use crate::store::sessions::{SessionFilter, SessionKey, SessionSort, SortValue};
use crate::store::{SessionRow, Store};

/// Sessions listed per statement.
const BATCH: i64 = 100;

/// What `casefile export` writes.
#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    /// One session, by id: its document alone.
    #[arg(long, conflicts_with_all = ["since", "until", "filter", "after"])]
    pub session: Option<Uuid>,

    /// Sessions created at or after this: an instant (`2026-11-01T00:00:00Z`) or an age
    /// (`30d`).
    #[arg(long, value_parser = parse_cutoff)]
    pub since: Option<Cutoff>,

    /// Sessions created before this: an instant or an age.
    #[arg(long, value_parser = parse_cutoff)]
    pub until: Option<Cutoff>,

    /// Only the sessions this filter matches: the `sessions` list's `filter` argument, as JSON
    /// (`{"status": ["COMPLETED"], "alertType": "PodCrashLooping"}`). Deleted sessions are
    /// left out unless it says `"includeDeleted": true`.
    #[arg(long)]
    pub filter: Option<String>,

    /// Continue after this session (the last one an interrupted run reported).
    #[arg(long)]
    pub after: Option<Uuid>,

    /// Where to write (default: standard output). Many sessions continue an existing file after
    /// its last whole line; one session's document replaces it.
    #[arg(long)]
    pub output: Option<PathBuf>,

    #[command(flatten)]
    pub database: DatabaseArgs,
}

pub async fn run(args: &ExportArgs) -> anyhow::Result<()> {
    with_database(&args.database, |store| async move {
        run_on_database(&store, args).await
    })
    .await
}

/// Writes what `args` selects from `store`'s database.
pub async fn run_on_database(store: &Store, args: &ExportArgs) -> anyhow::Result<()> {
    // One session's document replaces the file; many continue it.
    let mut output = Output::open(args.output.as_deref(), args.session.is_none()).await?;
    match args.session {
        Some(session) => one(store, session, &mut output).await?,
        None => {
            let after = args.after.or(output.resume_after);
            many(store, &selection(args)?, after, &mut output).await?;
        }
    }
    output.sink.shutdown().await?;
    Ok(())
}

/// The sessions `args` selects.
fn selection(args: &ExportArgs) -> anyhow::Result<SessionFilter> {
    let mut filter = match &args.filter {
        Some(json) => crate::api::session_filter_from_json(json)
            .map_err(|err| anyhow::anyhow!("--filter: {err}"))?,
        None => SessionFilter::default(),
    };
    let now = Utc::now();
    // The filter's bounds are strict; timestamps are kept to the microsecond, so one
    // microsecond earlier makes `--since` inclusive: consecutive runs neither miss nor repeat.
    if let Some(since) = args.since {
        let since = since.instant(now) - TimeDelta::microseconds(1);
        filter.created_after = Some(filter.created_after.map_or(since, |f| f.max(since)));
    }
    if let Some(until) = args.until {
        let until = until.instant(now);
        filter.created_before = Some(filter.created_before.map_or(until, |f| f.min(until)));
    }
    Ok(filter)
}

/// Where the documents go, and where an earlier run into it stopped.
struct Output {
    sink: Box<dyn AsyncWrite + Unpin + Send>,
    resume_after: Option<Uuid>,
}

impl Output {
    /// Standard output, or the file at `path`: continued after its last whole line when
    /// `resume`, else written anew.
    async fn open(path: Option<&Path>, resume: bool) -> anyhow::Result<Output> {
        let Some(path) = path else {
            return Ok(Output {
                sink: Box::new(tokio::io::stdout()),
                resume_after: None,
            });
        };
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .write(true)
            .truncate(!resume)
            .open(path)
            .await
            .with_context(|| format!("cannot open {}", path.display()))?;
        let resume_after = match resume {
            true => resume_point(&mut file)
                .await
                .with_context(|| format!("cannot read where {} stopped", path.display()))?,
            false => None,
        };
        file.seek(std::io::SeekFrom::End(0)).await?;
        Ok(Output {
            sink: Box::new(file),
            resume_after,
        })
    }
}

/// Drops a last line the interruption cut off, and returns the session of the last whole one.
async fn resume_point(file: &mut tokio::fs::File) -> anyhow::Result<Option<Uuid>> {
    let length = file.metadata().await?.len();
    // The end of the last whole line is just after the last newline.
    let whole = after_last_newline(file, length).await?.unwrap_or(0);
    if whole < length {
        file.set_len(whole).await?;
    }
    if whole == 0 {
        return Ok(None);
    }
    // That line starts after the newline before its own, and names its session near its start.
    let line_start = after_last_newline(file, whole - 1).await?.unwrap_or(0);
    let mut head = vec![0u8; 512];
    file.seek(std::io::SeekFrom::Start(line_start)).await?;
    let read = file.read(&mut head).await?;
    let head = String::from_utf8_lossy(&head[..read]);
    let marker = "\"session\":{\"id\":\"";
    let id = head
        .find(marker)
        .and_then(|at| head.get(at + marker.len()..at + marker.len() + 36))
        .and_then(|id| Uuid::parse_str(id).ok())
        .ok_or_else(|| anyhow::anyhow!("its last line is not a casefile session document"))?;
    Ok(Some(id))
}

/// The position just after the last newline before `end`, looked for backwards a block at a time
/// (a line can be many megabytes).
async fn after_last_newline(
    file: &mut tokio::fs::File,
    mut end: u64,
) -> std::io::Result<Option<u64>> {
    let mut block = vec![0u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(block.len() as u64);
        let size = (end - start) as usize;
        file.seek(std::io::SeekFrom::Start(start)).await?;
        file.read_exact(&mut block[..size]).await?;
        if let Some(at) = block[..size].iter().rposition(|&b| b == b'\n') {
            return Ok(Some(start + at as u64 + 1));
        }
        end = start;
    }
    Ok(None)
}

/// One session's document.
async fn one(store: &Store, session: Uuid, output: &mut Output) -> anyhow::Result<()> {
    let (written, mut chunks) = DocumentWriter::spawn_session(store, session);
    write_chunks(&mut chunks, &mut output.sink).await?;
    written.await??;
    Ok(())
}

/// Every session `filter` matches after `after`, oldest first, one document a line.
async fn many(
    store: &Store,
    filter: &SessionFilter,
    after: Option<Uuid>,
    output: &mut Output,
) -> anyhow::Result<()> {
    let after = match after {
        Some(id) => Some(created_at(store, id).await?),
        None => None,
    };
    let (mut writer, mut chunks) = DocumentWriter::new();
    let (store, filter) = (store.clone(), filter.clone());
    let written = tokio::spawn(async move {
        let mut cursor = after;
        let mut exported = 0u64;
        loop {
            let slice = Slice {
                after: cursor.clone(),
                before: None,
                size: BATCH,
                from_end: false,
            };
            let page = store
                .list_sessions(&filter, SessionSort::CreatedAt, false, &slice)
                .await?;
            for listed in &page.rows {
                writer.session(&store, listed.session.id).await?;
                exported += 1;
            }
            if let Some(last) = page.rows.last() {
                cursor = Some(SessionSort::CreatedAt.key_of(last));
                eprintln!(
                    "casefile export: {exported} sessions written; the last: {} (resume with \
                     --after {})",
                    last.session.id, last.session.id
                );
            }
            if !page.has_next {
                return Ok::<_, crate::error::Error>(exported);
            }
        }
    });
    write_chunks(&mut chunks, &mut output.sink).await?;
    let exported = written.await??;
    eprintln!("casefile export: done, {exported} sessions");
    Ok(())
}

/// Where session `id` lies in the order of the export.
async fn created_at(store: &Store, id: Uuid) -> anyhow::Result<SessionKey> {
    let rows: Vec<SessionRow> = store.by_ids(&[id]).await?;
    let row = rows.first().ok_or_else(|| {
        anyhow::anyhow!(
            "session {id}, where the export stopped, no longer exists: give --after with the \
             session before it"
        )
    })?;
    let at: DateTime<Utc> = row.created_at;
    Ok(SessionKey {
        value: SortValue::Time(at),
        id,
    })
}
