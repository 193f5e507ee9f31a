//! A minimal client of subscriptions over multipart HTTP (`multipart/mixed; boundary=graphql`),
//! as Apollo clients speak it.

use futures::StreamExt as _;
use futures::stream::BoxStream;
use serde_json::{Value, json};

use super::sse::{open_stream, start_stream};

pub struct MultipartSubscription {
    body: BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: Vec<u8>,
}

const PART: &[u8] = b"--graphql\r\n";
const END: &[u8] = b"--graphql--";

impl MultipartSubscription {
    /// Posts the subscription asking for a multipart answer, or says why it could not.
    pub async fn open(
        addr: std::net::SocketAddr,
        query: &str,
        variables: Value,
    ) -> Result<MultipartSubscription, String> {
        let url = format!("http://{addr}/graphql");
        Ok(MultipartSubscription {
            body: open_stream(url, "multipart/mixed", query, variables).await?,
            buffer: Vec::new(),
        })
    }

    /// Posts an operation asking for a multipart answer, with extra request headers; the status
    /// and body when refused.
    pub async fn start_with(
        addr: std::net::SocketAddr,
        headers: &[(&str, &str)],
        query: &str,
        variables: Value,
    ) -> Result<MultipartSubscription, (u16, Value)> {
        let url = format!("http://{addr}/graphql");
        Ok(MultipartSubscription {
            body: start_stream(url, "multipart/mixed", headers, query, variables).await?,
            buffer: Vec::new(),
        })
    }

    /// The next part's JSON (heartbeats skipped), or what went wrong with the stream.
    async fn part(&mut self) -> Result<Value, String> {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            if self.buffer.starts_with(END) {
                return Err("the stream completed".into());
            }
            // A part: its boundary line, headers, a blank line, then one line of JSON (a JSON
            // text never holds a raw line break).
            if self.buffer.starts_with(PART) {
                let headers_end = find(&self.buffer, b"\r\n\r\n");
                let body_end = headers_end
                    .and_then(|h| find(&self.buffer[h + 4..], b"\r\n").map(|b| (h + 4, h + 4 + b)));
                if let Some((start, end)) = body_end {
                    let part: Value = serde_json::from_slice(&self.buffer[start..end])
                        .map_err(|err| format!("a part is not JSON: {err}"))?;
                    self.buffer.drain(..end + 2);
                    if part == json!({}) {
                        continue; // heartbeat
                    }
                    return Ok(part);
                }
            } else if self.buffer.len() >= PART.len() {
                return Err(format!(
                    "unexpected bytes between parts: {:?}",
                    String::from_utf8_lossy(&self.buffer)
                ));
            }
            let chunk = tokio::time::timeout_at(deadline, self.body.next())
                .await
                .map_err(|_| "no part within 20 s".to_owned())?
                .ok_or("the stream ended")?
                .map_err(|err| format!("the stream failed: {err}"))?;
            self.buffer.extend_from_slice(&chunk);
        }
    }

    /// The next result's `data`, or `Err` with the result that carried errors; the outer error
    /// says what went wrong with the stream.
    pub async fn try_next(&mut self) -> Result<Result<Value, Value>, String> {
        let part = self.part().await?;
        if part.get("errors").is_some() {
            return Ok(Err(part));
        }
        Ok(Ok(part["data"].clone()))
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
