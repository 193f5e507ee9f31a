//! The test harness: a fresh database per test and the real server on port 0, spoken to over
//! HTTP like any client would.
//!
//! With `DATABASE_URL` set, each test gets a new database on that server (dropped afterwards);
//! without it, each test gets its own temporary embedded PostgreSQL.

#![allow(dead_code)] // each test binary uses a different part of the harness

pub mod cli;
pub mod fixtures;
pub mod multipart;
pub mod process;
pub mod rng;
pub mod served;
pub mod sse;
pub mod statements;
pub mod ws;

use std::net::SocketAddr;

use serde_json::{Value, json};
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions as _, Connection as _};

use casefile::db::{Database, DbTimeouts, EmbeddedPostgres};
use casefile::http::HttpOptions;
use casefile::server::Server;
use casefile::store::Store;

/// The `pg_stat_activity` rows of casefile's LISTEN connections: their last statement is the
/// LISTEN, or an announcement of the process's commits sent on them since.
pub const LISTEN_CONNECTIONS: &str = "(query ILIKE 'LISTEN%casefile_live%' \
     OR query LIKE 'SELECT pg_notify($1, $2)')";

/// Connections a test's pool may open to an external server.
const TEST_POOL: u32 = 5;

/// The hash partitions per distributed table of every external test database
/// (`CASEFILE_PARTITION_BY_SESSION`, as for `casefile migrate`): CI runs the suite once more on
/// the layout a distributed PostgreSQL imposes. The embedded database stays plain.
pub fn partitions_per_table() -> Option<u32> {
    let value = std::env::var("CASEFILE_PARTITION_BY_SESSION").ok()?;
    Some(
        value
            .parse()
            .expect("CASEFILE_PARTITION_BY_SESSION is a count"),
    )
}

/// SQL for the persistence of relation `alias` of `pg_class` (`p` logged, `u` unlogged). A
/// partitioned table's rows are its partitions', so its persistence is theirs, each kind
/// listed (PostgreSQL 18 refuses an unlogged partitioned table).
pub fn persistence_of(alias: &str) -> String {
    format!(
        "CASE {alias}.relkind \
             WHEN 'p' THEN (SELECT string_agg(DISTINCT p.relpersistence::text, ',') \
                 FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhrelid \
                 WHERE i.inhparent = {alias}.oid) \
             ELSE {alias}.relpersistence::text END"
    )
}

/// Whether `DATABASE_URL` names an external PostgreSQL; if not, says that the test, which
/// `needs` one, is skipped.
fn external_or_skipped(needs: &str) -> bool {
    let external = std::env::var("DATABASE_URL").is_ok_and(|url| !url.is_empty());
    if !external {
        eprintln!("skipped: {needs} needs an external PostgreSQL (DATABASE_URL)");
    }
    external
}

/// The name of a database on the server of `admin`, migrated by this binary's migrations and
/// partitioned into `partitions` (or plain), made once and kept: a test's database is a copy
/// of it, which takes a tenth of the time its migrations (and partitioning, ten times more)
/// take. Its name holds the migrations' checksums, and for a partitioned layout the conversion's
/// code and the tables it converts, so a change to either makes a new one.
async fn template(admin: &PgConnectOptions, partitions: Option<u32>) -> String {
    use std::hash::{Hash as _, Hasher as _};
    static MADE: tokio::sync::Mutex<Vec<String>> = tokio::sync::Mutex::const_new(Vec::new());

    let mut hasher = std::hash::DefaultHasher::new();
    for migration in casefile::db::MIGRATOR.iter() {
        (migration.version, &migration.checksum[..]).hash(&mut hasher);
    }
    if partitions.is_some() {
        include_str!("../../../src/store/partitioning.rs").hash(&mut hasher);
        format!("{:?}", casefile::distribution::Placements::documented()).hash(&mut hasher);
    }
    let layout = partitions.map_or("plain".to_owned(), |n| format!("p{n}"));
    let name = format!("casefile_template_{:016x}_{layout}", hasher.finish());
    let mut made = MADE.lock().await;
    if made.contains(&name) {
        return name;
    }
    // Processes (and runs) share the server: one makes it while the others wait, and one left
    // half made (its maker stopped) is made again. It is marked a template when complete.
    let mut conn = admin.connect().await.expect("connect to DATABASE_URL");
    sqlx::query("SELECT pg_advisory_lock(hashtext('casefile test templates'))")
        .execute(&mut conn)
        .await
        .unwrap();
    let complete: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1 AND datistemplate)",
    )
    .bind(&name)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    if !complete {
        for statement in [
            format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
            format!("CREATE DATABASE {name}"),
        ] {
            sqlx::query(&statement).execute(&mut conn).await.unwrap();
        }
        let db = Database::external_with(
            admin.clone().database(&name),
            TEST_POOL,
            &DbTimeouts::default(),
        )
        .await
        .unwrap();
        lay_out(&db, partitions).await;
        // A copy is refused while anyone is connected to it.
        db.shutdown().await;
        sqlx::query(&format!("ALTER DATABASE {name} IS_TEMPLATE true"))
            .execute(&mut conn)
            .await
            .unwrap();
    }
    conn.close().await.unwrap();
    made.push(name.clone());
    name
}

