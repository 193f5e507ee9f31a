//! Running a transaction again when PostgreSQL aborts it to resolve a collision with concurrent
//! ones (a deadlock or a serialization failure). Writers lock in one order, so this is the net
//! for what that order cannot foresee, such as a record a batch names being created while the
//! batch takes its locks.

use std::future::Future;
use std::time::Duration;

use crate::error::{Error, Result};

/// Attempts in all before the client is told to retry.
const ATTEMPTS: u32 = 5;

/// The pause before the first retry; it doubles for each one after.
const FIRST_PAUSE: Duration = Duration::from_millis(10);

/// Runs `attempt` until it succeeds, fails for another reason, or has collided [`ATTEMPTS`]
/// times; then the client gets a `CONFLICT` that says to retry.
pub(super) async fn retrying<T, F: Future<Output = Result<T>>>(
    mut attempt: impl FnMut() -> F,
) -> Result<T> {
    let mut attempts = 1;
    loop {
        match attempt().await {
            Err(err) if err.is_transient() && attempts < ATTEMPTS => {
                tracing::debug!(error = %err, attempts, "transaction collided; running it again");
                tokio::time::sleep(pause(attempts)).await;
                attempts += 1;
            }
            Err(err) if err.is_transient() => {
                tracing::warn!(error = %err, attempts, "transaction kept colliding; client told to retry");
                return Err(Error::Conflict(format!(
                    "the request collided with concurrent writes {ATTEMPTS} times and was not \
                     applied (nothing was stored); retry it"
                )));
            }
            done => return done,
        }
    }
}

/// The pause after the `retry`th collision: [`FIRST_PAUSE`] doubled for each retry before,
/// times a random factor between 0.5 and 1.5, so transactions that collided do not meet again
/// in step.
fn pause(retry: u32) -> Duration {
    let permille = getrandom::u64().map_or(500, |r| r % 1000) as u32;
    FIRST_PAUSE * 2u32.pow(retry - 1) * (500 + permille) / 1000
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::error::Error as StdError;
    use std::sync::atomic::{AtomicU32, Ordering};

    use sqlx::error::{DatabaseError, ErrorKind};

    use super::*;

    /// A database error with a SQLSTATE, as PostgreSQL would send it.
    #[derive(Debug)]
    struct State(&'static str);

    impl std::fmt::Display for State {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "SQLSTATE {}", self.0)
        }
    }

    impl StdError for State {}

    impl DatabaseError for State {
        fn message(&self) -> &str {
            self.0
        }
        fn code(&self) -> Option<Cow<'_, str>> {
            Some(self.0.into())
        }
        fn as_error(&self) -> &(dyn StdError + Send + Sync + 'static) {
            self
        }
        fn as_error_mut(&mut self) -> &mut (dyn StdError + Send + Sync + 'static) {
            self
        }
        fn into_error(self: Box<Self>) -> Box<dyn StdError + Send + Sync + 'static> {
            self
        }
        fn kind(&self) -> ErrorKind {
            ErrorKind::Other
        }
    }

    fn failing(code: &'static str) -> Error {
        Error::Database(sqlx::Error::Database(Box::new(State(code))))
    }

    /// Runs `retrying` over attempts that fail with `errors` in turn, then succeed; returns its
    /// result and the attempts made.
    async fn run(errors: Vec<Error>) -> (Result<u32>, u32) {
        let made = AtomicU32::new(0);
        let errors = std::sync::Mutex::new(errors.into_iter());
        let result = retrying(|| async {
            let n = made.fetch_add(1, Ordering::SeqCst) + 1;
            match errors.lock().unwrap().next() {
                Some(err) => Err(err),
                None => Ok(n),
            }
        })
        .await;
        (result, made.into_inner())
    }

    #[tokio::test]
    async fn deadlocks_and_serialization_failures_are_run_again() {
        let (result, made) = run(vec![failing("40P01"), failing("40001")]).await;
        assert_eq!((result.unwrap(), made), (3, 3));
    }

    #[tokio::test]
    async fn after_five_collisions_the_client_is_told_to_retry() {
        let (result, made) = run((0..ATTEMPTS).map(|_| failing("40P01")).collect()).await;
        let err = result.unwrap_err();
        assert_eq!(made, ATTEMPTS);
        let public = err.public();
        assert_eq!(public.code, "CONFLICT");
        assert!(public.message.contains("retry it"), "{err}");
    }

    #[tokio::test]
    async fn other_failures_are_not_run_again() {
        for err in [failing("23505"), Error::Conflict("it is completed".into())] {
            let code = err.public().code;
            let (result, made) = run(vec![err]).await;
            assert_eq!((result.unwrap_err().public().code, made), (code, 1));
        }
    }

    #[test]
    fn pauses_double_with_jitter() {
        for _ in 0..100 {
            let first = pause(1);
            assert!(
                first >= FIRST_PAUSE / 2 && first < FIRST_PAUSE * 3 / 2,
                "{first:?}"
            );
            let fourth = pause(4);
            assert!(
                fourth >= FIRST_PAUSE * 4 && fourth < FIRST_PAUSE * 12,
                "{fourth:?}"
            );
        }
    }
}
