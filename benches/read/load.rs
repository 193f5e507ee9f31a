//! A closed-loop load generator: each client has one keep-alive connection and sends its next
//! request when the previous answer has been read in full. Setup requests go through reqwest
//! ([`Client`]); timed load through bare hyper connections.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::http_load::{Connection, Outcome, Run};
use crate::servers::Server;

/// A client bound to one server: one connection, its token on every request.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    url: String,
    token: Option<String>,
}

impl Client {
    pub fn new(server: &Server) -> Client {
        Client {
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(1)
                .timeout(Duration::from_secs(60))
                .build()
                .unwrap(),
            url: server.url.clone(),
            token: server.token.clone(),
        }
    }

    async fn send(&self, body: &str) -> Result<bytes::Bytes, String> {
        let mut request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .body(body.to_owned());
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(|e| e.to_string())?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| e.to_string())?;
        if !status.is_success() {
            return Err(format!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(300)])
            ));
        }
        Ok(bytes)
    }

    /// The parsed response, or why it failed (HTTP status or GraphQL errors).
    pub async fn json(&self, body: &str) -> Result<serde_json::Value, String> {
        let bytes = self.send(body).await?;
        let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
        match value.get("errors") {
            Some(errors) => Err(format!("GraphQL errors: {errors}")),
            None => Ok(value),
        }
    }
}

/// Where timed load goes.
struct Target {
    url: String,
    token: Option<String>,
}

impl Target {
    async fn connect(&self) -> Result<Connection, String> {
        Connection::open(&self.url, self.token.as_deref()).await
    }
}

/// `clients` clients send `bodies` in turn (each starting at its own place in the list) for
/// `duration`. Each client gets its own connection; all run on one thread of their own.
pub async fn run(
    server: &Server,
    bodies: Arc<Vec<String>>,
    clients: usize,
    duration: Duration,
) -> Run {
    let bodies: Arc<Vec<Bytes>> = Arc::new(bodies.iter().map(|b| Bytes::from(b.clone())).collect());
    let target = Target {
        url: server.url.clone(),
        token: server.token.clone(),
    };
    let thread = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(run_on_this_thread(&target, bodies, clients, duration))
    });
    tokio::task::spawn_blocking(move || thread.join().unwrap())
        .await
        .unwrap()
}

async fn run_on_this_thread(
    server: &Target,
    bodies: Arc<Vec<Bytes>>,
    clients: usize,
    duration: Duration,
) -> Run {
    let mut connections = Vec::with_capacity(clients);
    for _ in 0..clients {
        match server.connect().await {
            Ok(connection) => connections.push(connection),
            Err(why) => {
                return Run {
                    failures: 1,
                    first_failure: Some(why),
                    ..Run::default()
                };
            }
        }
    }
    let started = Instant::now();
    let deadline = started + duration;
    let workers = connections
        .into_iter()
        .enumerate()
        .map(|(c, mut connection)| {
            let bodies = bodies.clone();
            async move {
                let mut run = Run::default();
                let mut i = c * bodies.len() / clients.max(1);
                while Instant::now() < deadline {
                    let sent = Instant::now();
                    match connection.send(bodies[i % bodies.len()].clone()).await {
                        Outcome::Ok(bytes) => {
                            run.latencies_us.push(sent.elapsed().as_micros() as u64);
                            run.bytes += bytes.len() as u64;
                        }
                        Outcome::Failed(why) => {
                            run.failed(why);
                            // The connection may be gone: start a new one.
                            match server.connect().await {
                                Ok(fresh) => connection = fresh,
                                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                            }
                        }
                    }
                    i += 1;
                }
                run
            }
        });
    let runs = futures::future::join_all(workers).await;
    Run::joined(runs, started.elapsed())
}
