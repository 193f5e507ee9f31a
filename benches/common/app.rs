//! The benchmarked server: casefile on a fresh database (embedded, or on the PostgreSQL at
//! `url`), with no fair-use limit on rate or concurrency (one client measuring capacity would
//! measure the limit), and with `token` (see `token.rs`) as its first admin when given, sent by
//! every request. On PostgreSQL its database is partitioned by session into `partitions` when
//! given (`common::partitions_per_table()` is what the environment asks for). Its other options
//! are the caller's.

use crate::common::{TestApp, TestDb};
use casefile::db::DatabaseArgs;
use casefile::http::HttpOptions;

pub async fn start(
    url: Option<String>,
    partitions: Option<u32>,
    token: Option<&str>,
    mut options: HttpOptions,
) -> TestApp {
    options.throttle.rate_limit_per_second = 0;
    // Hundreds of streams of one identity at once: as many as the process serves.
    options.throttle.max_concurrent_per_identity = options.throttle.max_concurrent_requests;
    if token.is_some() {
        options.auth.mode = casefile::auth::AuthMode::Tokens;
    }
    // The pool a server opens by default, not the tests' smaller one: writers queued on a
    // session's lock hold pool connections, and a benchmark should meet that as a server would.
    let pool = casefile::options::defaults::<DatabaseArgs>().db_max_connections;
    let mut app =
        TestApp::start_on(TestDb::start_pooled(url, pool, partitions).await, options).await;
    if let Some(token) = token {
        casefile::store::tokens::create_first_admin(
            app.store.pool(),
            "bench-admin",
            &casefile::auth::tokens::hash(token),
        )
        .await
        .unwrap();
        app.token = Some(token.to_owned());
    }
    app
}
