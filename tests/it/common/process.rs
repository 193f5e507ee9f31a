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
        if let Some(addr) = listening_on(&line) {
            break addr;
        }
    };
    // Keep draining stderr so the child never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (child, addr)
}

/// The address in the server's "listening" log line, as text or JSON (the default when standard
/// error is not a terminal).
pub fn listening_on(line: &str) -> Option<SocketAddr> {
    let rest = line.split("casefile listening on http://").nth(1)?;
    let addr: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
        .collect();
    Some(addr.parse().expect("an address"))
}

/// Asks a child process to stop, as an operator would (SIGTERM); whether the signal went out.
pub fn sigterm(child: &Child) -> bool {
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .is_ok_and(|status| status.success())
}

/// A `kB` line of `/proc/<pid>/status` (`VmHWM`, `VmRSS`), in KiB; 0 when it cannot be read.
pub fn status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| {
                v.trim_start_matches(':')
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse()
                    .ok()
            })
        })
        .unwrap_or(0)
}
