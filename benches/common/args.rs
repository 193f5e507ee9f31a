//! A benchmark's own arguments, after `cargo bench --bench NAME --`.

/// `--name N`, else `default`.
pub fn arg<T: std::str::FromStr>(name: &str, default: T) -> T {
    value(name)
        .map(|v| v.parse().ok().expect("a number"))
        .unwrap_or(default)
}

/// What follows `--name`, as given.
pub fn value(name: &str) -> Option<String> {
    let mut args = std::env::args().skip_while(|a| a != name);
    args.next().and(args.next())
}
