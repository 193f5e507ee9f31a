//! A minimal GraphQL-over-SSE client (graphql-sse, distinct connections mode).

use futures::StreamExt as _;
use futures::stream::BoxStream;
use serde_json::{Value, json};

pub struct SseSubscription {
    body: BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
}

impl SseSubscription {
    pub async fn start(
        addr: std::net::SocketAddr,
        query: &str,
        variables: Value,
    ) -> SseSubscription {
        let response = reqwest::Client::new()
            .post(format!("http://{addr}/graphql/stream"))
            .header("accept", "text/event-stream")
            .json(&json!({ "query": query, "variables": variables }))
            .send()
            .await
            .expect("SSE request succeeds");
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        SseSubscription {
            body: response.bytes_stream().boxed(),
            buffer: String::new(),
        }
    }

    /// The next event: (event name, data).
    async fn event(&mut self) -> (String, String) {
        // One deadline for the event, however many heartbeats come before it.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let raw: String = self.buffer.drain(..end + 2).collect();
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
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
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
