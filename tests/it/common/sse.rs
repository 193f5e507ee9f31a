//! A minimal GraphQL-over-SSE client (graphql-sse, distinct connections mode).

use futures::StreamExt as _;
use futures::stream::BoxStream;
use serde_json::{Value, json};

pub struct SseSubscription {
    body: BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    /// Bytes, not text: a chunk may end inside a multibyte character.
    buffer: Vec<u8>,
}

impl SseSubscription {
    pub async fn start(
        addr: std::net::SocketAddr,
        query: &str,
        variables: Value,
    ) -> SseSubscription {
        Self::start_with(addr, &[], query, variables)
            .await
            .expect("SSE request succeeds")
    }

    /// Starts with extra request headers; the status and body when refused.
    pub async fn start_with(
        addr: std::net::SocketAddr,
        headers: &[(&str, &str)],
        query: &str,
        variables: Value,
    ) -> Result<SseSubscription, (u16, Value)> {
        let mut request = reqwest::Client::new()
            .post(format!("http://{addr}/graphql/stream"))
            .header("accept", "text/event-stream");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request
            .json(&json!({ "query": query, "variables": variables }))
            .send()
            .await
            .expect("SSE request is answered");
        if !response.status().is_success() {
            let status = response.status().as_u16();
            return Err((status, response.json().await.unwrap_or_default()));
        }
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Ok(SseSubscription {
            body: response.bytes_stream().boxed(),
            buffer: Vec::new(),
        })
    }

    /// The next event: (event name, data).
    async fn event(&mut self) -> (String, String) {
        // One deadline for the event, however many heartbeats come before it.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            if let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                let raw: Vec<u8> = self.buffer.drain(..end + 2).collect();
                let raw = String::from_utf8(raw).expect("an event is UTF-8");
                let mut name = String::from("message");
                let mut data = Vec::new();
                for line in raw.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        name = v.trim().to_owned();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push(v.strip_prefix(' ').unwrap_or(v).to_owned());
                    }
                }
                if raw.lines().all(|l| l.starts_with(':') || l.is_empty()) {
                    continue; // heartbeat comment
                }
                return (name, data.join("\n"));
            }
            let chunk = tokio::time::timeout_at(deadline, self.body.next())
                .await
                .expect("an event within 20 s")
                .expect("stream open")
                .expect("chunk");
            self.buffer.extend_from_slice(&chunk);
        }
    }

    /// The next result's `data`, or `Err` with what ended the stream.
    pub async fn next(&mut self) -> Result<Value, Value> {
        let (name, data) = self.event().await;
        if name != "next" {
            return Err(json!({ "event": name, "data": data }));
        }
        let value: Value = serde_json::from_str(&data).unwrap();
        if value.get("errors").is_some() {
            return Err(value);
        }
        Ok(value["data"].clone())
    }
}
