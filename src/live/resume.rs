//! The one way a live stream resumes: replayed from the database after the subscriber's
//! position, then live, with no gap and no duplicate, and replayed again from there whenever the
//! live feed may have lost something. Each stream supplies only its [`Resumable`] source (how to
//! read its durable order, and what a live change means to it); [`resume`] holds the protocol and
//! the invariants that make every stream gapless:
//!
//! - **Subscribe before replaying.** Whatever commits during the replay is then also received
//!   live, so nothing falls between the last page read and the first change received.
//! - **Drop what the position has.** Because of that overlap a live change may have been replayed
//!   already. Orders are in commit order, so the position alone (what was sent) says so: a change
//!   at or below it is dropped, and nothing else needs remembering.
//! - **Read a gap from the database.** A live change past the next position means changes were
//!   lost on the way to this subscriber (this process read the log after a reset, say); they
//!   committed before it, so the source reads them before the change is applied.
//! - **Missed: replay again.** When the hub says this process may have missed changes, the
//!   stream subscribes again and replays from its position.
//! - **Too slow: hand back exactly what was sent.** A subscriber cut off for falling behind is
//!   told the cursor to resume from. Everything gathered before the interruption goes out first,
//!   so that cursor is exactly what the subscriber received: resuming neither skips nor repeats.

use std::future::Future;
use std::sync::Arc;

use tokio::time::Instant;

use super::queue::{COALESCE, Interrupted};
use super::{Change, Receiver};
use crate::error::{Error, Result};

/// What a subscriber has been sent of a stream's order; it is also its cursor.
pub trait StreamPosition: Clone + Send + Sync {
    /// Where a live change stands in the order.
    type Key: Send + Sync;
    /// Where `change` stands in the order; `None` when the order has no place for it.
    fn key(change: &Change) -> Option<Self::Key>;
    /// Whether the change at `key` was sent whole already (by the replay).
    fn has(&self, key: &Self::Key) -> bool;
    /// Whether something before `key` was never read.
    fn misses_before(&self, key: &Self::Key) -> bool;
    /// The cursor that resumes right after what was sent.
    fn cursor(&self) -> String;
}

/// The key of a stream's position.
pub type Key<S> = <<S as Resumable>::Position as StreamPosition>::Key;

/// One stream's source: its durable order in the database, and what a live change means to it.
/// Every method that reads moves the position it is given past what it read.
pub trait Resumable: Send {
    type Position: StreamPosition;
    /// What reading gives, before it is sent.
    type Item: Send;
    /// What the subscriber is sent.
    type Out: Send;

    /// What the stream starts with, as of where it starts (nothing by default).
    fn first(
        &mut self,
        at: &Self::Position,
    ) -> impl Future<Output = Result<Option<Self::Out>>> + Send {
        let _ = at;
        async { Ok(None) }
    }

    /// What was sent only in part before `at`, read again on every replay (nothing by default).
    fn partly_sent(
        &mut self,
        at: &mut Self::Position,
    ) -> impl Future<Output = Result<Vec<Self::Item>>> + Send {
        let _ = at;
        async { Ok(Vec::new()) }
    }

    /// One page after `at` (and before `until`, when a gap is filled); `None` once there is
    /// nothing more. What a gap that cannot be read whole means (an error, or something to pass
    /// over) is the source's to say.
    fn page(
        &mut self,
        at: &mut Self::Position,
        until: Option<&Key<Self>>,
    ) -> impl Future<Output = Result<Option<Vec<Self::Item>>>> + Send;

    /// What of the live change at `key` was not sent yet. Called only when the position does
    /// not have the change whole, and nothing before it is missing.
    fn live(
        &mut self,
        at: &mut Self::Position,
        key: &Key<Self>,
        change: &Arc<Change>,
    ) -> impl Future<Output = Result<Vec<Self::Item>>> + Send;

