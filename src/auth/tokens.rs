//! API token secrets and their verification.
//!
//! A secret is `cf_` and 64 hex digits (256 random bits): the prefix lets secret scanners find
//! leaked ones. Only its SHA-256 is stored. Verified tokens (and refused secrets) are cached for
//! [`CACHE_TTL`], so a request costs no statement. Every change to a token, here or in another
//! process on the same database (`NOTIFY casefile_tokens`), empties the caches and wakes every
//! open stream to re-check its token; a new token only clears the refusals.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::Utc;
use sha2::{Digest as _, Sha256};
use sqlx::postgres::PgListener;
use tokio::sync::{oneshot, watch};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::model::Role;
use crate::store::Store;
use crate::store::tokens::{self as token_store, CHANGES_CHANNEL};

/// Every API token's secret starts with this.
pub const SECRET_PREFIX: &str = "cf_";
/// Every share link's secret starts with this (a different prefix, so a secret scanner tells
/// a leaked link, which opens one session, from a token).
pub const SHARE_PREFIX: &str = "cfs_";
/// How long a verification is trusted without asking the database again: the longest a
/// revocation can take to reach a process that missed its notification.
pub const CACHE_TTL: Duration = Duration::from_secs(5);
/// `last used` is written at most this often per token.
const TOUCH_INTERVAL: Duration = Duration::from_secs(60);
/// Cached verified tokens.
const CACHE_CAPACITY: u64 = 10_000;
/// Cached refusals (unknown, revoked or expired secrets).
const REFUSED_CAPACITY: u64 = 1_000;

/// The SHA-256 of a secret: what is stored and looked up.
pub type SecretHash = [u8; 32];

/// A new random secret.
pub fn generate_secret() -> String {
    secret_with(SECRET_PREFIX)
}

/// A new random share link secret.
pub fn generate_share_secret() -> String {
    secret_with(SHARE_PREFIX)
}

/// `prefix` and 256 random bits in hex.
fn secret_with(prefix: &str) -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the operating system's random source works");
    format!("{prefix}{}", hex::encode(bytes))
}

pub fn hash(secret: &str) -> SecretHash {
    Sha256::digest(secret.as_bytes()).into()
}

/// Whether a secret has the shape of an API token: the prefix and at least 32 visible
/// characters after it. Anything else (an SSO proxy's OIDC token, junk) is never looked up, and
/// an operator's `CASEFILE_BOOTSTRAP_ADMIN_TOKEN` must have it.
pub fn looks_like_token(secret: &str) -> bool {
    has_shape(secret, SECRET_PREFIX)
}

/// Whether a bearer secret has the shape of an API token or a share link: only those are looked
/// up.
pub fn looks_like_bearer(secret: &str) -> bool {
    looks_like_token(secret) || has_shape(secret, SHARE_PREFIX)
}

fn has_shape(secret: &str, prefix: &str) -> bool {
    secret
        .strip_prefix(prefix)
        .is_some_and(|rest| rest.len() >= 32 && rest.chars().all(|c| c.is_ascii_graphic()))
}

/// A token (or share link) that verified: who it is and what it may do.
#[derive(Debug, Clone)]
pub struct VerifiedToken {
    pub id: Uuid,
    /// `token:NAME`, or `share:ID`.
    pub actor: String,
    pub role: Role,
    pub expires_at: Option<chrono::DateTime<Utc>>,
    /// The one session a share link opens (none: an API token).
    pub scope: Option<Uuid>,
}

/// Checks secrets against the database, through short-lived caches.
pub struct TokenVerifier {
    store: Store,
    /// Tokens that verified.
    known: moka::future::Cache<SecretHash, Arc<VerifiedToken>>,
    /// Secrets that did not (unknown, revoked, or expired when read): kept apart and smaller,
    /// so junk cannot push real tokens out.
    refused: moka::future::Cache<SecretHash, ()>,
    /// When `last used` was last written, per token.
    touched: Mutex<HashMap<Uuid, Instant>>,
    /// Bumped whenever tokens change; open streams watch it.
    changes: watch::Sender<u64>,
}

/// Why a lookup produced no token.
#[derive(Debug)]
enum Miss {
    NotUsable,
    Failed(Error),
}

