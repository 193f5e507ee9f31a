//! GraphQL over HTTP, per the GraphQL-over-HTTP spec: POST (JSON, batches too) and GET (queries
//! only), answering `application/graphql-response+json` or `application/json` as the client
//! accepts. A browser's plain GET (no `query`) gets GraphiQL.

use async_graphql::http::parse_query_string;
use async_graphql::parser::parse_query;
use async_graphql::parser::types::OperationType;
use async_graphql::{BatchRequest, BatchResponse, Executor as _, Request, Value};
use async_graphql_axum::GraphQLBatchRequest;
use axum::Extension;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};

use super::access::{self, OriginPolicy, carries_operation};
use super::refusal::error_response;
use super::throttle::Admission;
use super::{AppState, streaming};
use crate::api::runner::persisted::NOT_FOUND as PERSISTED_QUERY_NOT_FOUND;
use crate::api::runner::{CostBudget, selected_operation};
use crate::auth::Identity;
use crate::observe::request::RequestInfo;

const GRAPHQL_RESPONSE_JSON: &str = "application/graphql-response+json";
const JSON: &str = "application/json";
pub const BATCH_TOO_LARGE: &str = "BATCH_TOO_LARGE";

/// Runs a POSTed request (authenticated, as `identity`, and admitted before its body was read).
pub async fn post(
    State(state): State<AppState>,
    Extension(identity): Extension<Identity>,
    Extension(admission): Extension<Admission>,
    info: Option<Extension<RequestInfo>>,
    headers: HeaderMap,
    uri: Uri,
    request: GraphQLBatchRequest,
) -> Response {
    let info = info.map(|Extension(info)| info);
    let batch = request.into_inner();
    let streamed = accepts(&headers, "text/event-stream") || accepts(&headers, "multipart/mixed");
    if streamed && !state.origins.allows(&headers, &uri) {
        return OriginPolicy::refused();
    }
    // A single operation may ask to be streamed (subscriptions, over SSE or multipart).
    if let BatchRequest::Single(single) = batch {
        if accepts(&headers, "text/event-stream") {
            let single = with_info(single, info.as_ref(), "sse");
            return streaming::sse(&state, single, identity, &admission);
        }
        if accepts(&headers, "multipart/mixed") {
            let single = with_info(single, info.as_ref(), "multipart");
            return streaming::multipart(&state, single, identity, &admission);
        }
        let batch = BatchRequest::Single(single);
        return execute(&state, batch, &headers, identity, info.as_ref()).await;
    }
    execute(&state, batch, &headers, identity, info.as_ref()).await
}

/// The request, told which HTTP request (and transport) it came with.
fn with_info(request: Request, info: Option<&RequestInfo>, transport: &'static str) -> Request {
    match info {
        Some(info) => request.data(info.with_transport(transport)),
        None => request,
    }
}

/// Runs a GET query (authenticated, as `identity`, and admitted, unless it asks for no query:
/// GraphiQL).
pub async fn get(
    State(state): State<AppState>,
    identity: Option<Extension<Identity>>,
    admission: Option<Extension<Admission>>,
    info: Option<Extension<RequestInfo>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let info = info.map(|Extension(info)| info);
    let query_string = uri.query().unwrap_or_default();
    if !carries_operation(&uri) {
        if accepts(&headers, "text/html") {
            return state.graphiql.response(&headers);
        }
        return plain_error(
            StatusCode::BAD_REQUEST,
            "GET /graphql needs a `query` parameter",
        );
    }
    let mut request = match parse_query_string(query_string) {
        Ok(request) => request,
        Err(err) => {
            return plain_error(
                StatusCode::BAD_REQUEST,
                &format!("invalid GET request: {err}"),
            );
        }
    };
    let streamed = accepts(&headers, "text/event-stream");
    if streamed && !state.origins.allows(&headers, &uri) {
        return OriginPolicy::refused();
    }
    // The edge authenticates (and admits) every GET that carries a query.
    let (Some(Extension(identity)), Some(Extension(admission))) = (identity, admission) else {
        return access::rejected(&crate::auth::Rejection::Unauthenticated);
    };
    state.runner.fill_persisted_query(&mut request);
    if is_mutation(&request) {
        let mut response = plain_error(
            StatusCode::METHOD_NOT_ALLOWED,
            "mutations must be sent with POST",
        );
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return response;
    }
    if streamed {
        let request = with_info(request, info.as_ref(), "sse");
        return streaming::sse(&state, request, identity, &admission);
    }
    let batch = BatchRequest::Single(request);
    execute(&state, batch, &headers, identity, info.as_ref()).await
}