    /// What the items gathered for one delivery go out as (a stream that merges items does it
    /// here). `sent` is the position before them: a stream whose items carry their own cursor
    /// moves it past each.
    fn emit(&mut self, sent: &mut Self::Position, items: Vec<Self::Item>) -> Vec<Self::Out>;

    /// Whether sending `out` holds the appends that follow for [`COALESCE`], to merge them
    /// (never, by default).
    fn opens_window(&self, out: &Self::Out) -> bool {
        let _ = out;
        false
    }
}

/// A subscriber's live changes: the hub's [`Receiver`], or a test's script.
pub trait Live: Send {
    /// The next change and, when it is an append, those that follow it until [`COALESCE`] after
    /// `last_sent`; an interruption ends them.
    fn recv_window(
        &mut self,
        last_sent: Instant,
    ) -> impl Future<Output = Vec<std::result::Result<Arc<Change>, Interrupted>>> + Send;
}

impl Live for Receiver {
    fn recv_window(
        &mut self,
        last_sent: Instant,
    ) -> impl Future<Output = Vec<std::result::Result<Arc<Change>, Interrupted>>> + Send {
        Receiver::recv_window(self, last_sent)
    }
}

/// The stream of `source` after `at`: replayed, then live, until the subscriber goes, the hub
/// closes, or the subscriber falls too far behind (then it is told the cursor to resume from).
/// `subscribe` starts a subscriber's live changes (again after a `Missed`).
pub fn resume<S, L>(
    mut source: S,
    mut subscribe: impl FnMut() -> L + Send,
    mut at: S::Position,
) -> impl futures::Stream<Item = Result<S::Out>> + Send
where
    S: Resumable,
    L: Live,
{
    async_stream::try_stream! {
        if let Some(first) = source.first(&at).await? {
            yield first;
        }
        // `at` is what was read; `sent` what the subscriber has (they differ only while a
        // delivery is being gathered).
        let mut sent = at.clone();
        loop {
            // Before the replay, so that nothing falls between the two.
            let mut live = subscribe();
            let mut gathered = source.partly_sent(&mut at).await?;
            loop {
                let page = source.page(&mut at, None).await?;
                let more = page.is_some();
                gathered.extend(page.into_iter().flatten());
                for out in source.emit(&mut sent, std::mem::take(&mut gathered)) {
                    yield out;
                }
                sent = at.clone();
                if !more {
                    break;
                }
            }
            let now = Instant::now();
            let mut last_sent = now.checked_sub(COALESCE).unwrap_or(now);
            let ended = loop {
                let mut ended = None;
                // The changes to report delivered once what they gave is sent.
                let mut taken = Vec::new();
                for received in live.recv_window(last_sent).await {
                    let change = match received {
                        Ok(change) => change,
                        Err(why) => {
                            ended = Some(why);
                            break;
                        }
                    };
                    if let Some(key) = S::Position::key(&change) {
                        if at.has(&key) {
                            // Replayed already.
                            continue;
                        }
                        // Lost on the way here: the database has it.
                        while at.misses_before(&key) {
                            let Some(page) = source.page(&mut at, Some(&key)).await? else {
                                break;
                            };
                            gathered.extend(page);
                        }
                        gathered.extend(source.live(&mut at, &key, &change).await?);
                    }
                    taken.push(change);
                }
                // What was gathered goes out before the interruption is acted on, so the
                // cursor in a too-slow error is exact.
                let out = source.emit(&mut sent, std::mem::take(&mut gathered));
                if out.iter().any(|out| source.opens_window(out)) {
                    last_sent = Instant::now();
                }
                for out in out {
                    yield out;
                }
                sent = at.clone();
                taken.iter().for_each(|change| change.delivered());
                if let Some(why) = ended {
                    break why;
                }
            };
            match ended {
                Interrupted::Missed => continue,
                Interrupted::TooSlow => {
                    Err(Error::SubscriberTooSlow(format!(
                        "subscriber fell behind; subscribe again with after: \"{}\"",
                        sent.cursor()
                    )))?;
                }
                Interrupted::Closed => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

    use chrono::Utc;
    use futures::StreamExt as _;
    use uuid::Uuid;

    use super::*;
    use crate::store::session_events::SessionEventRow;

    /// A position in a gapless order of numbered items.
    #[derive(Debug, Clone)]
    struct At(i64);

    impl StreamPosition for At {
        type Key = i64;

        fn key(change: &Change) -> Option<i64> {
            Some(change.row.position)
        }

        fn has(&self, &key: &i64) -> bool {
            key <= self.0
        }

        fn misses_before(&self, &key: &i64) -> bool {
            key > self.0 + 1
        }

        fn cursor(&self) -> String {
            self.0.to_string()
        }
    }

    /// A read: after, until.
    type Read = (i64, Option<i64>);

    /// Items 1, 2, … up to the last committed, and the reads made of them.
    #[derive(Clone, Default)]
    struct Db {
        committed: Arc<AtomicI64>,
        reads: Arc<Mutex<Vec<Read>>>,
    }

    impl Db {
        fn with(committed: i64) -> Db {
            let db = Db::default();
            db.commit(committed);
            db
        }

        fn commit(&self, up_to: i64) {
            self.committed.fetch_max(up_to, Ordering::SeqCst);
        }

        fn reads(&self) -> Vec<Read> {
            self.reads.lock().unwrap().clone()
        }
    }

    /// Reads two items a page.
    struct Fake(Db);

    impl Resumable for Fake {
        type Position = At;
        type Item = i64;
        type Out = i64;

        async fn page(&mut self, at: &mut At, until: Option<&i64>) -> Result<Option<Vec<i64>>> {
            self.0.reads.lock().unwrap().push((at.0, until.copied()));
            let last = (at.0 + 2)
                .min(self.0.committed.load(Ordering::SeqCst))
                .min(until.map_or(i64::MAX, |until| until - 1));
            let items: Vec<i64> = (at.0 + 1..=last).collect();
            at.0 = at.0.max(last);
            Ok((!items.is_empty()).then_some(items))
        }

        async fn live(&mut self, at: &mut At, &key: &i64, _: &Arc<Change>) -> Result<Vec<i64>> {
            at.0 = key;
            Ok(vec![key])
        }

        fn emit(&mut self, _: &mut At, items: Vec<i64>) -> Vec<i64> {
            items
        }
    }

    type Received = std::result::Result<Arc<Change>, Interrupted>;

    /// One subscription's deliveries: each commits items up to a number, then hands over what
    /// it holds. When they run out, the hub closes.
    struct Script {
        db: Db,
        deliveries: VecDeque<(i64, Vec<Received>)>,
    }

    impl Live for Script {
        fn recv_window(&mut self, _: Instant) -> impl Future<Output = Vec<Received>> + Send {
            let (commit, delivery) = self
                .deliveries
                .pop_front()
                .unwrap_or((0, vec![Err(Interrupted::Closed)]));
            self.db.commit(commit);
            std::future::ready(delivery)
        }
    }

    fn item(n: i64) -> Received {
        let row = SessionEventRow::of_session(Uuid::nil(), n, Utc::now());
        Ok(Arc::new(Change::of_row(row)))
    }

    /// What the stream sends from `after` with one script per subscription, how it ends, and how
    /// many times it subscribed.
    async fn run(
        db: &Db,
        after: i64,
        scripts: Vec<Vec<(i64, Vec<Received>)>>,
    ) -> (Vec<i64>, Option<Error>, usize) {
        let subscriptions = Arc::new(AtomicUsize::new(0));
        let mut scripts = VecDeque::from(scripts);
        let subscribe = {
            let (db, subscriptions) = (db.clone(), subscriptions.clone());
            move || {
                subscriptions.fetch_add(1, Ordering::SeqCst);
                let deliveries = scripts.pop_front().expect("a script per subscription");
                Script {
                    db: db.clone(),
                    deliveries: VecDeque::from(deliveries),
                }
            }
        };
        let stream = resume(Fake(db.clone()), subscribe, At(after));
        futures::pin_mut!(stream);
        let mut sent = Vec::new();
        while let Some(next) = stream.next().await {
            match next {
                Ok(n) => sent.push(n),
                Err(err) => return (sent, Some(err), subscriptions.load(Ordering::SeqCst)),
            }
        }
        (sent, None, subscriptions.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn catch_up_reads_page_after_page_from_the_position() {
        let db = Db::with(5);
        let (sent, ended, _) = run(&db, 0, vec![vec![]]).await;
        assert_eq!(sent, [1, 2, 3, 4, 5]);
        assert!(ended.is_none());
        assert_eq!(db.reads(), [(0, None), (2, None), (4, None), (5, None)]);
    }

    #[tokio::test]
    async fn what_commits_during_the_replay_arrives_both_ways_and_is_sent_once() {
        // 3 and 4 commit while the replay reads: they are in the database and queued live.
        let db = Db::with(4);
        let deliveries = vec![(4, vec![item(3), item(4)]), (5, vec![item(5)])];
        let (sent, ended, _) = run(&db, 0, vec![deliveries]).await;
        assert_eq!(sent, [1, 2, 3, 4, 5]);
        assert!(ended.is_none());
        assert!(
            db.reads().iter().all(|(_, until)| until.is_none()),
            "no gap read"
        );
    }

    #[tokio::test]
    async fn a_live_item_past_the_next_position_is_preceded_by_the_gap_read_from_the_source() {
        let db = Db::with(2);
        let deliveries = vec![(6, vec![item(6)]), (7, vec![item(7)])];
        let (sent, ended, _) = run(&db, 0, vec![deliveries]).await;
        assert_eq!(sent, [1, 2, 3, 4, 5, 6, 7]);
        assert!(ended.is_none());
        assert_eq!(
            db.reads(),
            [(0, None), (2, None), (2, Some(6)), (4, Some(6))]
        );
    }

    #[tokio::test]
    async fn missed_subscribes_again_and_replays_from_the_last_position() {
        let db = Db::with(2);
        // 4 and 5 commit, and this process misses them.
        let first = vec![(3, vec![item(3)]), (5, vec![Err(Interrupted::Missed)])];
        let second = vec![(6, vec![item(6)])];
        let (sent, ended, subscriptions) = run(&db, 0, vec![first, second]).await;
        assert_eq!(sent, [1, 2, 3, 4, 5, 6]);
        assert!(ended.is_none());
        assert_eq!(subscriptions, 2);
        assert_eq!(db.reads(), [(0, None), (2, None), (3, None), (5, None)]);
    }

    #[tokio::test]
    async fn too_slow_ends_with_the_cursor_of_the_last_item_sent() {
        let db = Db::with(2);
        let deliveries = vec![(4, vec![item(3), item(4), Err(Interrupted::TooSlow)])];
        let (sent, ended, subscriptions) = run(&db, 0, vec![deliveries]).await;
        assert_eq!(
            sent,
            [1, 2, 3, 4],
            "what came before the interruption is sent"
        );
        match ended {
            Some(Error::SubscriberTooSlow(message)) => {
                assert!(message.ends_with("after: \"4\""), "{message}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(subscriptions, 1);
    }

    #[tokio::test]
    async fn closed_ends_the_stream_cleanly() {
        let db = Db::with(1);
        let deliveries = vec![(2, vec![item(2), Err(Interrupted::Closed)])];
        let (sent, ended, subscriptions) = run(&db, 0, vec![deliveries]).await;
        assert_eq!(sent, [1, 2]);
        assert!(ended.is_none());
        assert_eq!(subscriptions, 1);
    }
}
