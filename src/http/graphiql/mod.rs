//! GraphiQL for people exploring the API in a browser, with a useful query pre-filled. Every
//! file the page loads is compiled into the server, so it works where there is no internet,
//! under a Content-Security-Policy that lets it load nothing from anywhere else.

mod assets;
mod page;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use axum::routing::get;

use super::AppState;
pub use page::Page;

/// The query GraphiQL opens with: recent sessions and a taste of every layer below them.
pub const EXAMPLE_QUERY: &str = r#"# casefile: the records of AI-agent investigation sessions.
# Press the play button to run; open the Docs panel to browse every type and field.
query RecentSessions {
  sessions(first: 5, orderBy: { field: CREATED_AT, direction: DESC }) {
    totalCount
    pageInfo { hasNextPage endCursor }
    edges {
      node {
        id
        alertType
        chain { name version stageCount }
        status
        author
        createdAt
        durationMs
        counts { stages executions timelineEvents llmInteractions mcpInteractions }
        tokenUsage { inputTokens outputTokens totalTokens inputCostUsd outputCostUsd totalCostUsd }
        stages {
          stageIndex
          name
          status
          successPolicy
          executions {
            agentName
            status
            llmModel
            subAgents { agentName status }
          }
        }
        timeline(first: 5) {
          edges { cursor node { sequenceNumber eventType status content } }
        }
      }
    }
  }
}
"#;

/// The page at `/` and its files under `/graphiql/`.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(page))
        .route("/graphiql/{hash}/{name}", get(asset))
}

async fn page(State(state): State<AppState>, headers: HeaderMap) -> Response {
    state.graphiql.response(&headers)
}

async fn asset(Path((hash, name)): Path<(String, String)>, headers: HeaderMap) -> Response {
    assets::response(&hash, &name, &headers)
}

/// `body` as `content_type` with `headers`, or 304 without them when the browser's copy
/// (`If-None-Match`) is this one.
fn conditional(
    request: &HeaderMap,
    etag: &HeaderValue,
    mut headers: HeaderMap,
    content_type: &'static str,
    body: Bytes,
) -> Response {
    headers.insert(header::ETAG, etag.clone());
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    let current = request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|tag| tag.trim())
        .any(|tag| tag == "*" || tag.trim_start_matches("W/") == etag);
    if current {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    (headers, body).into_response()
}
