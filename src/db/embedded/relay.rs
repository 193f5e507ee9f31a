//! A relay between the pool and pglite, so that no client can take the embedded database down.
//!
//! pglite serves one connection at a time, and two things a client can do stop it for good: a
//! socket reset (closing with its answer unread) ends pglite's accept loop, so every later
//! connection is refused; a client that vanishes in the middle of a message leaves pglite
//! waiting for the rest. The relay hands pglite whole messages only, ends every connection
//! with Terminate whatever the client did, and reads pglite's answers to the end even after the
//! client has gone.

use std::io;
use std::path::PathBuf;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{UnixListener, UnixStream};
use tokio::task::JoinHandle;

/// The protocol's Terminate message.
const TERMINATE: [u8; 5] = [b'X', 0, 0, 0, 4];
/// Request codes of the untyped messages a connection may send before its startup message.
const SSL_REQUEST: u32 = 80_877_103;
const GSSENC_REQUEST: u32 = 80_877_104;
const CANCEL_REQUEST: u32 = 80_877_102;

/// Accepts clients on `listener` and relays each to pglite's socket at `upstream`, until the
/// returned task is aborted.
pub fn spawn(listener: UnixListener, upstream: PathBuf) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((client, _)) => {
                    let upstream = upstream.clone();
                    tokio::spawn(async move {
                        if let Err(err) = relay(client, &upstream).await {
                            tracing::warn!("embedded database relay: {err}");
                        }
                    });
                }
                Err(err) => {
                    tracing::warn!("embedded database relay cannot accept: {err}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
        }
    })
}

async fn relay(client: UnixStream, upstream: &std::path::Path) -> io::Result<()> {
    let pglite = UnixStream::connect(upstream).await?;
    let (mut client_in, mut client_out) = client.into_split();
    let (mut pglite_in, mut pglite_out) = pglite.into_split();

    let requests = tokio::spawn(async move {
        let mut frames = Frames::default();
        let mut buf = vec![0u8; 64 * 1024];
        // A read error is the client going away, like an end of stream.
        while let Ok(read) = client_in.read(&mut buf).await {
            if read == 0 {
                break;
            }
            let whole = frames.push(&buf[..read]);
            if !whole.is_empty() {
                pglite_out.write_all(&whole).await?;
            }
            if frames.ended {
                return io::Result::Ok(());
            }
        }
        if frames.typed {
            pglite_out.write_all(&TERMINATE).await
        } else {
            // Gone before its startup message: an end of stream is all pglite needs.
            pglite_out.shutdown().await
        }
    });

    // pglite closes the connection after Terminate; until then every answer is read, and
    // passed on while the client is there to take it.
    let mut buf = vec![0u8; 64 * 1024];
    let mut client_gone = false;
    loop {
        let read = pglite_in.read(&mut buf).await?;
        if read == 0 {
            break;
        }
        if !client_gone && client_out.write_all(&buf[..read]).await.is_err() {
            client_gone = true;
        }
    }
    requests.abort();
    let _ = client_out.shutdown().await;
    Ok(())
}

/// Splits a client's byte stream into whole protocol messages.
#[derive(Default)]
struct Frames {
    pending: Vec<u8>,
    /// Past the startup message: messages carry a type byte.
    typed: bool,
    /// The client sent Terminate or a cancel request: nothing more goes to pglite.
    ended: bool,
}

impl Frames {
    /// Takes `bytes` and returns the messages they complete, whole.
    fn push(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.pending.extend_from_slice(bytes);
        let mut whole = 0;
        while !self.ended {
            let rest = &self.pending[whole..];
            let header = if self.typed { 5 } else { 4 };
            if rest.len() < header {
                break;
            }
            let length = u32::from_be_bytes(rest[header - 4..header].try_into().unwrap()) as usize;
            let size = header - 4 + length.max(4);
            if rest.len() < size {
                break;
            }
            if self.typed {
                self.ended = rest[0] == b'X';
            } else {
                let code = rest
                    .get(4..8)
                    .map(|c| u32::from_be_bytes(c.try_into().unwrap()));
                match code {
                    Some(SSL_REQUEST | GSSENC_REQUEST) => {}
                    Some(CANCEL_REQUEST) => self.ended = true,
                    _ => self.typed = true,
                }
            }
            whole += size;
        }
        self.pending.drain(..whole).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut message = vec![kind];
        message.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        message.extend_from_slice(body);
        message
    }

    fn untyped(code: u32, body: &[u8]) -> Vec<u8> {
        let mut message = (body.len() as u32 + 8).to_be_bytes().to_vec();
        message.extend_from_slice(&code.to_be_bytes());
        message.extend_from_slice(body);
        message
    }

    #[test]
    fn only_whole_messages_pass() {
        let ssl = untyped(SSL_REQUEST, b"");
        let startup = untyped(196_608, b"user\0postgres\0\0");
        let query = typed(b'Q', b"select 1\0");
        let stream = [ssl.clone(), startup.clone(), query.clone()].concat();

        let mut frames = Frames::default();
        let mut passed = Vec::new();
        // Byte by byte: nothing passes until a message is complete.
        for (i, byte) in stream.iter().enumerate() {
            let out = frames.push(&[*byte]);
            let done = i + 1;
            if !out.is_empty() {
                assert!(
                    [ssl.len(), ssl.len() + startup.len(), stream.len()].contains(&done),
                    "a message passed before it was whole (at byte {done})"
                );
            }
            passed.extend(out);
        }
        assert_eq!(passed, stream);
        assert!(frames.typed && !frames.ended);
    }

    #[test]
    fn a_half_message_is_held_back_and_terminate_ends() {
        let mut frames = Frames {
            typed: true,
            ..Frames::default()
        };
        let query = typed(b'Q', b"select 1\0");
        let out = frames.push(&query[..6]);
        assert!(out.is_empty());
        let out = frames.push(&[&query[6..], &TERMINATE[..], b"Q"].concat());
        assert_eq!(out, [query, TERMINATE.to_vec()].concat());
        assert!(frames.ended);
    }

    #[test]
    fn a_cancel_request_ends_the_connection() {
        let mut frames = Frames::default();
        let cancel = untyped(CANCEL_REQUEST, &[0; 8]);
        assert_eq!(frames.push(&cancel), cancel);
        assert!(frames.ended && !frames.typed);
    }
}