impl TokenVerifier {
    pub fn new(store: Store) -> Arc<TokenVerifier> {
        Arc::new(TokenVerifier {
            store,
            known: moka::future::Cache::builder()
                .max_capacity(CACHE_CAPACITY)
                .time_to_live(CACHE_TTL)
                .build(),
            refused: moka::future::Cache::builder()
                .max_capacity(REFUSED_CAPACITY)
                .time_to_live(CACHE_TTL)
                .build(),
            touched: Mutex::new(HashMap::new()),
            changes: watch::Sender::new(0),
        })
    }

    /// Whether verifying `hash` needs no look-up in the database now (it was verified, or
    /// refused, in the last [`CACHE_TTL`]).
    pub fn is_cached(&self, hash: &SecretHash) -> bool {
        self.known.contains_key(hash) || self.refused.contains_key(hash)
    }

    /// The token whose secret hashes to `hash`, if it is usable now.
    pub async fn verify_hash(&self, hash: &SecretHash) -> Result<Option<Arc<VerifiedToken>>> {
        // A lookup that raced a revocation could cache what it read before it: look again.
        for _ in 0..3 {
            let generation = *self.changes.borrow();
            let token = self.lookup(hash).await?;
            if *self.changes.borrow() == generation {
                // Expiry is checked on every use, cached or not.
                let token = token.filter(|t| t.expires_at.is_none_or(|at| at > Utc::now()));
                if let Some(token) = &token {
                    self.note_use(token.id);
                }
                return Ok(token);
            }
            self.known.invalidate(hash).await;
            self.refused.invalidate(hash).await;
        }
        Err(Error::Internal(
            "tokens kept changing while one was verified".to_owned(),
        ))
    }

    async fn lookup(&self, hash: &SecretHash) -> Result<Option<Arc<VerifiedToken>>> {
        if self.refused.contains_key(hash) {
            return Ok(None);
        }
        // Concurrent misses of one secret (every stream re-checking after a revocation) share
        // one statement.
        let read = async {
            match token_store::find(self.store.pool(), hash).await {
                Ok(Some(grant)) if grant.revoked_at.is_none() => Ok(Arc::new(VerifiedToken {
                    id: grant.id,
                    actor: grant.actor,
                    role: grant.role,
                    expires_at: grant.expires_at,
                    scope: grant.session_id,
                })),
                Ok(_) => Err(Miss::NotUsable),
                Err(err) => Err(Miss::Failed(err)),
            }
        };
        match self.known.try_get_with(*hash, read).await {
            Ok(token) => Ok(Some(token)),
            Err(miss) => match miss.as_ref() {
                Miss::NotUsable => {
                    self.refused.insert(*hash, ()).await;
                    Ok(None)
                }
                Miss::Failed(err) => Err(Error::Internal(format!("token lookup failed: {err}"))),
            },
        }
    }

    /// Writes `last used` in the background, at most once a minute per token or link.
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

    /// A token was created: secrets refused before may be it now. (Verified tokens stay valid,
    /// and open streams need not re-check.)
    pub fn forget_refusals(&self) {
        self.refused.invalidate_all();
    }

    /// Forgets every cached verification and tells open streams to re-check.
    pub fn invalidate(&self) {
        self.known.invalidate_all();
        self.refused.invalidate_all();
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
    pub async fn follow_changes(self: Arc<Self>, listening: oneshot::Sender<()>) {
        let mut listening = Some(listening);
        loop {
            match PgListener::connect_with(self.store.pool()).await {
                Ok(mut listener) => match listener.listen(CHANGES_CHANNEL).await {
                    Ok(()) => {
                        match listening.take() {
                            // The server starts serving once this is said: nothing was cached
                            // before.
                            Some(listening) => {
                                let _ = listening.send(());
                            }
                            // Anything may have changed while no one listened.
                            None => self.invalidate(),
                        }
                        loop {
                            match listener.try_recv().await {
                                Ok(Some(notification)) if notification.payload() == "INSERT" => {
                                    self.forget_refusals()
                                }
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
        assert!(looks_like_token(&a));
        assert!(!looks_like_token("cf_short"));
        assert!(!looks_like_token(&a[3..]));
        let link = generate_share_secret();
        assert!(link.starts_with("cfs_") && link.len() == 4 + 64, "{link}");
        assert!(!looks_like_token(&link) && looks_like_bearer(&link));
        assert!(looks_like_bearer(&a) && !looks_like_bearer("cfs_short"));
        assert_eq!(hash(&a), hash(&a));
        assert_ne!(hash(&a), hash(&b));
    }
}
