//! The data set: casefile's schema, the demo sessions, then copies of them made in SQL (new ids,
//! every foreign key remapped the same way), with LLM payloads of realistic size and one session
//! whose payloads are multi-megabyte.

use std::path::Path;
use std::time::Instant;

use anyhow::Context as _;
use sqlx::{Executor as _, PgPool};

use casefile::db::DbTimeouts;
use casefile::db::{Database, EmbeddedPostgres};
use casefile::store::Store;

/// Tables that hold a session's records, parents first. Tokens, receipts and the change log are
/// not copied: no read touches them.
const TABLES: [&str; 11] = [
    "sessions",
    "session_status_changes",
    "chats",
    "chat_user_messages",
    "stages",
    "agent_executions",
    "messages",
    "tool_calls",
    "llm_interactions",
    "mcp_interactions",
    "timeline_events",
];

/// What the data set holds.
pub struct Volume {
    pub sessions: i64,
    pub events: i64,
    pub messages: i64,
    pub llm: i64,
    pub mcp: i64,
    /// Bytes of LLM requests and responses as JSON text.
    pub payload_bytes: i64,
    /// The database on disk (TOAST compresses the payloads).
    pub database_bytes: i64,
}

impl std::fmt::Display for Volume {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} sessions, {} timeline events, {} messages, {} LLM interactions, {} MCP interactions, {:.1} MB of LLM request/response JSON; database {:.1} MB on disk",
            self.sessions,
            self.events,
            self.messages,
            self.llm,
            self.mcp,
            self.payload_bytes as f64 / 1e6,
            self.database_bytes as f64 / 1e6
        )
    }
}

/// A PostgreSQL computed column (PostGraphile's idiom for a derived relation): the messages sent
/// in an LLM interaction, as casefile's `LLMInteraction.conversationConnection` pages them.
/// casefile does not use it; it lets PostGraphile serve the same debug tab.
const CONVERSATION_FUNCTION: &str = "CREATE OR REPLACE FUNCTION llm_interactions_conversation(i llm_interactions) \
     RETURNS SETOF messages LANGUAGE sql STABLE AS $$ \
     SELECT m.* FROM messages m \
     WHERE m.execution_id = i.execution_id \
       AND m.sequence_number <= (SELECT l.sequence_number FROM messages l WHERE l.id = i.last_message_id) \
     ORDER BY m.sequence_number $$";

/// How large the copies' LLM payloads are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payloads {
    /// The demo's own (a few hundred bytes), where per-request and per-statement costs show.
    Demo,
    /// Padded to 20-60 KB, with one session of multi-megabyte prompts, where JSON handling
    /// dominates.
    Padded,
}

impl Payloads {
    pub fn name(self) -> &'static str {
        match self {
            Payloads::Demo => "demo-sized payloads",
            Payloads::Padded => "payloads padded to 20-60 KB",
        }
    }
}

/// The hash partitions per distributed table of the external database
/// (`CASEFILE_PARTITION_BY_SESSION`, as for `casefile migrate` and the tests), if set.
pub fn partitions() -> anyhow::Result<Option<u32>> {
    std::env::var("CASEFILE_PARTITION_BY_SESSION")
        .ok()
        .map(|n| {
            n.parse()
                .context("CASEFILE_PARTITION_BY_SESSION is a count")
        })
        .transpose()
}

