//! Export and import benchmark: `casefile export` and `casefile import` as a person runs them
//! (the release binary, on the local PostgreSQL), over the read benchmark's data set (the demo
//! and copies of it, LLM payloads of 20-60 KB, one session with 27 MB of prompts). Prints, for
//! each run, sessions per second and the process's peak RSS (`/usr/bin/time`): the bulk export
//! of every session, the export of one small session and of the 27 MB one (the memory of an
//! export should not grow with the session's size), and the import of the bulk file into an
//! empty database. Asserts nothing about speed.
//!
//!     DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres cargo bench --bench export
//!     cargo bench --bench export -- --copies 45     # 22 × 46 sessions (default: about 1,000)
//!
//! Needs an external PostgreSQL and GNU time; without them it says so and measures nothing.

#[path = "common/args.rs"]
mod args;
#[allow(dead_code)] // the read benchmark's data set; this one builds it externally only
#[path = "read/dataset.rs"]
mod dataset;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use sqlx::PgPool;

use args::arg;

/// What one run of the binary took: seconds, and its peak resident memory.
struct Run {
    seconds: f64,
    peak_mb: f64,
}

/// Runs `casefile args…` on the database at `url`, under GNU time.
fn casefile(url: &str, args: &[&str]) -> Run {
    let report = std::env::temp_dir().join(format!("casefile-bench-time-{}", std::process::id()));
    let started = Instant::now();
    let status = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&report)
        .arg(env!("CARGO_BIN_EXE_casefile"))
        .args(args)
        .env("DATABASE_URL", url)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("casefile runs");
    let seconds = started.elapsed().as_secs_f64();
    assert!(status.success(), "casefile {args:?} failed");
    let kb: f64 = std::fs::read_to_string(&report)
        .expect("GNU time's report")
        .trim()
        .lines()
        .last()
        .and_then(|line| line.trim().parse().ok())
        .expect("a peak RSS in KB");
    let _ = std::fs::remove_file(report);
    Run {
        seconds,
        peak_mb: kb / 1024.0,
    }
}

fn size_mb(path: &Path) -> f64 {
    std::fs::metadata(path).map_or(0.0, |m| m.len() as f64 / 1e6)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Ok(admin) = std::env::var("DATABASE_URL") else {
        println!("export benchmark SKIPPED: set DATABASE_URL to a local PostgreSQL");
        return Ok(());
    };
    if !Path::new("/usr/bin/time").exists() {
        println!("export benchmark SKIPPED: /usr/bin/time (GNU time) is missing");
        return Ok(());
    }
    let copies = arg("--copies", 45);
    let url = dataset::external(
        &admin,
        "casefile_bench_export",
        copies,
        true,
        dataset::Payloads::Padded,
    )
    .await?;
    let pool = PgPool::connect(&url).await?;
    println!("data set: {}", dataset::volume(&pool).await?);
    let sessions: i64 = sqlx::query_scalar("SELECT count(*) FROM sessions")
        .fetch_one(&pool)
        .await?;
    let big = dataset::big_session(&pool).await?;
    // An export holds a row at a time: the largest row bounds its memory, not the session.
    let (rows, largest): (i64, i64) = sqlx::query_as(
        "SELECT count(*), max(octet_length(llm_request::text))::bigint FROM llm_interactions \
         WHERE session_id = $1",
    )
    .bind(big)
    .fetch_one(&pool)
    .await?;
    let small: uuid::Uuid = sqlx::query_scalar(
        "SELECT s.id FROM sessions s JOIN llm_interactions l ON l.session_id = s.id \
         GROUP BY s.id ORDER BY sum(octet_length(l.llm_request::text)), s.id LIMIT 1",
    )
    .fetch_one(&pool)
    .await?;
    pool.close().await;

    let dir = std::env::temp_dir().join(format!("casefile-bench-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let all = dir.join("all.ndjson");
    let include_deleted = r#"{"includeDeleted": true}"#;
    let bulk = casefile(
        &url,
        &[
            "export",
            "--filter",
            include_deleted,
            "--output",
            all.to_str().unwrap(),
        ],
    );
    println!(
        "bulk export:  {sessions} sessions in {:.1} s ({:.0} sessions/s), {:.0} MB written; peak RSS {:.1} MB",
        bulk.seconds,
        sessions as f64 / bulk.seconds,
        size_mb(&all),
        bulk.peak_mb
    );
    println!(
        "(the 27 MB session: {rows} LLM interactions, the largest prompt {:.1} MB)",
        largest as f64 / 1e6
    );
    for (what, session) in [("small session", small), ("27 MB session", big)] {
        let one = dir.join(format!("{session}.json"));
        let run = casefile(
            &url,
            &[
                "export",
                "--session",
                &session.to_string(),
                "--output",
                one.to_str().unwrap(),
            ],
        );
        println!(
            "export of the {what}: {:.2} MB in {:.2} s; peak RSS {:.1} MB",
            size_mb(&one),
            run.seconds,
            run.peak_mb
        );
    }

    // Import into an empty database.
    let (base, _) = admin.rsplit_once('/').expect("a URL with a database");
    let target = format!("{base}/casefile_bench_import");
    let admin_pool = PgPool::connect(&admin).await?;
    sqlx::query("DROP DATABASE IF EXISTS casefile_bench_import WITH (FORCE)")
        .execute(&admin_pool)
        .await?;
    sqlx::query("CREATE DATABASE casefile_bench_import")
        .execute(&admin_pool)
        .await?;
    casefile(&target, &["migrate"]);
    let import = casefile(&target, &["import", all.to_str().unwrap()]);
    println!(
        "import:       {sessions} sessions in {:.1} s ({:.0} sessions/s); peak RSS {:.1} MB",
        import.seconds,
        sessions as f64 / import.seconds,
        import.peak_mb
    );
    sqlx::query("DROP DATABASE IF EXISTS casefile_bench_import WITH (FORCE)")
        .execute(&admin_pool)
        .await?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
