//! Who is calling, and what they may do.
//!
//! Three modes (`--auth`): `none` (no identity; everyone may do everything; only on loopback
//! unless explicitly allowed), `tokens` (every request carries `Authorization: Bearer cf_…`) and
//! `proxy` (a trusted SSO proxy passes the person in headers, proved by a shared secret; bearer
//! tokens work too, for agents). The edge turns a request's credentials into an [`Identity`];
//! the schema's guards ([`crate::api::guards`]) decide what that identity may do, on every
//! transport alike.

mod options;
mod proxy;
pub mod tickets;
pub mod tokens;

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::http::HeaderMap;
use serde_json::Value;
use uuid::Uuid;

use crate::fair::Rate;
use crate::model::Role;
use crate::store::Store;
pub use options::{AuthMode, AuthOptions, ProxyOptions};
use proxy::ProxyAuth;
use tokens::{SecretHash, TokenVerifier};

/// An authenticated caller.
#[derive(Debug, Clone)]
pub struct Identity {
    /// Who it is, as recorded in `createdBy` and the status history: `token:NAME` for an API
    /// token, the user for a person behind the SSO proxy; `None` under `--auth none`.
    pub actor: Option<String>,
    pub role: Role,
    /// The secret's hash when it came with a token: open streams re-check it.
    token: Option<SecretHash>,
    /// Whether the SSO proxy vouched for it: open streams end after the proxy's stream lifetime
    /// and reconnect through the proxy, which signs the person in again.
    from_proxy: bool,
    /// The one session a share link opens: a reader of it alone (none: no such bound).
    pub scope: Option<Uuid>,
}

impl Identity {
    /// Everyone, under `--auth none`.
    pub fn anonymous() -> Identity {
        Identity {
            actor: None,
            role: Role::Admin,
            token: None,
            from_proxy: false,
            scope: None,
        }
    }

    /// Whether this is the no-identity caller of `--auth none`.
    pub fn is_anonymous(&self) -> bool {
        self.actor.is_none()
    }

    /// Whether it may read `session`: any session, unless it is a share link's, which opens its
    /// own alone.
    pub fn may_read(&self, session: Uuid) -> bool {
        self.scope.is_none_or(|scope| scope == session)
    }
}

/// Whom a caller's fair share is counted under (requests in flight and their rate, streams,
/// WebSocket connections, subscriptions): its actor (a token, a person behind the proxy; a share
/// link per client address), else, without authentication, its client address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Caller(Arc<str>);

impl Caller {
    pub fn of(identity: &Identity, peer: Option<SocketAddr>) -> Caller {
        match (&identity.actor, peer) {
            // A share link goes to many people (a channel during an incident): each address
            // gets a share of its own rather than all of them one.
            (Some(actor), Some(peer)) if identity.scope.is_some() => {
                Caller(Arc::from(format!("{actor}@{}", peer.ip())))
            }
            (Some(actor), _) => Caller(Arc::from(actor.as_str())),
            (None, Some(peer)) => Caller::address(peer.ip()),
            (None, None) => Caller(Arc::from("anonymous")),
        }
    }

    /// A client known only by its address (before its credentials are read).
    pub fn address(ip: IpAddr) -> Caller {
        Caller(Arc::from(ip.to_string()))
    }
}

impl fmt::Display for Caller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a request was turned away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// No usable credentials. The message is the same whatever was wrong, so it never tells
    /// whether a token exists.
    Unauthenticated,
    /// Authenticated, but allowed nothing.
    Forbidden(String),
    /// The credentials could not be checked (the database did not answer): not the caller's
    /// fault, so not a 401 that would make them discard a good token.
    Unavailable,
    /// Over a fair-use limit (credential look-ups from its address, WebSocket connections of
    /// its identity): retry after this many seconds.
    Limited {
        message: String,
        retry_after_secs: u64,
    },
}

impl Rejection {
    pub const UNAUTHENTICATED_MESSAGE: &str = "authentication required: send a valid API token \
         (Authorization: Bearer cf_…) or sign in through the SSO proxy";

    pub fn message(&self) -> &str {
        match self {
            Rejection::Unauthenticated => Self::UNAUTHENTICATED_MESSAGE,
            Rejection::Forbidden(message) => message,
            Rejection::Unavailable => "credentials cannot be checked right now; try again shortly",
            Rejection::Limited { message, .. } => message,
        }
    }

    /// The `extensions.code`.
    pub fn code(&self) -> &'static str {
        match self {
            Rejection::Unauthenticated => "UNAUTHENTICATED",
            Rejection::Forbidden(_) => "FORBIDDEN",
            Rejection::Unavailable => "SERVICE_UNAVAILABLE",
            Rejection::Limited { .. } => "RATE_LIMITED",
        }
    }
}

/// Turns credentials into identities.
pub struct Authenticator {
    mode: AuthMode,
    store: Store,
    tokens: Arc<TokenVerifier>,
    proxy: Option<ProxyAuth>,
    /// Credential look-ups in the database per client address: a value that merely has the
    /// shape of a token or ticket costs a statement, so random ones must not drive the
    /// database. Only look-ups count (a token verified in the last [`tokens::CACHE_TTL`] costs
    /// none), so honest clients behind one address stay far under it.
    lookups: Rate<IpAddr>,
}

