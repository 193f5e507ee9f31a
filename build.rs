//! Rebuilds when a migration is added: `sqlx::migrate!` embeds `migrations/` at compile time,
//! but on stable Rust it cannot tell Cargo to watch the directory itself.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
