//! CPU time spent, read from `/proc` in clock ticks: of a process, of the calling thread, and
//! of the backends PostgreSQL runs for one database (when it runs on this machine).

use std::collections::HashMap;
use std::process::Command;

use sqlx::PgPool;

/// Clock ticks per second (`getconf CLK_TCK`, 100 unless told).
pub fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// Milliseconds in `ticks` clock ticks.
pub fn ticks_ms(ticks: u64) -> f64 {
    ticks as f64 * 1000.0 / clock_ticks()
}

/// utime + stime of a process (all its threads), in clock ticks; 0 once it is gone.
pub fn process_ticks(pid: u32) -> u64 {
    stat_ticks(&format!("/proc/{pid}/stat"))
}

/// utime + stime of the calling thread alone, in clock ticks.
pub fn thread_ticks() -> u64 {
    stat_ticks("/proc/thread-self/stat")
}

fn stat_ticks(path: &str) -> u64 {
    let Ok(stat) = std::fs::read_to_string(path) else {
        return 0;
    };
    // Fields after the command name (which may hold spaces) start at the state, field 3.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    field(14).unwrap_or(0) + field(15).unwrap_or(0)
}

/// CPU ticks of one database's backends at one moment (the connection asking excluded).
pub struct Backends(HashMap<u32, u64>);

impl Backends {
    pub async fn of(pool: &PgPool, database: &str) -> Backends {
        let pids: Vec<i32> = sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
        )
        .bind(database)
        .fetch_all(pool)
        .await
        .unwrap_or_default();
        Backends(
            pids.into_iter()
                .map(|p| (p as u32, process_ticks(p as u32)))
                .collect(),
        )
    }

    /// Ticks spent since `before` by the backends alive now (new ones from zero).
    pub fn since(&self, before: &Backends) -> u64 {
        self.0
            .iter()
            .map(|(pid, ticks)| ticks.saturating_sub(*before.0.get(pid).unwrap_or(&0)))
            .sum()
    }
}