/// Runs each request with loaders of its own, as `identity`, and negotiates the response media
/// type.
async fn execute(
    state: &AppState,
    batch: BatchRequest,
    headers: &HeaderMap,
    identity: Identity,
    info: Option<&RequestInfo>,
) -> Response {
    let limits = &state.limits;
    if let BatchRequest::Batch(requests) = &batch
        && requests.len() > limits.max_batch_operations
    {
        return error_response(
            StatusCode::BAD_REQUEST,
            BATCH_TOO_LARGE,
            &format!(
                "a batch of {} operations exceeds the limit of {} (--max-batch-operations)",
                requests.len(),
                limits.max_batch_operations
            ),
        );
    }
    // The operations of one request share one cost budget.
    let budget = CostBudget::new();
    let with_caller_and_budget = |r: Request| {
        with_info(r, info, "http")
            .data(identity.clone())
            .data(budget.clone())
    };
    let batch = match batch {
        BatchRequest::Single(r) => BatchRequest::Single(with_caller_and_budget(r)),
        BatchRequest::Batch(rs) => {
            BatchRequest::Batch(rs.into_iter().map(with_caller_and_budget).collect())
        }
    };
    let response = state.runner.execute_batch(batch).await;

    let graphql_media = accepts(headers, GRAPHQL_RESPONSE_JSON);
    // With application/graphql-response+json, a request that never executed (unparsable,
    // invalid) is a 400, and one that got no data because the database is unreachable a 503
    // (retryable, as proxies and clients know it); plain JSON keeps the legacy "always 200"
    // behaviour clients expect.
    let status = match &response {
        // Not a failure: the client's cue to send the query (with 200, as Apollo's servers do,
        // so no client or proxy treats it as one).
        BatchResponse::Single(r) if all_coded(r, PERSISTED_QUERY_NOT_FOUND) => StatusCode::OK,
        BatchResponse::Single(r) if graphql_media && r.data == Value::Null && request_error(r) => {
            StatusCode::BAD_REQUEST
        }
        BatchResponse::Single(r)
            if graphql_media && r.data == Value::Null && all_coded(r, "SERVICE_UNAVAILABLE") =>
        {
            StatusCode::SERVICE_UNAVAILABLE
        }
        _ => StatusCode::OK,
    };
    // A response with a non-2xx status has no `data` entry at all (the spec's rule for this
    // media type; plain JSON clients keep the `"data": null` they know).
    let serialized = match &response {
        BatchResponse::Single(r) if status != StatusCode::OK => {
            serde_json::to_vec(&serde_json::json!({ "errors": r.errors }))
        }
        _ => serde_json::to_vec(&response),
    };
    let body = match serialized {
        Ok(body) => body,
        Err(err) => {
            tracing::error!("cannot serialize a GraphQL response: {err}");
            return plain_error(StatusCode::INTERNAL_SERVER_ERROR, "internal server error");
        }
    };
    let media = if graphql_media {
        GRAPHQL_RESPONSE_JSON
    } else {
        JSON
    };
    let mut http = (status, body).into_response();
    http.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(media));
    // Answers are the caller's own (and change as sessions run): no shared cache may keep one,
    // whatever a GET with a persisted query's hash looks like to a CDN.
    http.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-store"),
    );
    http
}

/// An error before execution: the document could not be parsed or validated.
fn request_error(response: &async_graphql::Response) -> bool {
    !response.errors.is_empty() && response.errors.iter().all(|e| e.path.is_empty())
}

/// Every error has `code` (SERVICE_UNAVAILABLE: the database could not be reached).
fn all_coded(response: &async_graphql::Response, code: &str) -> bool {
    !response.errors.is_empty()
        && response.errors.iter().all(|e| {
            matches!(e.extensions.as_ref().and_then(|x| x.get("code")),
                     Some(Value::String(c)) if c == code)
        })
}

fn accepts(headers: &HeaderMap, media: &str) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            item.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .eq_ignore_ascii_case(media)
        })
}

/// Whether the operation the request would run is a mutation (one GET must not run).
fn is_mutation(request: &Request) -> bool {
    let Ok(document) = parse_query(&request.query) else {
        return false;
    };
    selected_operation(&document, request.operation_name.as_deref())
        .is_some_and(|(_, operation)| operation.ty == OperationType::Mutation)
}

/// A GraphQL-shaped error for requests that never reach the executor.
fn plain_error(status: StatusCode, message: &str) -> Response {
    error_response(status, "BAD_REQUEST", message)
}
