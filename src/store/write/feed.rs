//! The sessions feed's writes (`session_feed`, migrations 0054 and 0124): a transaction that
//! changes a session's status gives the changes it recorded their feed positions itself, as it
//! ends, since the trigger that records them stays within their session (on a distributed
//! database it runs on the session's node, and the feed is not there).
//!
//! A statement that may change a session's status notes the session
//! ([`status_may_have_changed`]); the transaction's runner ([`noting`]) feeds the sessions
//! noted just before it commits, so the feed's lock, which orders every session's changes, is
//! held from there to the commit only (as when the trigger fed them at commit). A write run
//! without a runner (a restore) feeds each session as it is noted.

use std::cell::RefCell;
use std::collections::BTreeSet;

use sqlx::PgConnection;
use uuid::Uuid;

use crate::error::Result;
use crate::store::traced::traced;

/// How casefile begins a transaction: it feeds the status changes it records (without the
/// setting, as for an older binary's, the trigger feeds them).
pub(crate) const BEGIN: &str = "BEGIN; SET LOCAL casefile.feeds_status_changes = 'on'";

tokio::task_local! {
    /// The sessions noted by the transaction [`noting`] runs.
    static NOTED: RefCell<BTreeSet<Uuid>>;
}

/// Runs `write`, a transaction's work, and gives its outcome with the sessions it noted, for
/// [`feed`] before the commit.
pub(crate) async fn noting<T>(write: impl Future<Output = T>) -> (T, Vec<Uuid>) {
    NOTED
        .scope(RefCell::new(BTreeSet::new()), async move {
            let outcome = write.await;
            (
                outcome,
                NOTED.with(|noted| noted.take().into_iter().collect()),
            )
        })
        .await
}

/// After a statement that may have changed `session`'s status (creation, delete and restore
/// included): fed before the commit under [`noting`], at once otherwise.
pub(crate) async fn status_may_have_changed(conn: &mut PgConnection, session: Uuid) -> Result<()> {
    let noted = NOTED.try_with(|noted| {
        noted.borrow_mut().insert(session);
    });
    match noted {
        Ok(()) => Ok(()),
        Err(_) => feed(conn, &[session]).await,
    }
}

/// Gives the status changes of `sessions` recorded in this transaction the feed's next
/// positions; the feed's lock is then held to the commit (none is taken when nothing was
/// recorded).
pub(crate) async fn feed(conn: &mut PgConnection, sessions: &[Uuid]) -> Result<()> {
    if sessions.is_empty() {
        return Ok(());
    }
    sqlx::query("SELECT feed_status_changes($1)")
        .bind(sessions)
        .execute(traced(conn))
        .await?;
    Ok(())
}
