//! A closed-loop load generator: each client has one keep-alive connection and sends its next
//! request when the previous answer has been read in full.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::servers::Server;

/// A client bound to one server: one connection, its token on every request.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    url: String,
    token: Option<String>,
}

/// Only whether a response carries GraphQL errors (the data is skipped without being built).
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    errors: Option<Vec<serde_json::Value>>,
}

/// What one request came back with.
pub enum Outcome {
    Ok(usize),
    Failed(String),
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

    pub async fn outcome(&self, body: &str) -> Outcome {
        match self.send(body).await {
            Err(e) => Outcome::Failed(e),
            Ok(bytes) => match serde_json::from_slice::<Envelope>(&bytes) {
                Ok(Envelope { errors: None }) => Outcome::Ok(bytes.len()),
                Ok(Envelope {
                    errors: Some(errors),
                }) => Outcome::Failed(format!(
                    "GraphQL errors: {}",
                    serde_json::Value::from(errors)
                )),
                Err(e) => Outcome::Failed(format!("not JSON: {e}")),
            },
        }
    }
}

/// Latencies and counts of one measured run.
#[derive(Default)]
pub struct Run {
    /// Per successful request, in microseconds, sorted.
    pub latencies_us: Vec<u64>,
    pub failures: u64,
    pub first_failure: Option<String>,
    pub bytes: u64,
    pub elapsed: Duration,
}

impl Run {
    pub fn ok(&self) -> u64 {
        self.latencies_us.len() as u64
    }

    pub fn percentile_ms(&self, p: f64) -> f64 {
        if self.latencies_us.is_empty() {
            return f64::NAN;
        }
        let i = ((self.latencies_us.len() - 1) as f64 * p).round() as usize;
        self.latencies_us[i] as f64 / 1000.0
    }

    pub fn per_second(&self) -> f64 {
        self.ok() as f64 / self.elapsed.as_secs_f64()
    }

    /// Mean response size.
    pub fn mean_bytes(&self) -> u64 {
        self.bytes.checked_div(self.ok()).unwrap_or(0)
    }
}

/// `clients` clients send `bodies` in turn (each starting at its own place in the list) for
/// `duration`. Each client gets its own connection.
pub async fn run(
    server: &Server,
    bodies: Arc<Vec<String>>,
    clients: usize,
    duration: Duration,
) -> Run {
    let deadline = Instant::now() + duration;
    let started = Instant::now();
    let workers = (0..clients).map(|c| {
        let client = Client::new(server);
        let bodies = bodies.clone();
        tokio::spawn(async move {
            let mut run = Run::default();
            let mut i = c * bodies.len() / clients.max(1);
            while Instant::now() < deadline {
                let sent = Instant::now();
                match client.outcome(&bodies[i % bodies.len()]).await {
                    Outcome::Ok(bytes) => {
                        run.latencies_us.push(sent.elapsed().as_micros() as u64);
                        run.bytes += bytes as u64;
                    }
                    Outcome::Failed(why) => {
                        run.failures += 1;
                        run.first_failure.get_or_insert(why);
                    }
                }
                i += 1;
            }
            run
        })
    });
    let mut all = Run::default();
    for worker in futures::future::join_all(workers).await {
        let run = worker.unwrap();
        all.latencies_us.extend(run.latencies_us);
        all.failures += run.failures;
        all.bytes += run.bytes;
        if all.first_failure.is_none() {
            all.first_failure = run.first_failure;
        }
    }
    all.elapsed = started.elapsed();
    all.latencies_us.sort_unstable();
    all
}
