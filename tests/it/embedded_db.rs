//! The embedded database survives its clients: a connection reset with its answer unread, or a
//! client gone in the middle of a message, used to stop pglite for good (every later connection
//! refused or left waiting). And nobody else on the machine can reach it.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use casefile::db::EmbeddedPostgres;
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions as _, Connection as _};

fn startup() -> Vec<u8> {
    let body = b"\0\x03\0\0user\0postgres\0database\0postgres\0\0";
    [&(body.len() as u32 + 4).to_be_bytes()[..], body].concat()
}

fn query(sql: &str) -> Vec<u8> {
    let body = [sql.as_bytes(), b"\0"].concat();
    [&[b'Q'][..], &(body.len() as u32 + 4).to_be_bytes(), &body].concat()
}

/// A raw client on the socket the pool uses, which sends `bytes` and leaves without reading.
fn careless_client(options: &PgConnectOptions, bytes: &[u8]) {
    let socket = options
        .get_socket()
        .expect("a Unix socket")
        .join(format!(".s.PGSQL.{}", options.get_port()));
    let mut stream = UnixStream::connect(socket).unwrap();
    stream.write_all(bytes).unwrap();
    // Long enough for the answer to arrive unread, so that closing resets the connection.
    std::thread::sleep(Duration::from_millis(1000));
}

async fn answers(options: &PgConnectOptions) -> i32 {
    let query = async {
        let mut conn = options.connect().await.unwrap();
        let one: i32 = sqlx::query_scalar("SELECT 1")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        conn.close().await.unwrap();
        one
    };
    tokio::time::timeout(Duration::from_secs(30), query)
        .await
        .expect("the embedded database answers")
}

#[tokio::test]
async fn careless_clients_do_not_stop_the_embedded_database() {
    let db = EmbeddedPostgres::start_temporary().await.unwrap();
    let options = db.connect_options();
    assert_eq!(answers(&options).await, 1);

    // An answer of a megabyte left unread, then the socket closed: a reset.
    let big = [startup(), query("SELECT repeat('x', 1000000)")].concat();
    tokio::task::spawn_blocking({
        let options = options.clone();
        move || careless_client(&options, &big)
    })
    .await
    .unwrap();
    assert_eq!(answers(&options).await, 1);

    // Gone after half a message.
    let half = [startup(), query("SELECT 1")[..6].to_vec()].concat();
    tokio::task::spawn_blocking({
        let options = options.clone();
        move || careless_client(&options, &half)
    })
    .await
    .unwrap();
    assert_eq!(answers(&options).await, 1);

    // Gone before its startup message was whole.
    let early = startup()[..3].to_vec();
    tokio::task::spawn_blocking({
        let options = options.clone();
        move || careless_client(&options, &early)
    })
    .await
    .unwrap();
    assert_eq!(answers(&options).await, 1);
    db.shutdown().await;
}

#[tokio::test]
async fn only_this_user_can_reach_the_embedded_database() {
    let db = EmbeddedPostgres::start_temporary().await.unwrap();
    let options = db.connect_options();
    let dir = options.get_socket().expect("a Unix socket, not a TCP port");
    let mode = std::fs::metadata(dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "{} is {mode:o}", dir.display());
    db.shutdown().await;
}