/// Migrates `db` and partitions its distributed tables into `partitions` (or leaves it plain).
async fn lay_out(db: &Database, partitions: Option<u32>) {
    db.migrate().await.expect("migrations apply");
    if let Some(partitions) = partitions {
        casefile::distribution::partition_by_session(&Store::new(db.pool().clone()), partitions)
            .await
            .expect("the distributed tables partition by session");
    }
}

/// A fresh, migrated database that removes itself on [`TestDb::stop`], or when dropped.
pub struct TestDb {
    pub db: Database,
    /// Where it lives when on an external server.
    external: Option<ExternalDb>,
}

/// A test's database on the external server: dropped from the server with it, so that a test
/// that returns or panics before [`TestDb::stop`] leaves nothing behind.
struct ExternalDb {
    admin: PgConnectOptions,
    name: String,
    dropped: bool,
}

impl ExternalDb {
    async fn remove(mut self) {
        drop_database(&self.admin, &self.name).await;
        self.dropped = true;
    }
}

impl Drop for ExternalDb {
    fn drop(&mut self) {
        if self.dropped {
            return;
        }
        // A runtime of its own on a thread of its own: the test's may be the one dropping this
        // (or gone), and a panic here would abort a test that is already panicking.
        let admin = self.admin.clone();
        let name = std::mem::take(&mut self.name);
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(drop_database(&admin, &name));
        })
        .join();
        if dropped.is_err() {
            eprintln!("a test database was left on the server");
        }
    }
}

/// Drops the database `name` of the server of `admin`, connections and all.
async fn drop_database(admin: &PgConnectOptions, name: &str) {
    let mut conn = admin.connect().await.unwrap();
    sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
}

impl TestDb {
    pub async fn start() -> TestDb {
        Self::start_on(std::env::var("DATABASE_URL").ok()).await
    }

    /// A fresh database whose pooled connections set these timeouts on themselves.
    pub async fn start_with(timeouts: DbTimeouts) -> TestDb {
        Self::start_sized(std::env::var("DATABASE_URL").ok(), timeouts, TEST_POOL).await
    }

    /// A fresh database on the PostgreSQL at `url`, or embedded when `None` (or empty).
    pub async fn start_on(url: Option<String>) -> TestDb {
        Self::start_sized(url, DbTimeouts::default(), TEST_POOL).await
    }

    /// As [`TestDb::start_on`], with a pool of `max_connections` to an external server (the
    /// tests' is smaller than a server's; a benchmark wants the server's), partitioned into
    /// `partitions` there (a benchmark may want both layouts side by side).
    pub async fn start_pooled(
        url: Option<String>,
        max_connections: u32,
        partitions: Option<u32>,
    ) -> TestDb {
        Self::start_laid_out(url, DbTimeouts::default(), max_connections, partitions).await
    }

    /// A fresh database on the external PostgreSQL of `DATABASE_URL` (embedded without it),
    /// never partitioned by session, whatever `CASEFILE_PARTITION_BY_SESSION` says.
    pub async fn start_plain() -> TestDb {
        let url = std::env::var("DATABASE_URL").ok();
        Self::start_laid_out(url, DbTimeouts::default(), TEST_POOL, None).await
    }

    /// [`TestDb::start_plain`] on the external PostgreSQL; without `DATABASE_URL` it says that
    /// the test, which `needs` it, is skipped, and returns `None`.
    pub async fn start_plain_external(needs: &str) -> Option<TestDb> {
        if !external_or_skipped(needs) {
            return None;
        }
        Some(Self::start_plain().await)
    }