/// Creates (or, with `reuse`, keeps) database `name` on the server of `admin_url`, filled with
/// the demo and `copies` copies of it, its distributed tables partitioned by session when
/// [`partitions`] says so. Returns the database's URL.
pub async fn external(
    admin_url: &str,
    name: &str,
    copies: u32,
    reuse: bool,
    payloads: Payloads,
) -> anyhow::Result<String> {
    let admin = PgPool::connect(admin_url)
        .await
        .context("cannot connect to the local PostgreSQL")?;
    let (base, _) = admin_url
        .rsplit_once('/')
        .context("a URL with a database")?;
    let url = format!("{base}/{name}");
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)")
            .bind(name)
            .fetch_one(&admin)
            .await?;
    if reuse && exists {
        let pool = PgPool::connect(&url).await?;
        let sessions: i64 = sqlx::query_scalar("SELECT count(*) FROM sessions")
            .fetch_one(&pool)
            .await
            .unwrap_or(0);
        if sessions > 8 {
            pool.execute(CONVERSATION_FUNCTION).await?;
            // The admin token of an earlier run would keep this run's from being bootstrapped.
            pool.execute("DELETE FROM api_tokens").await?;
            println!("reusing database {name}");
            return Ok(url);
        }
    }
    admin
        .execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str())
        .await?;
    admin
        .execute(format!("CREATE DATABASE {name}").as_str())
        .await?;
    let db = Database::external(&url, 2, &DbTimeouts::default()).await?;
    db.migrate().await?;
    let store = Store::new(db.pool().clone());
    if let Some(n) = partitions()? {
        casefile::distribution::partition_by_session(&store, n).await?;
    }
    let started = Instant::now();
    casefile::demo::load(&store)
        .await
        .map_err(|e| anyhow::anyhow!("loading the demo: {e}"))?;
    drop(store);
    db.shutdown().await;
    // A plain pool: the copies take longer than casefile's statement timeout allows.
    let pool = PgPool::connect(&url).await?;
    multiply(&pool, copies, payloads, true).await?;
    pool.execute(CONVERSATION_FUNCTION).await?;
    pool.execute("VACUUM ANALYZE").await?;
    println!("  built {name} in {:.0} s", started.elapsed().as_secs_f64());
    Ok(url)
}

/// Builds an embedded database in `dir` (in this process), the same way on a smaller scale,
/// then shuts it down cleanly so `casefile serve --data-dir` can open it.
pub async fn embedded(dir: &Path, copies: u32) -> anyhow::Result<Volume> {
    let _ = std::fs::remove_dir_all(dir);
    let server = EmbeddedPostgres::start_in(dir.to_path_buf()).await?;
    let db = Database::embedded(server, &DbTimeouts::default()).await?;
    db.migrate().await?;
    let store = Store::new(db.pool().clone());
    casefile::demo::load(&store)
        .await
        .map_err(|e| anyhow::anyhow!("loading the demo: {e}"))?;
    drop(store);
    multiply(db.pool(), copies, Payloads::Padded, false).await?;
    db.pool().execute("VACUUM ANALYZE").await?;
    let volume = volume(db.pool()).await?;
    db.shutdown().await;
    Ok(volume)
}

pub async fn volume(pool: &PgPool) -> anyhow::Result<Volume> {
    let (sessions, events, messages, llm, mcp, payload_bytes, database_bytes) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM timeline_events), \
                (SELECT count(*) FROM messages), (SELECT count(*) FROM llm_interactions), \
                (SELECT count(*) FROM mcp_interactions), \
                (SELECT coalesce(sum(octet_length(llm_request::text) + octet_length(llm_response::text)), 0)::bigint \
                 FROM llm_interactions), pg_database_size(current_database())",
    )
    .fetch_one(pool)
    .await?;
    Ok(Volume {
        sessions,
        events,
        messages,
        llm,
        mcp,
        payload_bytes,
        database_bytes,
    })
}

/// The copy of a column's value in copy `k`: ids (and so every foreign key) hashed with `k`,
/// timestamps moved back by `k` times a few minutes (so copies sort as older sessions), feed
/// positions moved past the demo's, LLM payloads padded to tens of KB if `payloads` says so.
fn copy_expr(table: &str, column: &str, ty: &str, payloads: Payloads) -> String {
    let padded = payloads == Payloads::Padded;
    match (table, column, ty) {
        (_, _, "uuid") => format!("md5({column}::text || '/' || k)::uuid"),
        (_, _, "timestamp with time zone") => format!("{column} - k * interval '7 minutes'"),
        // The feed's positions are unique: copy k takes the k-th block past the demo's.
        ("session_status_changes", "feed_position", _) => {
            "feed_position + k * (SELECT max(feed_position) FROM session_status_changes)".into()
        }
        ("llm_interactions", "llm_request", _) if padded => {
            "llm_request || jsonb_build_object('system', (SELECT txt FROM bench_pad \
             WHERE i = abs(hashtext(id::text || k)) % 64))"
                .into()
        }
        ("llm_interactions", "llm_response", _) if padded => {
            "llm_response || jsonb_build_object('output_text', (SELECT txt FROM bench_pad \
             WHERE i = abs(hashtext(k || id::text)) % 64))"
                .into()
        }
        _ => column.into(),
    }
}

