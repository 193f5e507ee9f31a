//! Connections kept for one operation while it runs.
//!
//! sqlx pings every connection it takes back into the pool (a round trip, and a task switch on
//! both sides), so an operation that gave its connection back after each statement paid that
//! once per statement. An operation's reads instead park their connection here between
//! statements, and the pool gets it back once, when the operation ends. Only one connection is
//! parked: concurrent statements of the operation take more from the pool while it has room
//! (an idle connection, or fewer than its maximum), and give them back as soon as they are done.
//! When it has none (the server is busy), they wait for the operation's own: an operation never queues at the pool while it holds a
//! connection, and a busy server runs its operations side by side rather than each one's
//! statements.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, PgPool, Postgres};
use tokio::sync::Notify;

use crate::observe::metrics::WaitingForConnection;

pub struct Lease {
    pool: PgPool,
    parked: Mutex<Option<PoolConnection<Postgres>>>,
    parked_again: Notify,
    /// Connections the operation's statements hold now (the parked one aside).
    held: AtomicUsize,
}

impl Lease {
    pub fn new(pool: PgPool) -> Arc<Lease> {
        Arc::new(Lease {
            pool,
            parked: Mutex::new(None),
            parked_again: Notify::new(),
            held: AtomicUsize::new(0),
        })
    }

    /// The parked connection; else, while the operation holds another and the pool has no
    /// room, the next one the operation parks; else one from the pool, or the next one the
    /// operation parks, whichever comes first.
    pub async fn connection(self: &Arc<Self>) -> Result<Leased, sqlx::Error> {
        let _waiting = WaitingForConnection::start();
        loop {
            if let Some(connection) = self.take_parked() {
                return Ok(connection);
            }
            if self.held.load(Ordering::SeqCst) == 0 || self.pool_has_room() {
                return self.from_pool().await;
            }
            // A park meanwhile left a permit: no wake-up is lost.
            self.parked_again.notified().await;
        }
    }

    /// Whether the pool can hand out a connection without waiting: one is idle, or it may open
    /// another (which it then keeps).
    fn pool_has_room(&self) -> bool {
        self.pool.num_idle() > 0 || self.pool.size() < self.pool.options().get_max_connections()
    }

    /// A connection from the pool, or the next one the operation parks. The pool may be
    /// opening a connection for this: abandoned halfway, that connection would be lost (and a
    /// new one opened for the next statement: a server process forked each time). So the
    /// acquire runs on its own, and what it brings goes back to the pool should a parked
    /// connection come first.
    async fn from_pool(self: &Arc<Self>) -> Result<Leased, sqlx::Error> {
        let pool = self.pool.clone();
        let mut acquire = tokio::spawn(async move { pool.acquire().await });
        loop {
            tokio::select! {
                acquired = &mut acquire => {
                    let connection = acquired.map_err(|_| sqlx::Error::WorkerCrashed)??;
                    return Ok(self.leased(connection));
                }
                () = self.parked_again.notified() => {
                    if let Some(connection) = self.take_parked() {
                        return Ok(connection);
                    }
                }
            }
        }
    }

    fn take_parked(self: &Arc<Self>) -> Option<Leased> {
        let parked = self.parked.lock().expect("not poisoned").take();
        parked.map(|connection| self.leased(connection))
    }

    fn leased(self: &Arc<Self>, connection: PoolConnection<Postgres>) -> Leased {
        self.held.fetch_add(1, Ordering::SeqCst);
        Leased {
            connection: Some(connection),
            lease: self.clone(),
        }
    }
}

/// A connection in use; parked again when dropped (even mid-statement: sqlx finishes reading
/// what is left of an abandoned statement before it sends the next).
pub struct Leased {
    connection: Option<PoolConnection<Postgres>>,
    lease: Arc<Lease>,
}

impl Deref for Leased {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        self.connection.as_ref().expect("held until dropped")
    }
}

impl DerefMut for Leased {
    fn deref_mut(&mut self) -> &mut PgConnection {
        self.connection.as_mut().expect("held until dropped")
    }
}

impl Drop for Leased {
    fn drop(&mut self) {
        let Some(connection) = self.connection.take() else {
            return;
        };
        self.lease.held.fetch_sub(1, Ordering::SeqCst);
        let mut parked = self.lease.parked.lock().expect("not poisoned");
        if parked.is_none() {
            *parked = Some(connection);
            drop(parked);
            self.lease.parked_again.notify_one();
        }
        // Otherwise `connection` goes back to the pool here.
    }
}