    async fn start_sized(
        url: Option<String>,
        timeouts: DbTimeouts,
        max_connections: u32,
    ) -> TestDb {
        Self::start_laid_out(url, timeouts, max_connections, partitions_per_table()).await
    }

    /// A fresh database, its distributed tables partitioned into `partitions` when it lives on
    /// an external server.
    async fn start_laid_out(
        url: Option<String>,
        timeouts: DbTimeouts,
        max_connections: u32,
        partitions: Option<u32>,
    ) -> TestDb {
        let (db, external) = match url {
            Some(url) if !url.is_empty() => {
                let admin: PgConnectOptions = url.parse().expect("DATABASE_URL parses");
                let template = template(&admin, partitions).await;
                let name = format!("casefile_test_{}", uuid::Uuid::new_v4().simple());
                let mut conn = admin.connect().await.expect("connect to DATABASE_URL");
                sqlx::query(&format!("CREATE DATABASE {name} TEMPLATE {template}"))
                    .execute(&mut conn)
                    .await
                    .unwrap();
                conn.close().await.unwrap();
                let db = Database::external_with(
                    admin.clone().database(&name),
                    max_connections,
                    &timeouts,
                )
                .await
                .unwrap();
                let external = ExternalDb {
                    admin: admin.clone(),
                    name,
                    dropped: false,
                };
                (db, Some(external))
            }
            _ => {
                let server = EmbeddedPostgres::start_temporary()
                    .await
                    .expect("embedded database");
                (Database::embedded(server, &timeouts).await.unwrap(), None)
            }
        };
        // On a copy of a template this checks that its migrations are this binary's, and that
        // its tables are partitioned as asked, and changes nothing. The embedded database
        // stays plain.
        lay_out(&db, partitions.filter(|_| external.is_some())).await;
        TestDb { db, external }
    }

    /// The URL of this database when it lives on an external server (other processes can
    /// connect to it); `None` when embedded.
    pub fn url(&self) -> Option<String> {
        let name = &self.external.as_ref()?.name;
        let url = std::env::var("DATABASE_URL").ok()?;
        let (base, query) = url
            .split_once('?')
            .map_or((url.as_str(), None), |(b, q)| (b, Some(q)));
        let server = &base[..base.rfind('/')?];
        Some(match query {
            Some(q) => format!("{server}/{name}?{q}"),
            None => format!("{server}/{name}"),
        })
    }

    pub fn store(&self) -> Store {
        Store::new(self.db.pool().clone())
    }

    /// The same database on a new pool: its connections take up settings made since
    /// (`ALTER DATABASE … SET`).
    pub async fn reconnected(self) -> TestDb {
        let TestDb { db, external } = self;
        db.shutdown().await;
        let ExternalDb { admin, name, .. } = external
            .as_ref()
            .expect("only an external database is reconnected");
        let db = Database::external_with(
            admin.clone().database(name),
            TEST_POOL,
            &DbTimeouts::default(),
        )
        .await
        .unwrap();
        TestDb { db, external }
    }

    pub async fn stop(self) {
        self.db.shutdown().await;
        if let Some(external) = self.external {
            external.remove().await;
        }
    }
}

/// The real server on a fresh database.
pub struct TestApp {
    pub db: TestDb,
    pub store: Store,
    pub addr: SocketAddr,
    pub client: reqwest::Client,
    /// Sent as `Authorization: Bearer …` by [`TestApp::graphql`] when set.
    pub token: Option<String>,
    server: Server,
}

impl TestApp {
    pub async fn start() -> TestApp {
        Self::start_with(HttpOptions::default()).await
    }

    pub async fn start_with(options: HttpOptions) -> TestApp {
        Self::start_on(TestDb::start().await, options).await
    }

    /// The server on a fresh database of the external PostgreSQL, and that database's URL (for
    /// other connections and processes). Without `DATABASE_URL` it says that the test, which
    /// `needs` it, is skipped, and returns `None`: the embedded database serves one process.
    pub async fn start_external(needs: &str) -> Option<(TestApp, String)> {
        if !external_or_skipped(needs) {
            return None;
        }
        let app = Self::start().await;
        let url = app.db.url().expect("an external database has a URL");
        Some((app, url))
    }

