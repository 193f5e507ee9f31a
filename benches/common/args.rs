//! A benchmark's own arguments, after `cargo bench --bench NAME --`.

/// `--name N`, else `default`.
pub fn arg<T: std::str::FromStr>(name: &str, default: T) -> T {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().ok().expect("a number"))
        .unwrap_or(default)
}
