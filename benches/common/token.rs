//! `--token` (or `CASEFILE_TOKEN`) for a benchmark: with it, the benchmarked server requires
//! API tokens, takes this one as its first admin, and every request carries it, so the figures
//! include authentication.

/// The token given as `--token SECRET` (after `cargo bench … --`), else `CASEFILE_TOKEN`.
pub fn from_args_or_env() -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let token = args
        .iter()
        .position(|a| a == "--token")
        .and_then(|i| args.get(i + 1).cloned())
        .or_else(|| {
            args.iter()
                .find_map(|a| a.strip_prefix("--token=").map(str::to_owned))
        })
        .or_else(|| std::env::var("CASEFILE_TOKEN").ok())
        .filter(|t| !t.is_empty())?;
    assert!(
        casefile::auth::tokens::looks_like_token(&token),
        "--token must be `cf_` and at least 32 more characters (the server is bootstrapped with it)"
    );
    Some(token)
}
