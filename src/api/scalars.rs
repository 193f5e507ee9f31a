//! Output scalars of our own: the text and JSON of rows, counted toward the response's size
//! as they are put into it (see [`crate::api::runner::response_size`]).

use std::borrow::Cow;
use std::sync::Arc;

use async_graphql::parser::types::Field;
use async_graphql::registry::Registry;
use async_graphql::{
    ContextSelectionSet, Json, OutputType, Positioned, ServerError, ServerResult, Value,
};

use crate::api::runner::response_size::{ResponseSize, size_of};
use crate::store::RawJson;

/// Adds `value`'s bytes to the response's size; an error past the limit.
fn counted(ctx: &ContextSelectionSet<'_>, value: Value) -> ServerResult<Value> {
    if let Some(size) = ctx.data_opt::<Arc<ResponseSize>>() {
        size.add(size_of(&value))?;
    }
    Ok(value)
}

/// Text of a row (the schema's `String`).
pub struct Text<'a>(pub &'a str);

impl OutputType for Text<'_> {
    fn type_name() -> Cow<'static, str> {
        <String as OutputType>::type_name()
    }

    fn create_type_info(registry: &mut Registry) -> String {
        <String as OutputType>::create_type_info(registry)
    }

    async fn resolve(
        &self,
        ctx: &ContextSelectionSet<'_>,
        _: &Positioned<Field>,
    ) -> ServerResult<Value> {
        counted(ctx, Value::String(self.0.to_owned()))
    }
}

/// A JSON value of a row, as the database sent it (the schema's `JSON` scalar, like
/// async-graphql's own).
pub struct JsonRef<'a>(pub &'a RawJson);

impl OutputType for JsonRef<'_> {
    fn type_name() -> Cow<'static, str> {
        <Json<serde_json::Value> as OutputType>::type_name()
    }

    fn create_type_info(registry: &mut Registry) -> String {
        <Json<serde_json::Value> as OutputType>::create_type_info(registry)
    }

    async fn resolve(
        &self,
        ctx: &ContextSelectionSet<'_>,
        _: &Positioned<Field>,
    ) -> ServerResult<Value> {
        let value = serde_json::from_str(self.0.get())
            .map_err(|e| ServerError::new(e.to_string(), None))?;
        counted(ctx, value)
    }
}

/// A JSON value held in a shared row, put into the response straight from the row (returning
/// an owned value would first copy the row's whole tree). The schema's `JSON` scalar.
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
        ctx: &ContextSelectionSet<'_>,
        _: &Positioned<Field>,
    ) -> ServerResult<Value> {
        counted(
            ctx,
            async_graphql::to_value((self.field)(&self.row)).unwrap_or_default(),
        )
    }
}

/// Text held in a shared row (the schema's `String`).
pub struct SharedText<R> {
    row: Arc<R>,
    field: fn(&R) -> &str,
}

impl<R> SharedText<R> {
    pub fn new(row: Arc<R>, field: fn(&R) -> &str) -> Self {
        SharedText { row, field }
    }
}

impl<R: Send + Sync> OutputType for SharedText<R> {
    fn type_name() -> Cow<'static, str> {
        <String as OutputType>::type_name()
    }

    fn create_type_info(registry: &mut Registry) -> String {
        <String as OutputType>::create_type_info(registry)
    }

    async fn resolve(
        &self,
        ctx: &ContextSelectionSet<'_>,
        field: &Positioned<Field>,
    ) -> ServerResult<Value> {
        Text((self.field)(&self.row)).resolve(ctx, field).await
    }
}
