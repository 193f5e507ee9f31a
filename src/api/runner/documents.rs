//! Parsed documents, kept by their text: clients send the same few queries over and over, and
//! parsing one (async-graphql's pest grammar) costs more than resolving a small page of it.
//! Only the syntax tree is kept, never anything resolved from it.

use std::sync::Arc;

use async_graphql::ServerError;
use async_graphql::parser::parse_query;
use async_graphql::parser::types::{DocumentOperations, ExecutableDocument, OperationDefinition};
use moka::sync::Cache;

use super::codes::parse_failed;

/// Documents longer than this are parsed every time (generated or hostile ones).
const LONGEST_KEPT: usize = 16 * 1024;
/// Total length of the texts kept.
const KEPT_BYTES: u64 = 4 * 1024 * 1024;

/// The operation a request runs: the one named, else the only one (`None` when there is no
/// such operation; execution then refuses the request).
pub fn selected_operation<'a>(
    document: &'a ExecutableDocument,
    operation_name: Option<&str>,
) -> Option<(Option<&'a str>, &'a OperationDefinition)> {
    match (&document.operations, operation_name) {
        (DocumentOperations::Single(operation), _) => Some((None, &operation.node)),
        (DocumentOperations::Multiple(operations), Some(name)) => operations
            .get_key_value(name)
            .map(|(name, op)| (Some(name.as_str()), &op.node)),
        (DocumentOperations::Multiple(operations), None) if operations.len() == 1 => operations
            .iter()
            .next()
            .map(|(name, op)| (Some(name.as_str()), &op.node)),
        (DocumentOperations::Multiple(_), None) => None,
    }
}

#[derive(Clone)]
pub struct Documents(Cache<String, Arc<ExecutableDocument>>);

impl Documents {
    pub fn new() -> Documents {
        Documents(
            Cache::builder()
                .weigher(|query: &String, _| u32::try_from(query.len()).unwrap_or(u32::MAX))
                .max_capacity(KEPT_BYTES)
                .build(),
        )
    }

    /// The document `query` parses to, or the parse error (with its code).
    pub fn parse(&self, query: &str) -> Result<ExecutableDocument, ServerError> {
        if let Some(document) = self.0.get(query) {
            return Ok((*document).clone());
        }
        let document = parse_query(query).map_err(parse_failed)?;
        if query.len() <= LONGEST_KEPT {
            self.0.insert(query.to_owned(), Arc::new(document.clone()));
        }
        Ok(document)
    }
}

impl Default for Documents {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_document_is_the_one_parsed() {
        let documents = Documents::new();
        let query = "query A($n: Int) { sessions(first: $n) { totalCount } }";
        let first = documents.parse(query).unwrap();
        let again = documents.parse(query).unwrap();
        assert_eq!(format!("{first:?}"), format!("{again:?}"));
        documents.0.run_pending_tasks();
        assert_eq!(documents.0.entry_count(), 1, "kept once");
    }

    #[test]
    fn a_document_that_does_not_parse_is_refused_with_its_code() {
        let err = Documents::new().parse("query {").unwrap_err();
        let code = err.extensions.as_ref().and_then(|e| e.get("code")).cloned();
        assert_eq!(
            code,
            Some(async_graphql::Value::from("GRAPHQL_PARSE_FAILED"))
        );
    }
}
