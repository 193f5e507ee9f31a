//! Batching without a timer. A request's loads are collected while its resolvers run and sent
//! to the database only when the request can make no further progress without them, and only
//! once the batches sent before have all come back. So a query costs one statement per loader
//! per level of its shape, whatever the rows, the runtime's threads or the machine's load
//! (a batching window, as async-graphql's DataLoader has, splits a level whenever resolving it
//! takes longer than the window, and makes every level wait out the window).
//!
//! [`UntilIdle`] drives a request: it polls the execution and, when the execution is blocked
//! (it returned pending without anything having woken it meanwhile) and no batch is in flight,
//! sends what its loaders queued with the request's [`Dispatcher`], and runs those statements.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Wake, Waker};

use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::task::AtomicWaker;
use futures::{Stream, StreamExt as _};
use tracing::Instrument as _;

use uuid::Uuid;

use super::LoadError;
use crate::api::guards::beyond_the_link;

/// Loads the values of many keys at once (one SQL statement).
pub trait Load: Send + Sync + 'static {
    type Key: Clone + Eq + Hash + Send + Sync + 'static;
    type Value: Clone + Send + Sync + 'static;

    fn load(
        &self,
        keys: &[Self::Key],
    ) -> impl Future<Output = Result<HashMap<Self::Key, Self::Value>, LoadError>> + Send;

    /// Whether `value`, loaded for `key`, holds nothing of another session than `session`:
    /// what a share link, bound to one session, may read. Every loader says; the entry points
    /// (root fields, subscriptions, the fields that cross sessions) already keep a link in its
    /// session, so this is the second wall, for the day one of them does not.
    fn within(key: &Self::Key, value: &Self::Value, session: Uuid) -> bool;
}

/// Loads through `L`, batched by the request's dispatcher; with its cache on, each key is
/// loaded at most once per request.
pub struct Loader<L: Load> {
    inner: Arc<Inner<L>>,
}

struct Inner<L: Load> {
    load: L,
    dispatcher: Arc<Dispatcher>,
    /// The one session the caller may read (a share link's); values beyond it are refused.
    bound: Option<Uuid>,
    state: Mutex<LoaderState<L>>,
}

struct LoaderState<L: Load> {
    /// The batch collecting keys, until it is sent, and its keys.
    open: Option<Arc<Batch<L>>>,
    open_keys: Vec<L::Key>,
    /// The batch each key was (or is being) loaded by; `None` when caching is off (a
    /// subscription resolves every event against the database as it is then).
    loaded: Option<HashMap<L::Key, Arc<Batch<L>>>>,
}

/// What a batch brought back.
type Loaded<L> = Result<HashMap<<L as Load>::Key, <L as Load>::Value>, LoadError>;

/// Keys sent together: their values, once loaded, and who waits for them.
struct Batch<L: Load> {
    result: OnceLock<Loaded<L>>,
    waiting: Mutex<Vec<Waker>>,
}

impl<L: Load> Loader<L> {
    pub fn new(load: L, dispatcher: &Arc<Dispatcher>, cached: bool, bound: Option<Uuid>) -> Self {
        Loader {
            inner: Arc::new(Inner {
                load,
                dispatcher: dispatcher.clone(),
                bound,
                state: Mutex::new(LoaderState {
                    open: None,
                    open_keys: Vec::new(),
                    loaded: cached.then(HashMap::new),
                }),
            }),
        }
    }

    /// The value of `key`, `None` when the loader found none.
    pub async fn load_one(&self, key: L::Key) -> Result<Option<L::Value>, LoadError> {
        let batch = self.batch_for(&key);
        Ready {
            batch: &batch,
            slot: None,
        }
        .await;
        let value = match batch.result.get().expect("a ready batch has its result") {
            Ok(values) => values.get(&key),
            Err(err) => return Err(err.clone()),
        };
        if let (Some(bound), Some(value)) = (self.inner.bound, value)
            && !L::within(&key, value, bound)
        {
            return Err(Arc::new(beyond_the_link()));
        }
        Ok(value.cloned())
    }

