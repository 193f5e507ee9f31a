//! The lean side of a closed-loop load generator, shared by the benchmarks: one client's
//! keep-alive connection (raw HTTP/1.1 through hyper, no pool, no JSON parsing unless the body
//! may carry errors) and the latencies of a run. The generator shares the machine's two cores
//! with the servers, so it is kept as lean as wrk.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::header::{self, HeaderValue};
use serde::Deserialize;

/// Only whether a response carries GraphQL errors (the data is skipped without being built).
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    errors: Option<Vec<serde_json::Value>>,
}

/// What one request came back with: the body, or why it failed.
pub enum Outcome {
    Ok(Bytes),
    Failed(String),
}

/// One client's connection.
pub struct Connection {
    sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    uri: hyper::Uri,
    authorization: Option<HeaderValue>,
}

impl Connection {
    pub async fn open(url: &str, token: Option<&str>) -> Result<Connection, String> {
        let uri: hyper::Uri = url.parse().map_err(|e| format!("{e}"))?;
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
        let authorization = token.map(|t| HeaderValue::from_str(&format!("Bearer {t}")).unwrap());
        Ok(Connection {
            sender,
            uri,
            authorization,
        })
    }

    /// POSTs `body` (JSON) and reads the answer in full.
    pub async fn send(&mut self, body: Bytes) -> Outcome {
        // Origin form (`/graphql`) in the request line, as browsers and wrk send it.
        let path = self.uri.path_and_query().map_or("/", |p| p.as_str());
        let mut request = hyper::Request::post(path)
            .header(header::HOST, self.uri.authority().unwrap().as_str())
            .header(header::CONTENT_TYPE, "application/json");
        if let Some(authorization) = &self.authorization {
            request = request.header(header::AUTHORIZATION, authorization.clone());
        }
        let request = request.body(Full::new(body)).unwrap();
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
            return Outcome::Ok(bytes);
        }
        match serde_json::from_slice::<Envelope>(&bytes) {
            Ok(Envelope { errors: None }) => Outcome::Ok(bytes),
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

/// Latencies and counts of one measured run.
#[derive(Default)]
pub struct Run {
    /// Per successful request, in microseconds, sorted once the run is over.
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

    /// A failed request, and why (the first reason is kept).
    pub fn failed(&mut self, why: String) {
        self.failures += 1;
        self.first_failure.get_or_insert(why);
    }

    /// One client's run joins the others'.
    pub fn absorb(&mut self, other: Run) {
        self.latencies_us.extend(other.latencies_us);
        self.failures += other.failures;
        self.bytes += other.bytes;
        if self.first_failure.is_none() {
            self.first_failure = other.first_failure;
        }
    }

    /// Every client's run in one, over `elapsed`.
    pub fn joined(runs: impl IntoIterator<Item = Run>, elapsed: Duration) -> Run {
        let mut all = Run::default();
        for run in runs {
            all.absorb(run);
        }
        all.elapsed = elapsed;
        all.latencies_us.sort_unstable();
        all
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
