//! Records the SQL statements sqlx runs: every statement emits one `sqlx::query` tracing event,
//! which this layer keeps. Install it once per test binary, in a binary of its own, so no other
//! test's statements are recorded; or, in a shared binary, for one test's thread only.

use std::cell::RefCell;
use std::sync::{Arc, LazyLock, Mutex};

use tracing::Dispatch;
use tracing::subscriber::NoSubscriber;
use tracing_subscriber::layer::SubscriberExt as _;

/// What one recording keeps. Each recording on a thread has its own: tests in one binary run
/// side by side, and one's `clear` must not empty another's.
#[derive(Default)]
struct Buffers {
    /// Each statement's text, and whether a GraphQL operation ran it (inside its span).
    statements: Mutex<Vec<(String, bool)>>,
    /// The notices PostgreSQL sent (`auto_explain`'s plans, when it reports at `NOTICE`).
    notices: Mutex<Vec<String>>,
    /// The round trips of each GraphQL operation (its log line's `loader_round_trips`).
    round_trips: Mutex<Vec<u64>>,
}

/// The whole process's recording ([`record`]).
static PROCESS: LazyLock<Arc<Buffers>> = LazyLock::new(Arc::default);

thread_local! {
    /// This thread's recording ([`record_on_this_thread`]), while it lives.
    static THREAD: RefCell<Option<Arc<Buffers>>> = const { RefCell::new(None) };
}

/// The recording this thread reads: its own, else the process's.
fn buffers() -> Arc<Buffers> {
    THREAD
        .with(|mine| mine.borrow().clone())
        .unwrap_or_else(|| PROCESS.clone())
}

/// Starts recording for the whole process.
pub fn record() {
    let recorder = Recorder(PROCESS.clone());
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(recorder)).unwrap();
}

/// Records what runs on this thread while the returned value lives: for a test on a
/// current-thread runtime, which the server it started runs on too (tests on other threads are
/// not recorded).
pub fn record_on_this_thread() -> Recording {
    // tracing decides once per callsite whether anyone listens. With one dispatcher it asks the
    // one of the thread that reaches the callsite first, which may be another test's (none):
    // with two, it asks both and leaves the decision to each event.
    let bystander = Dispatch::new(NoSubscriber::default());
    let mine = Arc::<Buffers>::default();
    THREAD.with(|thread| *thread.borrow_mut() = Some(mine.clone()));
    let recording =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(Recorder(mine)));
    tracing::callsite::rebuild_interest_cache();
    Recording {
        _recording: recording,
        _bystander: bystander,
    }
}

/// Recording on one thread; it stops when dropped.
pub struct Recording {
    _recording: tracing::subscriber::DefaultGuard,
    _bystander: Dispatch,
}

impl Drop for Recording {
    fn drop(&mut self) {
        THREAD.with(|thread| *thread.borrow_mut() = None);
    }
}

/// Forgets what was recorded so far.
pub fn clear() {
    let buffers = buffers();
    buffers.statements.lock().unwrap().clear();
    buffers.notices.lock().unwrap().clear();
    buffers.round_trips.lock().unwrap().clear();
}

/// The notices received since the last `clear`.
pub fn notices() -> Vec<String> {
    buffers().notices.lock().unwrap().clone()
}

/// The round trips of each operation answered since the last `clear`: how many times it
/// waited for a wave of loader batches.
pub fn round_trips() -> Vec<u64> {
    buffers().round_trips.lock().unwrap().clone()
}

/// The statements recorded since the last `clear`.
pub fn recorded() -> Vec<String> {
    buffers()
        .statements
        .lock()
        .unwrap()
        .iter()
        .map(|(text, _)| text.clone())
        .collect()
}

/// The statements GraphQL operations ran since the last `clear`: not the server's background
/// work (the live hub's, a token's last use), which a loaded machine may run at any moment.
pub fn recorded_by_operations() -> Vec<String> {
    buffers()
        .statements
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, by_operation)| *by_operation)
        .map(|(text, _)| text.clone())
        .collect()
}

/// Keeps what it sees in its buffers.
struct Recorder(Arc<Buffers>);

impl<S> tracing_subscriber::Layer<S> for Recorder
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_event(&self, event: &tracing::Event<'_>, ctx: tracing_subscriber::layer::Context<'_, S>) {
        if event.metadata().target() == "sqlx::query" {
            let mut text = StatementText(String::new());
            event.record(&mut text);
            let by_operation = ctx
                .event_scope(event)
                .is_some_and(|mut scope| scope.any(|span| span.name() == "graphql_operation"));
            self.0
                .statements
                .lock()
                .unwrap()
                .push((text.0, by_operation));
        } else if event.metadata().target() == "sqlx::postgres::notice" {
            let mut message = Message(String::new());
            event.record(&mut message);
            self.0.notices.lock().unwrap().push(message.0);
        } else {
            let mut round_trips = RoundTrips(None);
            event.record(&mut round_trips);
            if let Some(n) = round_trips.0 {
                self.0.round_trips.lock().unwrap().push(n);
            }
        }
    }
}

/// The `loader_round_trips` of a request's log line.
struct RoundTrips(Option<u64>);

impl tracing::field::Visit for RoundTrips {
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        if field.name() == "loader_round_trips" {
            self.0 = Some(value);
        }
    }

    fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
}

/// The message of a notice.
struct Message(String);

impl tracing::field::Visit for Message {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "message" {
            self.0.push_str(value);
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0.push_str(&format!("{value:?}"));
        }
    }
}

/// The SQL text of a `sqlx::query` event.
struct StatementText(String);

impl tracing::field::Visit for StatementText {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "db.statement" || field.name() == "summary" {
            self.0.push_str(value);
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "db.statement" || field.name() == "summary" {
            self.0.push_str(&format!("{value:?}"));
        }
    }
}

/// How many recorded statements match, once the count has settled: sqlx records a statement
/// when it completes, which can be just after its result reached a client.
pub async fn settled_count(matches: impl Fn(&str) -> bool) -> usize {
    let count = || recorded().iter().filter(|s| matches(s)).count();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(2);
    while count() == 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // Anything that was still completing.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    count()
}
