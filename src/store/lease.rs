//! Connections kept for one operation while it runs.
//!
//! sqlx pings every connection it takes back into the pool (a round trip, and a task switch on
//! both sides), so an operation that gave its connection back after each statement paid that
//! once per statement. An operation's reads instead park their connection here between
//! statements, and the pool gets it back once, when the operation ends. Only one connection is
//! parked: concurrent statements of the operation take more from the pool, which gets them back
//! as soon as they are done; while the pool is exhausted, each takes whichever comes first, a
//! connection from the pool or one its operation parks.

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};

use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, PgPool, Postgres};
use tokio::sync::Notify;

use crate::observe::metrics::WaitingForConnection;

pub struct Lease {
    pool: PgPool,
    parked: Mutex<Option<PoolConnection<Postgres>>>,
    parked_again: Notify,
}

impl Lease {
    pub fn new(pool: PgPool) -> Arc<Lease> {
        Arc::new(Lease {
            pool,
            parked: Mutex::new(None),
            parked_again: Notify::new(),
        })
    }

    /// The parked connection, else one from the pool or the next one the operation parks,
    /// whichever comes first (while the pool is exhausted, another statement of this operation
    /// may park its connection).
    pub async fn connection(self: &Arc<Self>) -> Result<Leased, sqlx::Error> {
        if let Some(connection) = self.take_parked() {
            return Ok(connection);
        }
        let _waiting = WaitingForConnection::start();
        self.from_pool().await
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
        let mut parked = self.lease.parked.lock().expect("not poisoned");
        if parked.is_none() {
            *parked = Some(connection);
            drop(parked);
            self.lease.parked_again.notify_one();
        }
        // Otherwise `connection` goes back to the pool here.
    }
}