    /// The batch that loads `key`: one that already did or will, or the open one.
    fn batch_for(&self, key: &L::Key) -> Arc<Batch<L>> {
        let (batch, opened) = {
            let mut state = self.inner.state.lock().expect("not poisoned");
            if let Some(batch) = state.loaded.as_ref().and_then(|loaded| loaded.get(key)) {
                return batch.clone();
            }
            let (batch, opened) = match &state.open {
                Some(batch) => (batch.clone(), false),
                None => {
                    let batch = Arc::new(Batch {
                        result: OnceLock::new(),
                        waiting: Mutex::default(),
                    });
                    state.open = Some(batch.clone());
                    (batch, true)
                }
            };
            state.open_keys.push(key.clone());
            if let Some(loaded) = &mut state.loaded {
                loaded.insert(key.clone(), batch.clone());
            }
            (batch, opened)
        };
        // Outside the lock: without a driver the batch is sent at once, which takes it.
        if opened {
            self.inner.dispatcher.queue(self.inner.clone());
        }
        batch
    }

    /// Keeps `values`, read by another statement (a page that read its rows' payloads with
    /// them), as if this loader had loaded them: a later `load_one` of one of their keys
    /// sends nothing. A key already loaded or queued keeps its batch; without a cache (a
    /// subscription's loaders) nothing is kept.
    pub fn prime(&self, values: HashMap<L::Key, L::Value>) {
        if values.is_empty() {
            return;
        }
        let mut state = self.inner.state.lock().expect("not poisoned");
        let Some(loaded) = &mut state.loaded else {
            return;
        };
        let keys: Vec<L::Key> = values.keys().cloned().collect();
        let batch = Arc::new(Batch {
            result: OnceLock::from(Ok(values)),
            waiting: Mutex::default(),
        });
        for key in keys {
            loaded.entry(key).or_insert_with(|| batch.clone());
        }
    }
}

/// Resolves once the batch has its result.
struct Ready<'a, L: Load> {
    batch: &'a Batch<L>,
    /// Where this future's waker is in the batch's list (a future polled again while it
    /// waits replaces its waker rather than adding one).
    slot: Option<usize>,
}

impl<L: Load> Future for Ready<'_, L> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.batch.result.get().is_some() {
            return Poll::Ready(());
        }
        let mut waiting = self.batch.waiting.lock().expect("not poisoned");
        // Checked again under the lock the sender takes to wake: no wake-up is lost.
        if self.batch.result.get().is_some() {
            return Poll::Ready(());
        }
        match self.slot {
            Some(slot) if !waiting[slot].will_wake(cx.waker()) => {
                waiting[slot] = cx.waker().clone();
            }
            Some(_) => {}
            None => {
                waiting.push(cx.waker().clone());
                let slot = waiting.len() - 1;
                drop(waiting);
                self.slot = Some(slot);
            }
        }
        Poll::Pending
    }
}

/// A loader with a batch to send.
trait Queued: Send + Sync {
    /// Takes the open batch: the statement to run, which hands each waiter its values.
    fn send(self: Arc<Self>) -> BoxFuture<'static, ()>;
}

impl<L: Load> Queued for Inner<L> {
    fn send(self: Arc<Self>) -> BoxFuture<'static, ()> {
        let (batch, mut keys) = {
            let mut state = self.state.lock().expect("not poisoned");
            let Some(batch) = state.open.take() else {
                return Box::pin(std::future::ready(()));
            };
            (batch, std::mem::take(&mut state.open_keys))
        };
        // Without a cache a key may have been asked for twice.
        let mut seen = HashSet::with_capacity(keys.len());
        keys.retain(|key| seen.insert(key.clone()));
        let span = tracing::debug_span!(
            "dataloader_batch",
            otel.name = format!("load {}", short_type_name::<L>()),
            loader = short_type_name::<L>(),
            keys = keys.len(),
        );
        crate::observe::request::count_batch();
        Box::pin(async move {
            let result = self.load.load(&keys).instrument(span).await;
            let _ = batch.result.set(result);
            let waiting = std::mem::take(&mut *batch.waiting.lock().expect("not poisoned"));
            waiting.into_iter().for_each(Waker::wake);
        })
    }
}

