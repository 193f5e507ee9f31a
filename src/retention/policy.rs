//! What a retention policy is: which sessions and receipts go, as cutoffs (an age or an
//! instant) resolved to instants when a purge starts.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};

use crate::options::parse_period;
use crate::store::retention::SessionCriteria;

/// The end of a retention window: everything before it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cutoff {
    /// This long before the purge runs.
    Age(chrono::Duration),
    /// This instant.
    At(DateTime<Utc>),
}

impl Cutoff {
    /// The instant, for a purge starting at `now`.
    pub fn instant(self, now: DateTime<Utc>) -> DateTime<Utc> {
        match self {
            Cutoff::Age(age) => now - age,
            Cutoff::At(at) => at,
        }
    }
}

/// An age (`30d`) or an RFC 3339 instant, not in the future: a cutoff past now would take
/// what finished a moment ago, or leave no time to restore what was deleted by mistake.
pub fn parse_cutoff(text: &str) -> Result<Cutoff, String> {
    if let Ok(at) = DateTime::parse_from_rfc3339(text.trim()) {
        let at = at.with_timezone(&Utc);
        if at > Utc::now() {
            return Err(format!("{text:?} is in the future"));
        }
        return Ok(Cutoff::At(at));
    }
    parse_period(text).map(Cutoff::Age).map_err(|_| {
        format!("{text:?} is neither an age such as 30d, 12h or 90m nor an instant such as 2026-01-01T00:00:00Z")
    })
}

/// What a purge deletes, as instants, and as it was given (for its record).
#[derive(Debug, Clone)]
pub struct Policy {
    pub sessions: SessionCriteria,
    pub receipts_before: Option<DateTime<Utc>>,
    /// Audit records made before this go (both tables).
    pub audit_before: Option<DateTime<Utc>>,
    described: Map<String, Value>,
}

impl Policy {
    /// The policy of cutoffs given as ages or instants, for a purge starting at `now`.
    pub fn new(
        deleted_before: Option<Cutoff>,
        finished_before: Option<Cutoff>,
        receipts_before: Option<Cutoff>,
        now: DateTime<Utc>,
    ) -> Policy {
        let mut described = Map::new();
        let mut resolve = |name: &str, cutoff: Option<Cutoff>| {
            let instant = cutoff.map(|c| c.instant(now));
            if let (Some(cutoff), Some(instant)) = (cutoff, instant) {
                described.insert(name.to_owned(), describe(cutoff, instant));
            }
            instant
        };
        let sessions = SessionCriteria {
            deleted_before: resolve("deletedBefore", deleted_before),
            finished_before: resolve("finishedBefore", finished_before),
        };
        let receipts_before = resolve("receiptsBefore", receipts_before);
        Policy {
            sessions,
            receipts_before,
            audit_before: None,
            described,
        }
    }

    /// The policy that also forgets audit records from before `cutoff` (for a purge starting
    /// at `now`). Kept apart from sessions and receipts: audit records usually outlive both.
    pub fn with_audit_before(mut self, cutoff: Option<Cutoff>, now: DateTime<Utc>) -> Policy {
        if let Some(cutoff) = cutoff {
            let instant = cutoff.instant(now);
            self.described
                .insert("auditBefore".to_owned(), describe(cutoff, instant));
            self.audit_before = Some(instant);
        }
        self
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty() && self.receipts_before.is_none() && self.audit_before.is_none()
    }

    /// The policy as recorded: each cutoff's instant, and its age when given as one.
    pub fn describe(&self) -> Value {
        Value::Object(self.described.clone())
    }
}

/// A cutoff as recorded: its instant, and its age when given as one.
fn describe(cutoff: Cutoff, instant: DateTime<Utc>) -> Value {
    let mut entry = json!({ "instant": instant.to_rfc3339_opts(SecondsFormat::Secs, true) });
    if let Cutoff::Age(age) = cutoff {
        entry["age"] = json!(describe_age(age));
    }
    entry
}

/// `30d`, `12h`, `90m` or `45s`: the largest unit that divides the age.
fn describe_age(age: chrono::Duration) -> String {
    let seconds = age.num_seconds();
    for (unit, length) in [("d", 86_400), ("h", 3_600), ("m", 60)] {
        if seconds % length == 0 {
            return format!("{}{unit}", seconds / length);
        }
    }
    format!("{seconds}s")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cutoffs_are_ages_or_instants() {
        assert_eq!(
            parse_cutoff("30d"),
            Ok(Cutoff::Age(chrono::Duration::days(30)))
        );
        let at = parse_cutoff("2026-01-01T01:00:00+01:00").unwrap();
        assert_eq!(at, Cutoff::At("2026-01-01T00:00:00Z".parse().unwrap()));
        let now = "2026-03-31T00:00:00Z".parse().unwrap();
        assert_eq!(
            Cutoff::Age(chrono::Duration::days(30)).instant(now),
            "2026-03-01T00:00:00Z"
                .parse::<chrono::DateTime<chrono::Utc>>()
                .unwrap()
        );
        for bad in [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "0d",
            "2999-01-01T00:00:00Z",
        ] {
            assert!(parse_cutoff(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn ages_are_described_in_their_largest_unit() {
        assert_eq!(describe_age(chrono::Duration::days(30)), "30d");
        assert_eq!(describe_age(chrono::Duration::hours(36)), "36h");
        assert_eq!(describe_age(chrono::Duration::minutes(90)), "90m");
        assert_eq!(describe_age(chrono::Duration::seconds(45)), "45s");
    }

    #[test]
    fn a_policy_resolves_ages_against_its_start_and_records_both() {
        let now: DateTime<Utc> = "2026-03-31T00:00:00Z".parse().unwrap();
        let at: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
        let policy = Policy::new(
            Some(Cutoff::Age(chrono::Duration::days(30))),
            Some(Cutoff::At(at)),
            None,
            now,
        );
        assert_eq!(
            policy.sessions.deleted_before,
            Some("2026-03-01T00:00:00Z".parse().unwrap())
        );
        assert_eq!(policy.sessions.finished_before, Some(at));
        assert_eq!(policy.receipts_before, None);
        assert_eq!(
            policy.describe(),
            json!({
                "deletedBefore": { "age": "30d", "instant": "2026-03-01T00:00:00Z" },
                "finishedBefore": { "instant": "2026-01-01T00:00:00Z" },
            })
        );
        assert!(Policy::new(None, None, None, now).is_empty());
        let audit = Policy::new(None, None, None, now)
            .with_audit_before(Some(Cutoff::Age(chrono::Duration::days(400))), now);
        assert!(!audit.is_empty());
        assert_eq!(
            audit.audit_before,
            Some("2025-02-24T00:00:00Z".parse().unwrap())
        );
        assert_eq!(
            audit.describe(),
            json!({ "auditBefore": { "age": "400d", "instant": "2025-02-24T00:00:00Z" } })
        );
    }
}
