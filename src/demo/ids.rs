//! Deterministic ids and time: every timestamp is an offset from one fixed instant, and every
//! id is a UUIDv7 of its timestamp plus a hash of a stable label.

use chrono::{DateTime, Utc};
use uuid::{Builder, Uuid};

/// The demo's day: 2026-11-20T08:00:00Z. Every timestamp is an offset from it.
pub(super) const BASE: DateTime<Utc> = DateTime::from_timestamp_nanos(1_795_161_600_000_000_000);

/// 64-bit FNV-1a: small, stable across Rust versions (unlike `DefaultHasher`).
pub(super) fn fnv1a(seed: u64, text: &str) -> u64 {
    text.bytes().fold(seed, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

pub(super) const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// A UUIDv7 that sorts by `at` like a live one, but whose "random" bits are a hash of `label`,
/// so the same label at the same instant always gives the same id.
pub(super) fn demo_id(label: &str, at: DateTime<Utc>) -> Uuid {
    let high = fnv1a(FNV_OFFSET, label);
    let low = fnv1a(high, label);
    let mut bytes = [0u8; 10];
    bytes[..8].copy_from_slice(&high.to_be_bytes());
    bytes[8..].copy_from_slice(&low.to_be_bytes()[..2]);
    Builder::from_unix_timestamp_millis(at.timestamp_millis().unsigned_abs(), &bytes).into_uuid()
}

pub(super) fn millis_between(from: DateTime<Utc>, to: DateTime<Utc>) -> i64 {
    (to - from).num_milliseconds()
}
