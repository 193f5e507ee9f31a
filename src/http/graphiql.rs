//! GraphiQL for people exploring the API in a browser, with a useful query pre-filled.

use crate::auth::AuthMode;

const TEMPLATE: &str = include_str!("graphiql.html");

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
        status
        author
        createdAt
        durationMs
        counts { stages executions timelineEvents llmInteractions mcpInteractions }
        tokenUsage { inputTokens outputTokens totalTokens estimatedCostUsd }
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

/// The page, for a server whose authentication is `mode`: with API tokens, the headers editor
/// starts with an `Authorization` header to fill in (behind an SSO proxy, the proxy signs
/// people in).
pub fn page(mode: AuthMode) -> String {
    let js_string = |s: &str| serde_json::to_string(s).expect("strings serialize");
    let headers = match mode {
        AuthMode::None | AuthMode::Proxy => "",
        AuthMode::Tokens => "{\n  \"Authorization\": \"Bearer <your casefile API token>\"\n}",
    };
    TEMPLATE
        .replace("__ENDPOINT__", &js_string("/graphql"))
        .replace("__SUBSCRIPTION_ENDPOINT__", &js_string("/graphql/ws"))
        .replace("__DEFAULT_QUERY__", &js_string(EXAMPLE_QUERY))
        .replace("__DEFAULT_HEADERS__", &js_string(headers))
}
