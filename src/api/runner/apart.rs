//! Work that runs a while without waiting on anything (parsing or validating a large document,
//! answering a large introspection), done so that the runtime's worker threads go on serving
//! everyone else meanwhile: on a multi-threaded runtime the thread doing it first hands its
//! other tasks to a new worker (`block_in_place`). Without this, two such requests in flight
//! would leave the process's two workers (one per core) busy and `/livez` unanswered.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use tokio::runtime::{Handle, RuntimeFlavor};

/// Runs `work` apart from the worker threads (where there are several; else in place).
pub fn heavy<T>(work: impl FnOnce() -> T) -> T {
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}

/// A future or stream each of whose polls runs apart (see [`heavy`]) when `apart` is set.
pub struct Apart<T> {
    inner: T,
    apart: bool,
}

impl<T> Apart<T> {
    pub fn new(inner: T, apart: bool) -> Apart<T> {
        Apart { inner, apart }
    }

    fn run<R>(&mut self, poll: impl FnOnce(&mut T) -> R) -> R {
        if self.apart {
            heavy(|| poll(&mut self.inner))
        } else {
            poll(&mut self.inner)
        }
    }
}

impl<F: Future + Unpin> Future for Apart<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.get_mut().run(|inner| Pin::new(inner).poll(cx))
    }
}

impl<S: Stream + Unpin> Stream for Apart<S> {
    type Item = S::Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        self.get_mut().run(|inner| Pin::new(inner).poll_next(cx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn the_only_worker_stays_free_for_others_while_heavy_work_runs() {
        // With one worker, a task spinning on it in place would keep the other from running.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let other = tokio::spawn(async move { tx.send(()).unwrap() });
        let waited = Apart::new(
            Box::pin(async move { rx.recv_timeout(std::time::Duration::from_secs(10)) }),
            true,
        )
        .await;
        assert!(waited.is_ok(), "the other task ran meanwhile");
        other.await.unwrap();
    }
}
