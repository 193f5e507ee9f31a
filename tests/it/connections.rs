//! How reads use the pool: a query's statements share one connection (sqlx pings each
//! connection it takes back, a round trip per statement otherwise), which never starves the
//! operation's own statements, even on a pool of one; and a connection that sat idle is checked
//! before it is used again.

use std::time::Duration;

use casefile::db::Database;
use casefile::db::DbTimeouts;
use casefile::store::Store;
use chrono::Utc;
use sqlx::ConnectOptions as _;

use crate::common::{TestDb, fixtures};

/// A store on a pool of exactly one connection to the test database (the embedded one has
/// only one anyway).
async fn store_on_one_connection(db: &TestDb) -> Store {
    match db.url() {
        Some(url) => {
            let one = Database::external(&url, 1, &DbTimeouts::default())
                .await
                .unwrap();
            Store::new(one.pool().clone())
        }
        None => db.store(),
    }
}

#[tokio::test]
async fn a_query_reads_on_one_connection_even_from_a_pool_of_one() {
    let db = TestDb::start().await;
    let session = fixtures::investigation(db.db.pool(), Utc::now()).await;
    let store = store_on_one_connection(&db).await;
    let pool = store.pool().clone();

    let operation = store.for_operation();
    let (ids, filter) = ([session], Default::default());
    // Concurrent statements of one operation: one holds the only connection, the others wait
    // for it to be parked again rather than for the pool.
    let (stages, tokens, sessions) = tokio::time::timeout(Duration::from_secs(10), async {
        tokio::join!(
            operation.stages_by_session(&ids),
            operation.tokens(true),
            operation.list_sessions(
                &filter,
                casefile::store::sessions::SessionSort::CreatedAt,
                true,
                &casefile::store::page::Slice {
                    after: None,
                    before: None,
                    size: 5,
                    from_end: false,
                },
            ),
        )
    })
    .await
    .expect("the operation's statements never wait on each other for good");
    assert_eq!(stages.unwrap()[&session].len(), 4);
    tokens.unwrap();
    assert_eq!(sessions.unwrap().rows.len(), 1);
    // Between statements the operation keeps its connection...
    assert_eq!((pool.size(), pool.num_idle()), (1, 0));
    // ...and the pool gets it back when the operation ends.
    drop(operation);
    let back = tokio::time::timeout(Duration::from_secs(10), pool.acquire()).await;
    assert!(back.is_ok(), "the connection went back to the pool");
    drop(back);
    db.stop().await;
}

#[tokio::test]
async fn a_connection_dropped_while_idle_is_replaced_before_use() {
    let db = TestDb::start().await;
    let Some(url) = db.url() else {
        eprintln!(
            "skipped: needs DATABASE_URL (the embedded database cannot end a backend from outside)"
        );
        db.stop().await;
        return;
    };
    let session = fixtures::investigation(db.db.pool(), Utc::now()).await;
    let store = store_on_one_connection(&db).await;
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(store.pool())
        .await
        .unwrap();
    // The server (or a proxy, or a failover) drops the idle connection.
    let mut admin = url
        .parse::<sqlx::postgres::PgConnectOptions>()
        .unwrap()
        .connect()
        .await
        .unwrap();
    let ended: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(pid)
        .fetch_one(&mut admin)
        .await
        .unwrap();
    assert!(ended);
    // Idle past the window: pinged, found dead, replaced; the read succeeds.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let stages = store.stages_by_session(&[session]).await.unwrap();
    assert_eq!(stages[&session].len(), 4);
    drop(admin);
    db.stop().await;
}
