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
