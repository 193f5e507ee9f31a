//! `casefile serve` as a child process the test owns: killed when dropped.

use std::net::SocketAddr;
use std::process::Child;

use super::process::serve;

/// A `casefile serve` child process, killed when dropped.
pub struct Served {
    pub child: Child,
    pub addr: SocketAddr,
}

impl Served {
    /// Starts it off the runtime's threads: start-up blocks on reading its output.
    pub async fn start(args: Vec<String>) -> Served {
        let (child, addr) = tokio::task::spawn_blocking(move || serve(args))
            .await
            .unwrap();
        Served { child, addr }
    }

    /// SIGKILL: no shutdown, no flush; the OS releases its files and locks.
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
