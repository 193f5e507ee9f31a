//! casefile's pages need no internet: GraphiQL and the page a share link opens, and every file
//! they load, come from the server, cached by content hash, under a Content-Security-Policy that
//! allows no other origin. (What a browser makes of them: tests/graphiql-offline, in headless
//! Chromium.)

use reqwest::StatusCode;
use reqwest::header::{
    ACCEPT, CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, HOST, HeaderMap,
    HeaderName, IF_NONE_MATCH, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use casefile::auth::AuthMode;
use casefile::http::HttpOptions;

use crate::common::TestApp;

fn header(headers: &HeaderMap, name: HeaderName) -> String {
    let value = headers.get(&name).unwrap_or_else(|| panic!("no {name}"));
    value.to_str().unwrap().to_owned()
}

/// What a browser gets at `url` (with these request headers): status, headers and body.
async fn get(
    app: &TestApp,
    url: &str,
    with: &[(HeaderName, &str)],
) -> (StatusCode, HeaderMap, String) {
    let mut request = app.client.get(app.url(url));
    for (name, value) in with {
        request = request.header(name, *value);
    }
    let response = request.send().await.unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    (status, headers, response.text().await.unwrap())
}

/// The page at `path`: its headers and HTML.
async fn page(app: &TestApp, path: &str) -> (HeaderMap, String) {
    let (status, headers, html) = get(app, path, &[(ACCEPT, "text/html")]).await;
    assert_eq!(status, StatusCode::OK, "{path}");
    (headers, html)
}

/// The values of every `name="…"` attribute in `html`.
fn attributes<'a>(html: &'a str, name: &str) -> Vec<&'a str> {
    let opening = format!(" {name}=\"");
    html.match_indices(&opening)
        .map(|(at, _)| {
            let value = &html[at + opening.len()..];
            &value[..value.find('"').unwrap()]
        })
        .collect()
}

/// The JSON settings the page hands to its start-up script, as written.
fn config_text(html: &str) -> &str {
    let start = r#"<script id="graphiql-config" type="application/json">"#;
    let json = &html[html.find(start).unwrap() + start.len()..];
    &json[..json.find("</script>").unwrap()]
}

fn config(html: &str) -> Value {
    serde_json::from_str(config_text(html)).unwrap()
}

/// The pages (any session's page is the same; the path names one) and how many files each
/// loads.
const PAGES: [(&str, usize); 2] = [("/", 6), ("/share/0193a8c2-5b7e-7d31-9f0a-2c4e6b8d1f3a", 2)];

#[tokio::test]
async fn the_pages_and_their_files_come_from_the_server_cached_by_content_hash() {
    let app = TestApp::start().await;
    for (path, files) in PAGES {
        page_and_files(&app, path, files).await;
    }
    app.stop().await;
}

async fn page_and_files(app: &TestApp, path: &str, files: usize) {
    let (headers, html) = page(app, path).await;
    assert_eq!(header(&headers, CONTENT_TYPE), "text/html; charset=utf-8");
    // It names this server's settings and the files' current URLs: revalidated every time.
    assert_eq!(header(&headers, CACHE_CONTROL), "no-cache");
    let etag = header(&headers, ETAG);
    let (status, _, body) = get(app, path, &[(IF_NONE_MATCH, etag.as_str())]).await;
    assert_eq!(status, StatusCode::NOT_MODIFIED);
    assert!(body.is_empty());

    // Only the page's own tags load anything (the policy forbids inline scripts and handlers,
    // see below): each names a file on this server.
    let urls = [attributes(&html, "src"), attributes(&html, "href")].concat();
    assert_eq!(urls.len(), files, "{path}: {urls:?}");
    for url in urls {
        assert!(url.starts_with("/assets/"), "{url} is not on this server");
        let (hash, name) = url["/assets/".len()..].split_once('/').unwrap();
        let (status, headers, body) = get(app, url, &[]).await;
        assert_eq!(status, StatusCode::OK, "{url}");
        let media_type = match name.rsplit_once('.').unwrap().1 {
            "js" => "text/javascript; charset=utf-8",
            "css" => "text/css; charset=utf-8",
            other => panic!("{url}: unexpected kind of file {other}"),
        };
        assert_eq!(header(&headers, CONTENT_TYPE), media_type, "{url}");
        assert_eq!(header(&headers, X_CONTENT_TYPE_OPTIONS), "nosniff");
        assert_eq!(
            header(&headers, CACHE_CONTROL),
            "public, max-age=31536000, immutable"
        );
        // The URL names the content, and so does the ETag.
        assert_eq!(hex::encode(&Sha256::digest(&body)[..16]), hash, "{url}");
        let etag = header(&headers, ETAG);
        assert_eq!(etag, format!("\"{hash}\""), "{url}");

        if name.ends_with(".css") {
            // CSS fetches through @import and url(): data URLs only (fonts, images).
            assert!(!body.contains("@import"), "{url}");
            for (at, _) in body.match_indices("url(") {
                let target = body[at + "url(".len()..].trim_start_matches(['"', '\'']);
                assert!(target.starts_with("data:"), "{url}: url({target:.40}");
            }
        }

        for tag in [
            etag.clone(),
            format!("W/{etag}"),
            format!("\"other\", {etag}"),
        ] {
            let (status, headers, body) = get(app, url, &[(IF_NONE_MATCH, tag.as_str())]).await;
            assert_eq!(status, StatusCode::NOT_MODIFIED, "{url} {tag}");
            assert_eq!(header(&headers, ETAG), etag);
            assert!(body.is_empty());
        }
        let (status, _, _) = get(app, url, &[(IF_NONE_MATCH, "\"other\"")]).await;
        assert_eq!(status, StatusCode::OK, "{url}");

        // A URL from another build, or of a file not served, finds nothing.
        for missing in [
            format!("/assets/{}/{name}", "0".repeat(32)),
            format!("/assets/{hash}/{name}.map"),
        ] {
            let (status, _, _) = get(app, &missing, &[]).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{missing}");
        }
    }
}