    /// The server on a database the caller started.
    pub async fn start_on(db: TestDb, options: HttpOptions) -> TestApp {
        let store = db.store();
        let server = Server::start(store.clone(), &options, "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        TestApp {
            addr: server.addr(),
            db,
            store,
            // Idle connections are dropped before the server's header-read timeout (10 s) would
            // close them: a request sent on one as the server closes it fails to send.
            client: reqwest::Client::builder()
                .pool_idle_timeout(std::time::Duration::from_secs(5))
                .build()
                .unwrap(),
            token: None,
            server,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// POSTs a query; returns the whole JSON body (data and errors).
    pub async fn graphql(&self, query: &str, variables: Value) -> Value {
        let mut request = self
            .client
            .post(self.url("/graphql"))
            .json(&json!({ "query": query, "variables": variables }));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.expect("request succeeds");
        response.json().await.expect("JSON body")
    }

    /// POSTs a query that must succeed; returns its `data`.
    pub async fn data(&self, query: &str, variables: Value) -> Value {
        let body = self.graphql(query, variables).await;
        assert!(body.get("errors").is_none(), "unexpected errors: {body:#}");
        body["data"].clone()
    }

    /// The global ids of the newest `first` sessions.
    pub async fn session_ids(&self, first: usize) -> Vec<Value> {
        let query = "query($first: Int!) { sessions(first: $first) { edges { node { id } } } }";
        let listed = self.data(query, json!({ "first": first })).await;
        nodes(&listed["sessions"])
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["id"].clone())
            .collect()
    }

    /// POSTs a query that must fail; returns the first error's code and message.
    pub async fn error(&self, query: &str, variables: Value) -> (String, String) {
        let body = self.graphql(query, variables).await;
        let error = &body["errors"][0];
        assert!(error.is_object(), "expected an error: {body:#}");
        (
            error["extensions"]["code"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            error["message"].as_str().unwrap_or_default().to_owned(),
        )
    }

    /// Holds every connection the pool can give (listeners keep some of its places for good), so
    /// that requests wait for one: a deterministic way to keep an operation running.
    pub async fn hold_the_pool(&self) -> Vec<sqlx::pool::PoolConnection<sqlx::Postgres>> {
        let pool = self.store.pool();
        let mut held = Vec::new();
        while let Ok(Ok(connection)) =
            tokio::time::timeout(std::time::Duration::from_millis(300), pool.acquire()).await
        {
            held.push(connection);
        }
        assert!(!held.is_empty());
        held
    }

    /// Stores an API token the way `casefile token create` does; returns its secret.
    pub async fn token(
        &self,
        name: &str,
        role: casefile::model::Role,
        expires_at: Option<chrono::DateTime<chrono::Utc>>,
    ) -> String {
        let secret = casefile::auth::tokens::generate_secret();
        let mut tx = self.store.pool().begin().await.unwrap();
        casefile::store::tokens::create(
            &mut tx,
            &casefile::store::tokens::NewToken {
                name,
                role,
                secret_hash: &casefile::auth::tokens::hash(&secret),
                expires_at,
                created_by: None,
            },
            &casefile::store::audit::Origin {
                action: "createApiToken".to_owned(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
        secret
    }

    pub async fn stop(self) {
        let TestApp {
            db,
            store,
            server,
            client,
            ..
        } = self;
        drop(client);
        server.stop().await;
        drop(store);
        db.stop().await;
    }
}

/// The nodes of a connection in an answer, as one list: what a whole relationship holds when
/// the page asked for all of it.
pub fn nodes(connection: &Value) -> Value {
    let edges = connection["edges"].as_array();
    let edges = edges.unwrap_or_else(|| panic!("not a connection: {connection}"));
    Value::Array(edges.iter().map(|e| e["node"].clone()).collect())
}

/// Who restores records in the tests, for their audit records.
pub fn restorer() -> casefile::store::audit::Origin {
    casefile::store::audit::Origin {
        action: "restore".to_owned(),
        ..Default::default()
    }
}

/// Options of a server that requires API tokens.
pub fn tokens_mode() -> casefile::http::HttpOptions {
    casefile::http::HttpOptions {
        auth: casefile::auth::AuthOptions {
            mode: casefile::auth::AuthMode::Tokens,
            ..Default::default()
        },
        ..Default::default()
    }
}