/// `StagesBySession` for `casefile::api::loaders::stages_by_session::StagesBySession`.
fn short_type_name<T>() -> &'static str {
    let name = std::any::type_name::<T>();
    let path = name.split('<').next().unwrap_or(name);
    &name[path.rfind("::").map_or(0, |at| at + 2)..]
}

/// Holds a request's queued batches until the request is blocked on them.
#[derive(Default)]
pub struct Dispatcher {
    state: Mutex<DispatchState>,
}

#[derive(Default)]
struct DispatchState {
    queued: Vec<Arc<dyn Queued>>,
    /// Whether an [`UntilIdle`] drives the request; without one every batch goes at once.
    driven: bool,
}

impl Dispatcher {
    fn queue(&self, loader: Arc<dyn Queued>) {
        let mut state = self.state.lock().expect("not poisoned");
        if state.driven {
            state.queued.push(loader);
        } else {
            drop(state);
            tokio::spawn(loader.send());
        }
    }

    /// From now on batches wait for the request to block.
    fn drive(&self) {
        self.state.lock().expect("not poisoned").driven = true;
    }

    /// The queued batches, taken out of the queue.
    fn unqueue(&self) -> Vec<Arc<dyn Queued>> {
        std::mem::take(&mut self.state.lock().expect("not poisoned").queued)
    }

    /// The statements of every queued batch.
    fn take_queued(&self) -> Vec<BoxFuture<'static, ()>> {
        self.unqueue().into_iter().map(Queued::send).collect()
    }
}

/// Records that the execution was woken, and passes the wake on to the task.
#[derive(Default)]
struct Signal {
    woken: AtomicBool,
    task: AtomicWaker,
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        self.task.wake();
    }
}

/// How many times one poll goes round (execution, then batches) before it lets other tasks
/// run.
const ROUNDS_PER_POLL: usize = 64;

/// Drives a request's execution (a future) or its results (a stream): each time the execution
/// is blocked and no batch is in flight, it sends the queued batches. It runs them itself, in
/// the request's task, so a batch coming back wakes no other thread.
pub struct UntilIdle<F> {
    inner: F,
    dispatcher: Arc<Dispatcher>,
    signal: Arc<Signal>,
    in_flight: FuturesUnordered<BoxFuture<'static, ()>>,
}

impl<F> Drop for UntilIdle<F> {
    /// Lets go of the batches still queued when the request ends (they will never be sent).
    /// Each holds its loader, which holds the dispatcher: kept, they would keep each other,
    /// and the loaders' store (and the connection it keeps) alive for good.
    fn drop(&mut self) {
        drop(self.dispatcher.unqueue());
    }
}

impl<F> UntilIdle<F> {
    pub fn new(inner: F, dispatcher: Arc<Dispatcher>) -> Self {
        UntilIdle {
            inner,
            dispatcher,
            signal: Arc::default(),
            in_flight: FuturesUnordered::new(),
        }
    }

