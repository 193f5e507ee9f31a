//! A closed-loop load generator: each client has one keep-alive connection and sends its next
//! request when the previous answer has been read in full. Setup requests go through reqwest
//! ([`Client`]); timed load through bare hyper connections.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::header::{self, HeaderValue};
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

/// Where timed load goes.
struct Target {
    url: String,
    token: Option<String>,
}

/// One client's connection for timed load: raw HTTP/1.1 through hyper, no pool, no JSON
/// parsing unless the body may carry errors. The load generator shares the machine's two
/// cores with the servers, so it is kept as lean as wrk.
struct Connection {
    sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    uri: hyper::Uri,
    authorization: Option<HeaderValue>,
}

impl Connection {
    async fn open(server: &Target) -> Result<Connection, String> {
        let uri: hyper::Uri = server.url.parse().map_err(|e| format!("{e}"))?;
        let authority = uri.authority().ok_or("no host in the URL")?.as_str();
        let stream = tokio::net::TcpStream::connect(authority)
            .await
            .map_err(|e| e.to_string())?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let (sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .map_err(|e| e.to_string())?;
        tokio::spawn(connection);
        let authorization = server
            .token
            .as_ref()
            .map(|t| HeaderValue::from_str(&format!("Bearer {t}")).unwrap());
        Ok(Connection {
            sender,
            uri,
            authorization,
        })
    }

    async fn outcome(&mut self, body: &Bytes) -> Outcome {
        // Origin form (`/graphql`) in the request line, as browsers and wrk send it.
        let path = self.uri.path_and_query().map_or("/", |p| p.as_str());
        let mut request = hyper::Request::post(path)
            .header(header::HOST, self.uri.authority().unwrap().as_str())
            .header(header::CONTENT_TYPE, "application/json");
        if let Some(authorization) = &self.authorization {
            request = request.header(header::AUTHORIZATION, authorization.clone());
        }
        let request = request.body(Full::new(body.clone())).unwrap();
        let response = match self.sender.send_request(request).await {
            Ok(response) => response,
            Err(e) => return Outcome::Failed(e.to_string()),
        };
        let status = response.status();
        let bytes = match response.into_body().collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) => return Outcome::Failed(e.to_string()),
        };
        if !status.is_success() {
            return Outcome::Failed(format!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(300)])
            ));
        }
        // Both servers write compact JSON: a top-level `errors` key contains this pattern, and
        // so may a nested one, which the full parse then tells apart.
        if memchr::memmem::find(&bytes, b"\"errors\":").is_none() {
            return Outcome::Ok(bytes.len());
        }
        match serde_json::from_slice::<Envelope>(&bytes) {
            Ok(Envelope { errors: None }) => Outcome::Ok(bytes.len()),
            Ok(Envelope {
                errors: Some(errors),
            }) => Outcome::Failed(format!(
                "GraphQL errors: {}",
                serde_json::Value::from(errors)
            )),
            Err(e) => Outcome::Failed(format!("not JSON: {e}")),
        }
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
        match Connection::open(server).await {
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
                    match connection.outcome(&bodies[i % bodies.len()]).await {
                        Outcome::Ok(bytes) => {
                            run.latencies_us.push(sent.elapsed().as_micros() as u64);
                            run.bytes += bytes as u64;
                        }
                        Outcome::Failed(why) => {
                            run.failures += 1;
                            run.first_failure.get_or_insert(why);
                            // The connection may be gone: start a new one.
                            match Connection::open(server).await {
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
    let mut all = Run::default();
    for run in futures::future::join_all(workers).await {
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
