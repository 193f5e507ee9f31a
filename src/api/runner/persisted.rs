//! Automatic persisted queries, as Apollo's clients speak them: a request may carry only the
//! SHA-256 of its query (`extensions.persistedQuery.sha256Hash`, version 1). A hash this server
//! knows runs its query; an unknown one is refused with `PERSISTED_QUERY_NOT_FOUND`, and the
//! client sends the query with its hash once, which registers it. The queries kept are bounded
//! by their total size (the least used go first); a query is kept only once it parses.

use std::sync::Arc;

use async_graphql::{Request, ServerError, Value};
use moka::sync::Cache;
use sha2::{Digest as _, Sha256};

use super::coded_error;

pub const NOT_FOUND: &str = "PERSISTED_QUERY_NOT_FOUND";
const NOT_SUPPORTED: &str = "PERSISTED_QUERY_NOT_SUPPORTED";
/// What Apollo's clients look for in the message (older ones do not read the code).
const NOT_FOUND_MESSAGE: &str = "PersistedQueryNotFound";
/// Total length of the queries kept.
const KEPT_BYTES: u64 = 16 * 1024 * 1024;

#[derive(Clone)]
pub struct PersistedQueries(Cache<String, Arc<str>>);

/// A request's persisted-query extension, checked.
#[derive(Debug)]
pub struct Persisted {
    /// Lowercase hex SHA-256 of the query text.
    hash: String,
}

impl PersistedQueries {
    pub fn new() -> PersistedQueries {
        PersistedQueries(
            Cache::builder()
                .weigher(|hash: &String, query: &Arc<str>| {
                    u32::try_from(hash.len() + query.len()).unwrap_or(u32::MAX)
                })
                .max_capacity(KEPT_BYTES)
                .build(),
        )
    }

    /// Fills in the query of a hash-only request, or checks that a request's query matches its
    /// hash; returns what to register once the query is known to parse.
    pub fn resolve(&self, request: &mut Request) -> Result<Option<Persisted>, ServerError> {
        let Some(extension) = request.extensions.get("persistedQuery") else {
            return Ok(None);
        };
        let persisted = parse_extension(extension)?;
        if request.query.is_empty() {
            return match self.0.get(&persisted.hash) {
                Some(query) => {
                    request.query = query.to_string();
                    // Resolved: later steps see an ordinary request.
                    request.extensions.remove("persistedQuery");
                    Ok(None)
                }
                None => Err(coded_error(NOT_FOUND, NOT_FOUND_MESSAGE)),
            };
        }
        if sha256_hex(&request.query) != persisted.hash {
            return Err(coded_error(
                "BAD_REQUEST",
                "extensions.persistedQuery.sha256Hash is not the SHA-256 of the query",
            ));
        }
        Ok((!self.0.contains_key(&persisted.hash)).then_some(persisted))
    }

    /// Keeps `query` under its hash.
    pub fn register(&self, persisted: Persisted, query: &str) {
        self.0.insert(persisted.hash, Arc::from(query));
    }
}

impl Default for PersistedQueries {
    fn default() -> Self {
        Self::new()
    }
}

fn parse_extension(extension: &Value) -> Result<Persisted, ServerError> {
    let invalid =
        |what: &str| coded_error("BAD_REQUEST", format!("extensions.persistedQuery {what}"));
    let Value::Object(fields) = extension else {
        return Err(invalid("must be an object"));
    };
    match fields.get("version") {
        Some(Value::Number(n)) if n.as_i64() == Some(1) => {}
        Some(_) => {
            return Err(coded_error(
                NOT_SUPPORTED,
                "only version 1 of automatic persisted queries is supported",
            ));
        }
        None => return Err(invalid("needs `version: 1`")),
    }
    match fields.get("sha256Hash") {
        Some(Value::String(hash))
            if hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            Ok(Persisted {
                hash: hash.to_ascii_lowercase(),
            })
        }
        _ => Err(invalid(
            "needs `sha256Hash`: the 64 hex digits of the query's SHA-256",
        )),
    }
}

fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_hash(query: &str, hash: &str) -> Request {
        let mut request = Request::new(query);
        request.extensions.insert(
            "persistedQuery".to_owned(),
            Value::from_json(serde_json::json!({ "version": 1, "sha256Hash": hash })).unwrap(),
        );
        request
    }

    fn code(err: &ServerError) -> Option<Value> {
        err.extensions.as_ref().and_then(|e| e.get("code")).cloned()
    }

    #[test]
    fn an_unknown_hash_is_asked_for_then_known_once_registered() {
        let queries = PersistedQueries::new();
        let query = "{ sessions { totalCount } }";
        let hash = sha256_hex(query);
        let err = queries.resolve(&mut with_hash("", &hash)).unwrap_err();
        assert_eq!(code(&err), Some(Value::from(NOT_FOUND)));
        assert_eq!(err.message, "PersistedQueryNotFound");

        let persisted = queries.resolve(&mut with_hash(query, &hash)).unwrap();
        queries.register(persisted.expect("to register"), query);
        let mut hash_only = with_hash("", &hash.to_ascii_uppercase());
        assert!(queries.resolve(&mut hash_only).unwrap().is_none());
        assert_eq!(hash_only.query, query);
    }

    #[test]
    fn a_wrong_hash_or_version_is_refused() {
        let queries = PersistedQueries::new();
        let err = queries
            .resolve(&mut with_hash("{ a }", &sha256_hex("{ b }")))
            .unwrap_err();
        assert_eq!(code(&err), Some(Value::from("BAD_REQUEST")));
        let err = queries.resolve(&mut with_hash("", "abc")).unwrap_err();
        assert_eq!(code(&err), Some(Value::from("BAD_REQUEST")));
        let mut request = Request::new("");
        request.extensions.insert(
            "persistedQuery".to_owned(),
            Value::from_json(serde_json::json!({ "version": 2, "sha256Hash": sha256_hex("") }))
                .unwrap(),
        );
        let err = queries.resolve(&mut request).unwrap_err();
        assert_eq!(code(&err), Some(Value::from(NOT_SUPPORTED)));
    }
}