    /// Polls the inner future or stream with a waker that records wake-ups, then the batches
    /// in flight; sends the queued ones once the inner is blocked and none is in flight.
    fn drive<T>(
        &mut self,
        cx: &mut Context<'_>,
        mut poll: impl FnMut(&mut F, &mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        self.dispatcher.drive();
        self.signal.task.register(cx.waker());
        let waker = Waker::from(self.signal.clone());
        for _ in 0..ROUNDS_PER_POLL {
            self.signal.woken.store(false, Ordering::SeqCst);
            if let Poll::Ready(value) = poll(&mut self.inner, &mut Context::from_waker(&waker)) {
                return Poll::Ready(value);
            }
            // Batches that come back wake their waiters, which sets `woken`.
            while let Poll::Ready(Some(())) = self.in_flight.poll_next_unpin(cx) {}
            if self.signal.woken.load(Ordering::SeqCst) {
                continue;
            }
            if !self.in_flight.is_empty() {
                return Poll::Pending;
            }
            let batches = self.dispatcher.take_queued();
            if batches.is_empty() {
                return Poll::Pending;
            }
            crate::observe::request::count_round_trip();
            self.in_flight.extend(batches);
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl<F: Future + Unpin> Future for UntilIdle<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.get_mut()
            .drive(cx, |inner, cx| Pin::new(inner).poll(cx))
    }
}

impl<S: Stream + Unpin> Stream for UntilIdle<S> {
    type Item = S::Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        self.get_mut()
            .drive(cx, |inner, cx| Pin::new(inner).poll_next(cx))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use super::*;

    /// Doubles its keys, counting its calls; slow, like a database.
    struct Doubler(Arc<AtomicUsize>);

    impl Load for Doubler {
        type Key = u32;
        type Value = u32;
        async fn load(&self, keys: &[u32]) -> Result<HashMap<u32, u32>, LoadError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(5)).await;
            Ok(keys.iter().map(|k| (*k, k * 2)).collect())
        }
        /// Its values are of the session whose id's first byte they are.
        fn within(_: &u32, value: &u32, session: Uuid) -> bool {
            session.as_bytes()[0] == *value as u8
        }
    }

    fn loader(cached: bool) -> (Loader<Doubler>, Arc<AtomicUsize>, Arc<Dispatcher>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let dispatcher = Arc::new(Dispatcher::default());
        let loader = Loader::new(Doubler(calls.clone()), &dispatcher, cached, None);
        (loader, calls, dispatcher)
    }

    /// Three levels of a tree, each level's loads made by the parents' results as they come.
    async fn tree(loader: &Loader<Doubler>) -> u32 {
        let children = |parent: u32| async move {
            // Work between loads, longer than any batching window would wait.
            std::thread::sleep(Duration::from_millis(2));
            let child = loader.load_one(parent).await.unwrap().unwrap();
            let leaves =
                futures::future::join_all((0..3).map(|i| async move {
                    loader.load_one(child * 10 + i).await.unwrap().unwrap()
                }));
            leaves.await.into_iter().sum::<u32>()
        };
        futures::future::join_all((1..=20).map(children))
            .await
            .into_iter()
            .sum()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_batch_per_level_however_long_a_level_takes() {
        let (loader, calls, dispatcher) = loader(true);
        let sum = UntilIdle::new(Box::pin(tree(&loader)), dispatcher).await;
        assert_eq!(
            sum,
            (1..=20)
                .map(|p| (0..3).map(|i| (p * 20 + i) * 2).sum::<u32>())
                .sum::<u32>()
        );
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cached_keys_are_loaded_once_and_uncached_ones_each_time() {
        for (cached, expected) in [(true, 1), (false, 2)] {
            let (loader, calls, dispatcher) = loader(cached);
            let twice = async {
                loader.load_one(7).await.unwrap();
                loader.load_one(7).await.unwrap()
            };
            assert_eq!(UntilIdle::new(Box::pin(twice), dispatcher).await, Some(14));
            assert_eq!(calls.load(Ordering::SeqCst), expected, "cached: {cached}");
        }
    }

    #[tokio::test]
    async fn without_a_driver_every_load_goes_at_once() {
        let (loader, calls, _) = loader(true);
        assert_eq!(loader.load_one(2).await.unwrap(), Some(4));
        assert_eq!(loader.load_one(3).await.unwrap(), Some(6));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_bound_loader_refuses_what_lies_beyond_its_session() {
        let session = Uuid::from_bytes([4; 16]);
        let dispatcher = Arc::new(Dispatcher::default());
        let calls = Arc::new(AtomicUsize::new(0));
        let bound = Loader::new(Doubler(calls), &dispatcher, true, Some(session));
        assert_eq!(bound.load_one(2).await.unwrap(), Some(4));
        let refused = bound.load_one(3).await.unwrap_err();
        assert!(
            matches!(*refused, crate::error::Error::Forbidden(_)),
            "{refused:?}"
        );
        // Unbound, the same value is read.
        let (unbound, _, _) = loader(true);
        assert_eq!(unbound.load_one(3).await.unwrap(), Some(6));
    }
}
