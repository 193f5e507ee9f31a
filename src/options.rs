//! What every options type shares. Each module defines its own options type, with its flags,
//! variables and defaults (`api::Limits`, `http::HttpOptions`, `auth::AuthOptions`,
//! `live::LiveOptions`, `db::DatabaseArgs`, `retention::RetentionOptions`, …); each command's own
//! arguments are in `cli/`. Here: how a type's defaults are had from its flags, and the lengths
//! of time flags take.

use std::time::Duration;

/// An options type as it is when no flag and no variable sets anything: the defaults its flags
/// declare, so that each default is written once (its `Default` is this). Variables are ignored:
/// options built in code, as tests build them, must not depend on the environment.
pub fn defaults<T: clap::Args + clap::FromArgMatches>() -> T {
    let command = T::augment_args(clap::Command::new("defaults")).mut_args(|arg| arg.env(None));
    let matches = command
        .try_get_matches_from(["defaults"])
        .expect("every option has a default");
    T::from_arg_matches(&matches).expect("the defaults are valid values")
}

/// A positive number of seconds, fractions allowed (`0.5`).
pub fn parse_seconds(text: &str) -> Result<Duration, String> {
    let seconds: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    match Duration::try_from_secs_f64(seconds) {
        Ok(duration) if !duration.is_zero() => Ok(duration),
        _ => Err(format!("{text:?} must be a positive number of seconds")),
    }
}

/// A length of time such as `30d`, `12h`, `90m` or `45s` (a token's lifetime, a retention age).
pub fn parse_period(text: &str) -> Result<chrono::Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: i64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a length of time such as 30d, 12h or 90m"))?;
    let duration = match unit {
        "d" => chrono::Duration::try_days(n),
        "h" => chrono::Duration::try_hours(n),
        "m" => chrono::Duration::try_minutes(n),
        "s" => chrono::Duration::try_seconds(n),
        _ => None,
    };
    match duration {
        // Past a century, a token needs no expiry and data no retention.
        Some(d) if n > 0 && d <= chrono::Duration::days(36_500) => Ok(d),
        _ => Err(format!(
            "{text:?} is not a positive length of time such as 30d, 12h or 90m"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An option whose variable is surely set (`PATH`): its default is still its flag's.
    #[derive(Debug, clap::Args)]
    struct Probe {
        #[arg(long, env = "PATH", default_value = "unset")]
        path: String,
    }

    #[test]
    fn defaults_ignore_the_environment() {
        assert!(std::env::var_os("PATH").is_some());
        assert_eq!(defaults::<Probe>().path, "unset");
    }

    #[test]
    fn periods() {
        assert_eq!(parse_period("30d"), Ok(chrono::Duration::days(30)));
        assert_eq!(parse_period("12h"), Ok(chrono::Duration::hours(12)));
        assert_eq!(parse_period("90m"), Ok(chrono::Duration::minutes(90)));
        assert_eq!(parse_period("45s"), Ok(chrono::Duration::seconds(45)));
        for bad in [
            "",
            "d",
            "30",
            "0d",
            "-1d",
            "30w",
            "1.5d",
            "36501d",
            "99999999999999d",
        ] {
            assert!(parse_period(bad).is_err(), "{bad:?}");
        }
    }
}
