//! The `casefile` binary as an operator runs it: its own commands on an embedded database in a
//! data directory of the test's own.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A data directory for one test, removed when dropped.
pub struct DataDir(pub PathBuf);

impl DataDir {
    pub fn new(purpose: &str) -> DataDir {
        DataDir(std::env::temp_dir().join(format!("casefile-{purpose}-{}", uuid::Uuid::new_v4())))
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `casefile ARGS --data-dir DIR`, ignoring the environment's database and token, run by the
/// system user `ops`.
pub fn casefile(args: &[&str], data_dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_casefile"))
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("DATABASE_URL")
        .env_remove("CASEFILE_TOKEN")
        .env("USER", "ops")
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

/// What a command that must succeed printed.
pub fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}
