//! The body of every refusal the edge answers itself (authentication, media type, throttling,
//! limits): a GraphQL-shaped error, for a request that never reaches the executor.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse as _, Response};

/// A GraphQL-shaped error for a request that never reaches the executor.
pub fn error_response(status: StatusCode, code: &str, message: &str) -> Response {
    let body = serde_json::json!({
        "errors": [{ "message": message, "extensions": { "code": code } }]
    });
    let mut response = (status, body.to_string()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