impl Authenticator {
    /// `lookups_per_second`: credential look-ups in the database per client address (0: no
    /// limit).
    pub fn new(
        store: Store,
        options: &AuthOptions,
        lookups_per_second: u32,
    ) -> anyhow::Result<Arc<Authenticator>> {
        let proxy = match options.mode {
            AuthMode::Proxy => Some(ProxyAuth::new(&options.proxy)?),
            AuthMode::None | AuthMode::Tokens => None,
        };
        Ok(Arc::new(Authenticator {
            mode: options.mode,
            tokens: TokenVerifier::new(store.clone()),
            store,
            proxy,
            lookups: Rate::new(lookups_per_second),
        }))
    }

    pub fn mode(&self) -> AuthMode {
        self.mode
    }

    pub fn tokens(&self) -> &Arc<TokenVerifier> {
        &self.tokens
    }

    /// The identity of an HTTP request (or a WebSocket upgrade without `connection_init`
    /// credentials) from `client`.
    pub async fn authenticate(
        &self,
        headers: &HeaderMap,
        client: Option<IpAddr>,
    ) -> Result<Identity, Rejection> {
        if self.mode == AuthMode::None {
            return Ok(Identity::anonymous());
        }
        let bearer = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_secret);
        self.identify(bearer, headers, client).await
    }

    /// The identity of a WebSocket connection: a token in the `connection_init` payload
    /// (`Authorization`/`authorization`: `Bearer …`, or `token`, also inside `headers`) wins
    /// over the upgrade request's header.
    pub async fn authenticate_init(
        &self,
        headers: &HeaderMap,
        payload: &Value,
        client: Option<IpAddr>,
    ) -> Result<Identity, Rejection> {
        if self.mode == AuthMode::None {
            return Ok(Identity::anonymous());
        }
        match init_secret(payload)? {
            Some(secret) => self.identify(Some(secret), headers, client).await,
            None => self.authenticate(headers, client).await,
        }
    }

    /// An API token when `bearer` has the shape of one; otherwise (nothing, or something else,
    /// such as the OIDC token oauth2-proxy can pass along) the proxy's headers, in proxy mode.
    async fn identify(
        &self,
        bearer: Option<&str>,
        headers: &HeaderMap,
        client: Option<IpAddr>,
    ) -> Result<Identity, Rejection> {
        if let Some(secret) = bearer.filter(|s| tokens::looks_like_bearer(s)) {
            return self.token_identity(secret, client).await;
        }
        match &self.proxy {
            Some(proxy) => proxy.identify(headers),
            None => Err(Rejection::Unauthenticated),
        }
    }

    async fn token_identity(
        &self,
        secret: &str,
        client: Option<IpAddr>,
    ) -> Result<Identity, Rejection> {
        let hash = tokens::hash(secret);
        if !self.tokens.is_cached(&hash) {
            self.may_look_up(client)?;
        }
        match self.tokens.verify_hash(&hash).await {
            Ok(Some(token)) => Ok(Identity {
                actor: Some(token.actor.clone()),
                role: token.role,
                token: Some(hash),
                from_proxy: false,
                scope: token.scope,
            }),
            Ok(None) => Err(Rejection::Unauthenticated),
            Err(err) => {
                tracing::error!("cannot verify a token: {err}");
                Err(Rejection::Unavailable)
            }
        }
    }

    /// One more credential look-up in the database for `client`, if its address is within its
    /// rate. (Every request reaches the server from an address; without one there is nothing
    /// to count it by.)
    fn may_look_up(&self, client: Option<IpAddr>) -> Result<(), Rejection> {
        let Some(client) = client else {
            return Ok(());
        };
        self.lookups
            .check(&client)
            .map_err(|retry_after_secs| Rejection::Limited {
                message: format!(
                    "too many credentials to check from {client}: over the limit of {} look-ups \
                     per second (--auth-attempts-per-second-per-address); slow down",
                    self.lookups.per_second()
                ),
                retry_after_secs,
            })
    }

    /// Resolves when `identity` may no longer be used: its token was revoked or expired, or
    /// the proxy's stream lifetime has passed (casefile cannot ask the proxy whether the person
    /// is still allowed). Never under `--auth none`.
    pub async fn until_lapsed(&self, identity: &Identity) {
        match (identity.token, &self.proxy) {
            (Some(hash), _) => self.tokens.until_unusable(hash).await,
            (None, Some(proxy)) if identity.from_proxy => {
                tokio::time::sleep(proxy.stream_lifetime()).await
            }
            _ => std::future::pending().await,
        }
    }
}

/// The secret of an `Authorization: Bearer <secret>` value.
fn bearer_secret(value: &str) -> Option<&str> {
    let (scheme, secret) = value.trim().split_once(' ')?;
    let secret = secret.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !secret.is_empty()).then_some(secret)
}

