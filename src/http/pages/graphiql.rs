//! GraphiQL, with a useful query pre-filled: GraphiQL's files, and this server's settings as
//! JSON data for `graphiql.js`.

use serde_json::json;

use super::Page;
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

/// Loads nothing from anywhere but this server. Styles: GraphiQL's and casefile's files (React
/// and CodeMirror set styles through the DOM, which a policy does not restrict), and the one
/// `<style>` GraphiQL's dialogs add while open (react-remove-scroll-bar's; its text only varies
/// with the page's scroll bar, which this page never has). Fonts and images: the data URLs
/// inside GraphiQL's CSS.
const POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self' 'sha256-nzTgYzXYDNe6BAHiiI7NNlfK8n/auuOAhh2t92YvuXo='; \
    font-src data:; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// GraphiQL for a server whose authentication is `mode`: with API tokens, the headers editor
/// starts with an `Authorization` header to fill in (behind an SSO proxy, the proxy signs people
/// in).
pub fn page(mode: AuthMode) -> Page {
    let headers = match mode {
        AuthMode::None | AuthMode::Proxy => "",
        AuthMode::Tokens => "{\n  \"Authorization\": \"Bearer <your casefile API token>\"\n}",
    };
    let config = json!({
        "endpoint": "/graphql",
        "subscriptionEndpoint": "/graphql/ws",
        "defaultQuery": EXAMPLE_QUERY,
        "defaultHeaders": headers,
    });
    // Inside <script>, "</script>" would end the JSON: no '<' at all ('<' only occurs in JSON
    // strings, where \u003c means the same).
    let config = config.to_string().replace('<', "\\u003c");
    Page::new(&TEMPLATE.replace("{{config}}", &config), POLICY)
}
