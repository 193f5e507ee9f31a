//! `casefile serve` as a child process, started the way an operator would start it.

use std::ffi::OsStr;
use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

/// Starts `casefile serve --listen 127.0.0.1:0 <args>` (with no `DATABASE_URL` from the
/// environment) and returns once it listens.
pub fn serve<I, S>(args: I) -> (Child, SocketAddr)
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut child = Command::new(env!("CARGO_BIN_EXE_casefile"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .env_remove("DATABASE_URL")
        .env("RUST_LOG", "warn,casefile=info")
        // Piped, for tests that read what the server prints there (a first admin token).
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("the server exited before listening")
            .unwrap();
        if let Some(rest) = line.split("casefile listening on http://").nth(1) {
            break rest.trim_end_matches("/graphql").parse().unwrap();
        }
    };
    // Keep draining stderr so the child never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (child, addr)
}