/// The secret a `connection_init` payload carries, if any.
fn init_secret(payload: &Value) -> Result<Option<&str>, Rejection> {
    match secret_in(payload)? {
        Some(secret) => Ok(Some(secret)),
        None => payload.get("headers").map_or(Ok(None), secret_in),
    }
}

/// The secret under `Authorization`/`authorization` (`Bearer …`) or `token` in a JSON object.
fn secret_in(object: &Value) -> Result<Option<&str>, Rejection> {
    for key in ["Authorization", "authorization"] {
        if let Some(value) = object.get(key) {
            let value = value.as_str().ok_or(Rejection::Unauthenticated)?;
            return bearer_secret(value)
                .ok_or(Rejection::Unauthenticated)
                .map(Some);
        }
    }
    match object.get("token") {
        Some(value) => {
            let value = value.as_str().ok_or(Rejection::Unauthenticated)?.trim();
            Ok(Some(bearer_secret(value).unwrap_or(value)))
        }
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_share_link_counts_each_address_apart_and_a_token_once() {
        let (a, b): (SocketAddr, SocketAddr) = (
            "192.0.2.1:1000".parse().unwrap(),
            "192.0.2.2:1000".parse().unwrap(),
        );
        let link = Identity {
            actor: Some("share:x".to_owned()),
            role: Role::Reader,
            token: None,
            from_proxy: false,
            scope: Some(Uuid::nil()),
        };
        assert_ne!(Caller::of(&link, Some(a)), Caller::of(&link, Some(b)));
        let token = Identity {
            scope: None,
            actor: Some("token:ops".to_owned()),
            ..link
        };
        assert_eq!(Caller::of(&token, Some(a)), Caller::of(&token, Some(b)));
    }

    #[test]
    fn bearer_values() {
        assert_eq!(bearer_secret("Bearer cf_abc"), Some("cf_abc"));
        assert_eq!(bearer_secret("bearer  cf_abc "), Some("cf_abc"));
        assert_eq!(bearer_secret("Basic dXNlcg=="), None);
        assert_eq!(bearer_secret("Bearer "), None);
        assert_eq!(bearer_secret("cf_abc"), None);
    }

    #[test]
    fn init_payload_keys() {
        let secret = |v: Value| init_secret(&v).map(|s| s.map(str::to_owned));
        assert_eq!(
            secret(json!({ "Authorization": "Bearer a" })),
            Ok(Some("a".into()))
        );
        assert_eq!(
            secret(json!({ "authorization": "Bearer b" })),
            Ok(Some("b".into()))
        );
        assert_eq!(secret(json!({ "token": "c" })), Ok(Some("c".into())));
        assert_eq!(secret(json!({ "token": "Bearer d" })), Ok(Some("d".into())));
        assert_eq!(
            secret(json!({ "headers": { "Authorization": "Bearer e" } })),
            Ok(Some("e".into()))
        );
        assert_eq!(secret(json!({})), Ok(None));
        assert_eq!(secret(Value::Null), Ok(None));
        assert_eq!(
            secret(json!({ "Authorization": "Basic x" })),
            Err(Rejection::Unauthenticated)
        );
        assert_eq!(
            secret(json!({ "token": 5 })),
            Err(Rejection::Unauthenticated)
        );
    }

    #[tokio::test]
    async fn a_database_that_does_not_answer_is_not_a_bad_token() {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .acquire_timeout(std::time::Duration::from_millis(200))
            .connect_lazy("postgres://casefile@127.0.0.1:1/none")
            .unwrap();
        let options = AuthOptions {
            mode: AuthMode::Tokens,
            ..AuthOptions::default()
        };
        let auth = Authenticator::new(Store::new(pool), &options, 1).unwrap();
        let client = Some(IpAddr::from([192, 0, 2, 1]));
        let mut headers = HeaderMap::new();
        let bearer = format!("Bearer {}", tokens::generate_secret());
        headers.insert("authorization", bearer.parse().unwrap());
        let rejection = auth.authenticate(&headers, client).await.unwrap_err();
        assert_eq!(rejection, Rejection::Unavailable);
        assert_eq!(rejection.code(), "SERVICE_UNAVAILABLE");
        // Something that is not an API token is refused without asking the database.
        headers.insert("authorization", "Bearer eyJhbGciOi.x.y".parse().unwrap());
        let rejection = auth.authenticate(&headers, client).await.unwrap_err();
        assert_eq!(rejection, Rejection::Unauthenticated);
        // Without credentials there is nothing to check: plainly unauthenticated.
        let rejection = auth
            .authenticate(&HeaderMap::new(), client)
            .await
            .unwrap_err();
        assert_eq!(rejection, Rejection::Unauthenticated);
        // The address used its one look-up this second: the next is refused before the
        // database is asked (it would answer Unavailable).
        headers.insert("authorization", bearer.parse().unwrap());
        let rejection = auth.authenticate(&headers, client).await.unwrap_err();
        assert_eq!(rejection.code(), "RATE_LIMITED", "{rejection:?}");
        assert!(
            rejection
                .message()
                .contains("--auth-attempts-per-second-per-address")
        );
    }
}