#[tokio::test]
async fn the_pages_allow_nothing_from_other_origins() {
    let app = TestApp::start().await;
    for (path, _) in PAGES {
        policy_of(&app, path).await;
    }
    app.stop().await;
}

async fn policy_of(app: &TestApp, path: &str) {
    let (headers, _) = page(app, path).await;
    let policy = header(&headers, CONTENT_SECURITY_POLICY);
    let directives: Vec<(&str, Vec<&str>)> = policy
        .split(';')
        .map(|d| {
            let mut words = d.split_whitespace();
            (words.next().unwrap(), words.collect())
        })
        .collect();
    let sources = |name: &str| {
        let directive = directives.iter().find(|(n, _)| *n == name);
        directive
            .unwrap_or_else(|| panic!("no {name} in {policy}"))
            .1
            .clone()
    };
    // Whatever no directive names falls back to nothing.
    assert_eq!(sources("default-src"), ["'none'"]);
    // Scripts: this server's files only; no inline script, no eval.
    assert_eq!(sources("script-src"), ["'self'"]);
    for name in ["base-uri", "form-action", "frame-ancestors"] {
        assert_eq!(sources(name), ["'none'"], "{name}");
    }
    // The WebSocket endpoint is this server, by the name the request used.
    let host = app.addr.to_string();
    let this_server = [format!("ws://{host}"), format!("wss://{host}")];
    assert_eq!(
        sources("connect-src"),
        ["'self'", &this_server[0], &this_server[1]]
    );
    // No directive names another origin, or a scheme (such as https:) that allows them all;
    // inline styles only by hash (GraphiQL's dialogs add one).
    for (name, list) in &directives {
        for source in list {
            let allowed = ["'self'", "'none'", "data:"].contains(source)
                || this_server.iter().any(|s| s == source)
                || (*name == "style-src" && source.starts_with("'sha256-"));
            assert!(allowed, "{path}: {name} allows {source}");
        }
    }
    // Nothing is sent along to another page's server: a share link's page holds its secret.
    assert_eq!(header(&headers, REFERRER_POLICY), "no-referrer");
}

/// The share page is one page for every session (its script reads which from the path, and
/// the secret from the fragment, which the server never sees); anything but a session's UUID
/// finds nothing.
#[tokio::test]
async fn the_share_page_is_one_page_for_every_session() {
    let app = TestApp::start().await;
    let (_, first) = page(&app, PAGES[1].0).await;
    let (_, second) = page(&app, &format!("/share/{}", uuid::Uuid::now_v7())).await;
    assert_eq!(first, second);
    assert!(first.contains("<script src=\"/assets/"), "{first}");
    for path in ["/share/not-a-session", "/share/", "/share/%3Cscript%3E"] {
        let (status, _, _) = get(&app, path, &[]).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
    }
    app.stop().await;
}

#[tokio::test]
async fn browsers_get_the_same_page_at_the_graphql_endpoint() {
    let app = TestApp::start().await;
    let (at_root, root_html) = page(&app, "/").await;
    let (at_endpoint, endpoint_html) = page(&app, "/graphql").await;
    assert_eq!(root_html, endpoint_html);
    for name in [CONTENT_SECURITY_POLICY, ETAG, CACHE_CONTROL] {
        assert_eq!(header(&at_root, name.clone()), header(&at_endpoint, name));
    }
    let config = config(&root_html);
    assert_eq!(config["endpoint"], "/graphql");
    assert_eq!(config["subscriptionEndpoint"], "/graphql/ws");
    assert_eq!(config["defaultQuery"], casefile::http::EXAMPLE_QUERY);
    // Without authentication there is no header to fill in.
    assert_eq!(config["defaultHeaders"], "");
    app.stop().await;
}

#[tokio::test]
async fn with_api_tokens_the_headers_editor_starts_with_authorization() {
    let mut options = HttpOptions::default();
    options.auth.mode = AuthMode::Tokens;
    let app = TestApp::start_with(options).await;
    let (_, html) = page(&app, "/").await;
    assert_eq!(
        config(&html)["defaultHeaders"],
        "{\n  \"Authorization\": \"Bearer <your casefile API token>\"\n}"
    );
    // The JSON sits in a <script> element: no '<' that could close it early.
    assert!(!config_text(&html).contains('<'));

    // A Host that is not a plain name stays out of the policy; 'self' still covers the
    // WebSocket in current browsers.
    let (_, headers, _) = get(&app, "/", &[(HOST, "example.com;script-src *")]).await;
    let policy = header(&headers, CONTENT_SECURITY_POLICY);
    assert!(policy.ends_with("; connect-src 'self'"), "{policy}");
    app.stop().await;
}