/// Copies every demo row `copies` times, triggers off (no change-log rows, no status-history
/// rows beyond the copied ones, no foreign-key checks: the ids are remapped consistently). With
/// padded payloads, `big_session` gives one session multi-megabyte prompts.
async fn multiply(
    pool: &PgPool,
    copies: u32,
    payloads: Payloads,
    big_session: bool,
) -> anyhow::Result<()> {
    let mut conn = pool.acquire().await?;
    let started = Instant::now();
    // Streaming events show their chunks through a view PostGraphile does not follow: fold them
    // in, so both servers read the same content from the same column.
    conn.execute(
        "UPDATE timeline_events e SET content = l.content \
         FROM timeline_events_live l WHERE l.id = e.id AND e.status = 'streaming'; \
         DELETE FROM timeline_event_chunks",
    )
    .await?;
    // 64 prompt-like texts of 20-60 KB: words with hex ids mixed in, so TOAST compresses them
    // about as well as real prompts (a repeated sentence would shrink to nothing).
    conn.execute(
        "DROP TABLE IF EXISTS bench_pad; \
         CREATE TABLE bench_pad AS SELECT i, ( \
           SELECT string_agg(CASE WHEN j % 5 = 0 THEN md5(i || '/' || j) \
                  ELSE (ARRAY['pod','namespace','container','memory','limit','restarted','the', \
                        'kubectl','deployment','rollout','probe','failed','node','pressure','of', \
                        'image','payments','check','logs','error','events','service','to','and'])\
                       [1 + abs(hashtext(i || ':' || j)) % 24] END, ' ') \
           FROM generate_series(1, 1800 + i * 55) j) AS txt \
         FROM generate_series(0, 63) i",
    )
    .await?;
    conn.execute("SET session_replication_role = replica")
        .await?;
    for table in TABLES {
        let columns: Vec<(String, String)> = sqlx::query_as(
            "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) \
             FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum \
             WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped \
               AND a.attgenerated = '' \
               AND coalesce(pg_get_expr(d.adbin, d.adrelid), '') NOT LIKE 'nextval%' \
             ORDER BY a.attnum",
        )
        .bind(table)
        .fetch_all(&mut *conn)
        .await?;
        let names: Vec<&str> = columns.iter().map(|(n, _)| n.as_str()).collect();
        let exprs: Vec<String> = columns
            .iter()
            .map(|(n, t)| copy_expr(table, n, t, payloads))
            .collect();
        let sql = format!(
            "INSERT INTO {table} ({}) SELECT {} FROM {table} CROSS JOIN generate_series(1, {copies}) k",
            names.join(", "),
            exprs.join(", ")
        );
        conn.execute(sql.as_str()).await?;
    }
    if big_session && payloads == Payloads::Padded {
        // The session with the most LLM interactions gets multi-megabyte prompts, about
        // 27 MB in all (under casefile's 32 MiB response limit).
        conn.execute(
            "WITH s AS (SELECT session_id, count(*) AS n FROM llm_interactions \
                        WHERE session_id NOT IN (SELECT id FROM sessions WHERE deleted_at IS NOT NULL) \
                        GROUP BY session_id ORDER BY count(*) DESC, session_id LIMIT 1), \
                  big AS (SELECT string_agg(txt, ' ') AS txt FROM bench_pad) \
             UPDATE llm_interactions l \
             SET llm_request = l.llm_request || jsonb_build_object('system', \
                 left(repeat(big.txt, 10), (27000000 / s.n)::int)) \
             FROM s, big WHERE l.session_id = s.session_id",
        )
        .await?;
    }
    conn.execute("RESET session_replication_role; DROP TABLE bench_pad")
        .await?;
    println!(
        "  {copies} copies of the demo made in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The session whose LLM payloads are largest (the multi-megabyte one).
pub async fn big_session(pool: &PgPool) -> anyhow::Result<uuid::Uuid> {
    Ok(sqlx::query_scalar(
        "SELECT session_id FROM llm_interactions GROUP BY session_id \
         ORDER BY sum(pg_column_size(llm_request)) DESC LIMIT 1",
    )
    .fetch_one(pool)
    .await?)
}

/// Sessions the requests rotate over, the same for both servers (not deleted, not the big one).
pub async fn rotation(pool: &PgPool, n: i64, big: uuid::Uuid) -> anyhow::Result<Vec<uuid::Uuid>> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM sessions WHERE deleted_at IS NULL AND id <> $1 \
         ORDER BY md5(id::text) LIMIT $2",
    )
    .bind(big)
    .bind(n)
    .fetch_all(pool)
    .await?)
}
