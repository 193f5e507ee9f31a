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
        let url = format!("http://{addr}/graphql/stream");
        let body = start_stream(url, "text/event-stream", headers, query, variables).await?;
        Ok(SseSubscription {
            body,
            buffer: Vec::new(),
        })
    }

    /// As [`SseSubscription::start`], or why it could not: for clients that reconnect to a server
    /// that may be down.
    pub async fn open(
        addr: std::net::SocketAddr,
        query: &str,
        variables: Value,
    ) -> Result<SseSubscription, String> {
        let url = format!("http://{addr}/graphql/stream");
        Ok(SseSubscription {
            body: open_stream(url, "text/event-stream", query, variables).await?,
            buffer: Vec::new(),
        })
    }

    /// The next event: (event name, data), or what went wrong with the stream.
    async fn event(&mut self) -> Result<(String, String), String> {
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
                return Ok((name, data.join("\n")));
            }
            let chunk = tokio::time::timeout_at(deadline, self.body.next())
                .await
                .map_err(|_| "no event within 20 s".to_owned())?
                .ok_or("the stream ended")?
                .map_err(|err| format!("the stream failed: {err}"))?;
            self.buffer.extend_from_slice(&chunk);
        }
    }

    /// The next result's `data`, or `Err` with what ended the stream.
    pub async fn next(&mut self) -> Result<Value, Value> {
        self.try_next()
            .await
            .unwrap_or_else(|lost| panic!("{lost}"))
    }

    /// As [`SseSubscription::next`], or what went wrong with the stream.
    pub async fn try_next(&mut self) -> Result<Result<Value, Value>, String> {
        let (name, data) = self.event().await?;
        if name != "next" {
            return Ok(Err(json!({ "event": name, "data": data })));
        }
        let value: Value = serde_json::from_str(&data).unwrap();
        if value.get("errors").is_some() {
            return Ok(Err(value));
        }
        Ok(Ok(value["data"].clone()))
    }
}

/// POSTs an operation asking for a streamed answer of type `accept`, with extra request headers:
/// its body, or the status and JSON body refusing it.
pub(super) async fn start_stream(
    url: String,
    accept: &str,
    headers: &[(&str, &str)],
    query: &str,
    variables: Value,
) -> Result<BoxStream<'static, reqwest::Result<bytes::Bytes>>, (u16, Value)> {
    let mut request = reqwest::Client::new().post(url).header("accept", accept);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request
        .json(&json!({ "query": query, "variables": variables }))
        .send()
        .await
        .expect("the stream request is answered");
    if !response.status().is_success() {
        let status = response.status().as_u16();
        return Err((status, response.json().await.unwrap_or_default()));
    }
    let media = response.headers()["content-type"].to_str().unwrap();
    assert!(media.starts_with(accept), "{media}");
    Ok(response.bytes_stream().boxed())
}

/// POSTs a subscription asking for a streamed answer of type `accept`: its body, or why it could
/// not be opened.
pub(super) async fn open_stream(
    url: String,
    accept: &str,
    query: &str,
    variables: Value,
) -> Result<BoxStream<'static, reqwest::Result<bytes::Bytes>>, String> {
    let response = reqwest::Client::new()
        .post(url)
        .header("accept", accept)
        .json(&json!({ "query": query, "variables": variables }))
        .send()
        .await
        .map_err(|err| format!("the request failed: {err}"))?;
    if !response.status().is_success() {
        return Err(format!("refused with {}", response.status()));
    }
    Ok(response.bytes_stream().boxed())
}
