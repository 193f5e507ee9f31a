//! What kind of operation a request runs, asked by the edge before it runs it: a query or
//! mutation answered as a stream is bounded like a request (its place in flight, its timeout),
//! a subscription is long-lived and is not.

use async_graphql::Request;
use async_graphql::parser::types::OperationType;

use super::{Runner, selected_operation};

impl Runner {
    /// Whether `request` runs a subscription. Its persisted query is filled in first, and its
    /// document is parsed through the cache execution then reads it from. `false` when that
    /// cannot be told (the document does not parse, no such operation): execution refuses
    /// such a request at once.
    pub fn runs_subscription(&self, request: &mut Request) -> bool {
        self.fill_persisted_query(request);
        let Ok(parsed) = self.0.documents.parse(&request.query) else {
            return false;
        };
        selected_operation(&parsed.document, request.operation_name.as_deref())
            .is_some_and(|(_, operation)| operation.ty == OperationType::Subscription)
    }
}
