//! The servers under test as child processes, and what `/proc` says about them.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::process;

/// A server process and where it answers GraphQL.
pub struct Server {
    pub name: &'static str,
    pub url: String,
    /// Sent as `Authorization: Bearer …` with every request.
    pub token: Option<String>,
    child: Child,
}

impl Server {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `casefile serve` with token authentication, on `--database-url URL` or `--data-dir DIR`.
    pub fn casefile(name: &'static str, database: [&str; 2], token: &str) -> Server {
        let args = [
            database[0],
            database[1],
            "--auth",
            "tokens",
            "--bootstrap-admin-token",
            token,
            // The deep query over 20 sessions costs more than the default limit allows.
            "--max-query-complexity",
            "100000000",
            // At 8 clients small queries go past the per-identity rate.
            "--rate-limit-per-second",
            "0",
        ];
        let (child, addr) = process::serve(args);
        Server {
            name,
            url: format!("http://{addr}/graphql"),
            token: Some(token.to_owned()),
            child,
        }
    }

    /// PostGraphile 5 through the shared start script (it installs itself on first use).
    pub async fn postgraphile(database_url: &str, port: u16) -> anyhow::Result<Server> {
        let log = std::fs::File::create(std::env::temp_dir().join("read-bench-postgraphile.log"))?;
        let child = Command::new("/work/shared/peers/postgraphile5/start.sh")
            .args([database_url, &port.to_string()])
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .spawn()?;
        let server = Server {
            name: "PG5",
            url: format!("http://127.0.0.1:{port}/graphql"),
            token: None,
            child,
        };
        let client = reqwest::Client::new();
        let started = Instant::now();
        loop {
            let answered = client
                .post(&server.url)
                .json(&serde_json::json!({ "query": "{ __typename }" }))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if answered {
                return Ok(server);
            }
            if started.elapsed() > Duration::from_secs(600) {
                anyhow::bail!(
                    "PostGraphile did not answer within 10 minutes (see {})",
                    std::env::temp_dir()
                        .join("read-bench-postgraphile.log")
                        .display()
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // start.sh execs node, so this pid is the server itself.
        process::sigterm(&self.child);
        let _ = self.child.wait();
    }
}

/// Clock ticks per second (for `/proc/<pid>/stat` times).
pub fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// utime + stime of a process (all its threads), in clock ticks; 0 once it is gone.
pub fn cpu_ticks(pid: u32) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    // Fields after the command name (which may hold spaces) start at the state, field 3.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    field(14).unwrap_or(0) + field(15).unwrap_or(0)
}
