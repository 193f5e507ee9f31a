//! Output scalars of our own.

use std::borrow::Cow;
use std::sync::Arc;

use async_graphql::parser::types::Field;
use async_graphql::registry::Registry;
use async_graphql::{ContextSelectionSet, Json, OutputType, Positioned, ServerResult, Value};

/// A JSON value held in a shared row, put into the response straight from the row (returning
/// an owned value would first copy the row's whole tree). The schema's `JSON` scalar, like
/// async-graphql's own.
pub struct SharedJson<R> {
    row: Arc<R>,
    field: fn(&R) -> &serde_json::Value,
}

impl<R> SharedJson<R> {
    pub fn new(row: Arc<R>, field: fn(&R) -> &serde_json::Value) -> Self {
        SharedJson { row, field }
    }
}

impl<R: Send + Sync> OutputType for SharedJson<R> {
    fn type_name() -> Cow<'static, str> {
        <Json<serde_json::Value> as OutputType>::type_name()
    }

    fn create_type_info(registry: &mut Registry) -> String {
        <Json<serde_json::Value> as OutputType>::create_type_info(registry)
    }

    async fn resolve(
        &self,
        _: &ContextSelectionSet<'_>,
        _: &Positioned<Field>,
    ) -> ServerResult<Value> {
        Ok(async_graphql::to_value((self.field)(&self.row)).unwrap_or_default())
    }
}
