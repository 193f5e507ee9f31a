//! Archive before purge (seed 000 Q12's third option, "move to separate archive"): a purge
//! given an archive writes each session's export there first, outside its batch's locks, and
//! deletes only what was written, unchanged since. The archive is a directory (one
//! `<session id>.json` per session, written whole before it is named, so a file there is
//! always complete) or standard output (one document a line).

use std::path::PathBuf;

use bytes::Bytes;
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::store::Store;
use crate::store::export::{DocumentWriter, Exported, write_chunks};

/// Where a purge archives what it deletes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Archive {
    /// One file per session in this directory.
    Directory(PathBuf),
    /// One document a line on standard output.
    StandardOutput,
}

impl Archive {
    /// `-` for standard output, else a directory (created if missing).
    pub fn parse(text: &str) -> std::result::Result<Archive, String> {
        match text.trim() {
            "" => Err("give a directory, or - for standard output".to_owned()),
            "-" => Ok(Archive::StandardOutput),
            dir => Ok(Archive::Directory(PathBuf::from(dir))),
        }
    }

    /// Writes `session`'s export, and says where the session stood when it was read. A failure
    /// (the session's read, the disk) is an error: the purge stops and deletes nothing of it.
    pub async fn write(&self, store: &Store, session: Uuid) -> Result<Exported> {
        let (reading, chunks) = DocumentWriter::spawn_session(store, session);
        // `chunks` goes with the write: a failed one drops it, which stops the export.
        let written = self.take(session, chunks).await;
        // The reader stopped early on a write failure: the export's own error says less.
        let exported = reading
            .await
            .map_err(|err| Error::Internal(format!("the export of {session} panicked: {err}")))?;
        written?;
        exported
    }

    /// Writes the chunks of `session`'s document where the archive keeps it.
    async fn take(&self, session: Uuid, mut chunks: mpsc::Receiver<Bytes>) -> Result<()> {
        match self {
            Archive::Directory(dir) => {
                let file = dir.join(format!("{session}.json"));
                let partial = dir.join(format!(".{session}.json.partial"));
                async {
                    tokio::fs::create_dir_all(dir).await?;
                    let mut out = tokio::fs::File::create(&partial).await?;
                    write_chunks(&mut chunks, &mut out).await?;
                    // On disk before it is named: a crash leaves a partial file, never a
                    // short archive under the session's name.
                    out.sync_all().await?;
                    tokio::fs::rename(&partial, &file).await
                }
                .await
                .map_err(|err| archive_failed(session, &file.display().to_string(), &err))
            }
            Archive::StandardOutput => {
                let mut out = tokio::io::stdout();
                write_chunks(&mut chunks, &mut out)
                    .await
                    .map_err(|err| archive_failed(session, "standard output", &err))
            }
        }
    }
}

fn archive_failed(session: Uuid, place: &str, err: &std::io::Error) -> Error {
    Error::Internal(format!(
        "archiving session {session} to {place} failed, so it was not deleted: {err}"
    ))
}
