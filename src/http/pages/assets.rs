//! The page's files, compiled in: GraphiQL's standalone build and React (from the npm packages
//! in `assets/graphiql/`, see its README), GraphiQL's start-up script and style, and the share
//! page's script and style. Each is
//! served at a URL that names its content hash, so browsers keep it for a year without asking
//! again, and a changed file gets a new URL.

use std::sync::LazyLock;

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use sha2::{Digest as _, Sha256};

const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

macro_rules! vendored {
    ($name:literal) => {
        include_bytes!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/assets/graphiql/",
            $name
        ))
    };
}

/// (name, media type, content)
const FILES: [(&str, &str, &[u8]); 8] = [
    (
        "react.production.min.js",
        JS,
        vendored!("react.production.min.js"),
    ),
    (
        "react-dom.production.min.js",
        JS,
        vendored!("react-dom.production.min.js"),
    ),
    ("graphiql.min.js", JS, vendored!("graphiql.min.js")),
    ("graphiql.min.css", CSS, vendored!("graphiql.min.css")),
    ("graphiql.js", JS, include_bytes!("graphiql.js")),
    ("graphiql.css", CSS, include_bytes!("graphiql.css")),
    ("share.js", JS, include_bytes!("share.js")),
    ("share.css", CSS, include_bytes!("share.css")),
];

pub struct Asset {
    pub name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
    hash: String,
    etag: HeaderValue,
}

impl Asset {
    /// Where the page loads it from.
    pub fn url(&self) -> String {
        format!("/assets/{}/{}", self.hash, self.name)
    }
}

/// Hashed once per process, on first use.
static ASSETS: LazyLock<Vec<Asset>> = LazyLock::new(|| {
    FILES
        .iter()
        .map(|&(name, content_type, body)| {
            let hash = content_hash(body);
            Asset {
                name,
                content_type,
                body,
                etag: strong_etag(&hash),
                hash,
            }
        })
        .collect()
});

pub fn all() -> &'static [Asset] {
    &ASSETS
}

/// The file `name` if `hash` is its current hash (a URL from an older build finds nothing).
pub fn response(hash: &str, name: &str, request: &HeaderMap) -> Response {
    let Some(asset) = ASSETS.iter().find(|a| a.name == name && a.hash == hash) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=31536000, immutable"),
    );
    super::conditional(
        request,
        &asset.etag,
        headers,
        asset.content_type,
        Bytes::from_static(asset.body),
    )
}

/// 128 bits of SHA-256, in hex: names a file in its URL and is its ETag.
pub fn content_hash(body: &[u8]) -> String {
    hex::encode(&Sha256::digest(body)[..16])
}

pub fn strong_etag(hash: &str) -> HeaderValue {
    HeaderValue::try_from(format!("\"{hash}\"")).expect("hex is a valid header value")
}
