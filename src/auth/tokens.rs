//! API token secrets and their verification.
//!
//! A secret is `cf_` and 64 hex digits (256 random bits): the prefix lets secret scanners find
//! leaked ones. Only its SHA-256 is stored. Verified tokens (and unknown secrets) are cached for
//! [`CACHE_TTL`], so a request costs no statement; every create or revoke, here or in another
//! process on the same database (`NOTIFY casefile_tokens`), empties the cache and wakes every
//! open stream to re-check its token.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::Utc;
use sha2::{Digest as _, Sha256};
use sqlx::postgres::PgListener;
use tokio::sync::watch;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::model::Role;
use crate::store::Store;
use crate::store::tokens::{self as token_store, CHANGES_CHANNEL};

/// Every secret starts with this.
pub const SECRET_PREFIX: &str = "cf_";
/// How long a verification is trusted without asking the database again: the longest a
/// revocation can take to reach a process that missed its notification.
pub const CACHE_TTL: Duration = Duration::from_secs(5);
/// `last used` is written at most this often per token.
const TOUCH_INTERVAL: Duration = Duration::from_secs(60);
/// Cached verifications (tokens and unknown secrets alike).
const CACHE_CAPACITY: u64 = 10_000;

/// The SHA-256 of a secret: what is stored and looked up.
pub type SecretHash = [u8; 32];

/// A new random secret.
pub fn generate_secret() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the operating system's random source works");
    format!("{SECRET_PREFIX}{}", hex::encode(bytes))
}

pub fn hash(secret: &str) -> SecretHash {
    Sha256::digest(secret.as_bytes()).into()
}

/// Whether a secret supplied by an operator (`CASEFILE_BOOTSTRAP_ADMIN_TOKEN`) is strong enough:
/// the prefix and at least 32 characters after it.
pub fn is_acceptable_secret(secret: &str) -> bool {
    secret
        .strip_prefix(SECRET_PREFIX)
        .is_some_and(|rest| rest.len() >= 32 && rest.chars().all(|c| c.is_ascii_graphic()))
}

/// A token that verified: who it is and what it may do.
#[derive(Debug, Clone)]
pub struct VerifiedToken {
    pub id: Uuid,
    pub name: String,
    pub role: Role,
    pub expires_at: Option<chrono::DateTime<Utc>>,
}

/// Checks secrets against the database, through a short-lived cache.
pub struct TokenVerifier {
    store: Store,
    /// `None`: no usable token has this hash (unknown, revoked or expired when read).
    cache: moka::future::Cache<SecretHash, Option<Arc<VerifiedToken>>>,
    /// When `last used` was last written, per token.
    touched: Mutex<HashMap<Uuid, Instant>>,
    /// Bumped whenever tokens change; open streams watch it.
    changes: watch::Sender<u64>,
}

impl TokenVerifier {
    pub fn new(store: Store) -> Arc<TokenVerifier> {
        Arc::new(TokenVerifier {
            store,
            cache: moka::future::Cache::builder()
                .max_capacity(CACHE_CAPACITY)
                .time_to_live(CACHE_TTL)
                .build(),
            touched: Mutex::new(HashMap::new()),
            changes: watch::Sender::new(0),
        })
    }

    /// The token `secret` is, if it is usable now.
    pub async fn verify(&self, secret: &str) -> Result<Option<Arc<VerifiedToken>>> {
        self.verify_hash(&hash(secret)).await
    }

    pub async fn verify_hash(&self, hash: &SecretHash) -> Result<Option<Arc<VerifiedToken>>> {
        // Concurrent misses of one secret (every stream re-checking after a revocation) share
        // one lookup.
        let lookup = async {
            let grant = token_store::find(self.store.pool(), hash).await?;
            Ok::<_, Error>(grant.filter(|g| g.revoked_at.is_none()).map(|g| {
                Arc::new(VerifiedToken {
                    id: g.id,
                    name: g.name,
                    role: g.role,
                    expires_at: g.expires_at,
                })
            }))
        };
        let token = self
            .cache
            .try_get_with(*hash, lookup)
            .await
            .map_err(|err| Error::Internal(format!("token lookup failed: {err}")))?;
        // Expiry is checked on every use, cached or not.
        let token = token.filter(|t| t.expires_at.is_none_or(|at| at > Utc::now()));
        if let Some(token) = &token {
            self.note_use(token.id);
        }
        Ok(token)
    }

    /// Writes `last used` in the background, at most once a minute per token.
    fn note_use(&self, id: Uuid) {
        let now = Instant::now();
        {
            let mut touched = self.touched.lock().expect("not poisoned");
            match touched.get(&id) {
                Some(at) if now.duration_since(*at) < TOUCH_INTERVAL => return,
                _ => touched.insert(id, now),
            };
        }
        let store = self.store.clone();
        tokio::spawn(async move {
            if let Err(err) = token_store::touch(store.pool(), id).await {
                tracing::warn!("cannot record a token's last use: {err}");
            }
        });
    }

    /// Forgets every cached verification and tells open streams to re-check.
    pub fn invalidate(&self) {
        self.cache.invalidate_all();
        self.changes.send_modify(|generation| *generation += 1);
    }

    /// Resolves when `hash` no longer verifies: revoked (noticed at once when the revocation is
    /// announced, within [`CACHE_TTL`] otherwise), expired, or gone.
    pub async fn until_unusable(&self, hash: SecretHash) {
        let mut changes = self.changes.subscribe();
        loop {
            let token = match self.verify_hash(&hash).await {
                Ok(Some(token)) => token,
                Ok(None) => return,
                Err(err) => {
                    // Keep the stream through a database hiccup; ask again shortly.
                    tracing::warn!("cannot re-check an open stream's token: {err}");
                    tokio::time::sleep(CACHE_TTL).await;
                    continue;
                }
            };
            let mut wait = CACHE_TTL;
            if let Some(expires_at) = token.expires_at {
                let left = (expires_at - Utc::now()).to_std().unwrap_or_default();
                wait = wait.min(left + Duration::from_millis(1));
            }
            tokio::select! {
                _ = changes.changed() => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Listens for token changes made by any process on the database and forgets cached
    /// verifications when one arrives (or when the listening connection was lost, since one may
    /// have been missed). Runs until the task is aborted.
    pub async fn follow_changes(self: Arc<Self>) {
        loop {
            match PgListener::connect_with(self.store.pool()).await {
                Ok(mut listener) => match listener.listen(CHANGES_CHANNEL).await {
                    Ok(()) => {
                        // Anything may have changed while no one listened.
                        self.invalidate();
                        loop {
                            match listener.try_recv().await {
                                Ok(Some(_)) => self.invalidate(),
                                // The connection dropped; sqlx reconnects and listens again
                                // on the next call.
                                Ok(None) => self.invalidate(),
                                Err(err) => {
                                    tracing::warn!("token change listener failed: {err}");
                                    break;
                                }
                            }
                        }
                    }
                    Err(err) => tracing::warn!("cannot LISTEN for token changes: {err}"),
                },
                Err(err) => tracing::warn!("cannot connect to LISTEN for token changes: {err}"),
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_prefixed_random_and_hash_to_32_bytes() {
        let (a, b) = (generate_secret(), generate_secret());
        assert!(a.starts_with("cf_") && a.len() == 3 + 64, "{a}");
        assert_ne!(a, b);
        assert!(is_acceptable_secret(&a));
        assert!(!is_acceptable_secret("cf_short"));
        assert!(!is_acceptable_secret(&a[3..]));
        assert_eq!(hash(&a), hash(&a));
        assert_ne!(hash(&a), hash(&b));
    }
}
