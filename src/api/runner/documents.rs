//! Parsed documents, kept by their text: clients send the same few queries over and over, and
//! parsing one (async-graphql's pest grammar) costs more than resolving a small page of it.
//! A text is scanned before it is parsed, and a parsed document measured before anything walks
//! it (see [`super::text`] and [`super::expansion`]); the verdict is kept with it, so a repeated
//! query pays for neither. Only the syntax tree is kept, never anything resolved from it.

use std::sync::Arc;

use async_graphql::ServerError;
use async_graphql::parser::parse_query;
use async_graphql::parser::types::{DocumentOperations, ExecutableDocument, OperationDefinition};
use moka::sync::Cache;

use super::apart::heavy;
use super::codes::parse_failed;
use super::verdicts::Verdicts;
use super::{limits, text};
use crate::api::Limits;

/// Memory the kept documents may take, as estimated by [`kept_bytes`] (which is what bounds
/// them: a large document is kept as well as a small one, so that the edge's look at its kind
/// and its run share one parse).
const KEPT_BYTES: u64 = 64 * 1024 * 1024;
/// What a parsed document holds per token of its text (a field is a token, and about 200 bytes
/// of syntax tree).
const BYTES_PER_TOKEN: usize = 200;

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

/// A parsed document and what it expands to (see [`super::expansion`]).
#[derive(Debug, Clone)]
pub struct Parsed {
    pub document: ExecutableDocument,
    pub selections: u64,
    /// Its operations' validation verdicts (shared by every copy of the kept document).
    pub verdicts: Arc<Verdicts>,
    /// Tokens of its text.
    tokens: usize,
}

/// A text's verdict: its document, or why it was refused.
type Verdict = Result<Arc<Parsed>, ServerError>;

/// Texts longer than this are parsed off the runtime's worker threads (see [`heavy`]): parsing
/// takes about a microsecond per byte (ten in a debug build).
const PARSED_APART: usize = 4 * 1024;

#[derive(Clone)]
pub struct Documents {
    kept: Cache<String, Verdict>,
    limits: Limits,
}

impl Documents {
    pub fn new(limits: Limits) -> Documents {
        Documents {
            kept: Cache::builder()
                .weigher(|query: &String, verdict: &Verdict| kept_bytes(query, verdict))
                .max_capacity(KEPT_BYTES)
                .build(),
            limits,
        }
    }

    /// The document `query` parses to, within the limits on its text and on what it expands
    /// to; else the error (with its code) that refuses it.
    pub fn parse(&self, query: &str) -> Result<Parsed, ServerError> {
        let verdict = match self.kept.get(query) {
            Some(verdict) => verdict,
            None => {
                let verdict = if query.len() > PARSED_APART {
                    heavy(|| self.judge(query))
                } else {
                    self.judge(query)
                };
                // A text over the limit is refused by its length alone: keeping it would hold
                // megabytes to save one comparison.
                if query.len() <= self.limits.max_query_bytes {
                    self.kept.insert(query.to_owned(), verdict.clone());
                }
                verdict
            }
        };
        verdict.map(|parsed| (*parsed).clone())
    }

    fn judge(&self, query: &str) -> Verdict {
        let tokens = text::check(&self.limits, query)?;
        let document = parse_query(query).map_err(parse_failed)?;
        let selections = limits::check_selections(&self.limits, &document)?;
        Ok(Arc::new(Parsed {
            document,
            selections,
            verdicts: Arc::default(),
            tokens,
        }))
    }
}

/// What a kept verdict takes: its text, and the syntax tree of its document.
fn kept_bytes(query: &str, verdict: &Verdict) -> u32 {
    let tree = verdict
        .as_ref()
        .map_or(0, |parsed| parsed.tokens.saturating_mul(BYTES_PER_TOKEN));
    u32::try_from(query.len().saturating_add(tree)).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_document_is_the_one_parsed() {
        let documents = Documents::new(Limits::default());
        let query = "query A($n: Int) { sessions(first: $n) { totalCount } }";
        let first = documents.parse(query).unwrap();
        let again = documents.parse(query).unwrap();
        assert_eq!(
            format!("{:?}", first.document),
            format!("{:?}", again.document)
        );
        // The variable, `sessions` with its argument, `totalCount`.
        assert_eq!((first.selections, again.selections), (4, 4));
        documents.kept.run_pending_tasks();
        assert_eq!(documents.kept.entry_count(), 1, "kept once");
    }

    #[test]
    fn large_documents_are_kept_but_not_texts_over_the_limit() {
        let documents = Documents::new(Limits {
            max_query_bytes: 64 * 1024,
            ..Limits::default()
        });
        let large = format!("{{ {} }}", "__typename ".repeat(3_000));
        assert!(large.len() > 16 * 1024);
        documents.parse(&large).unwrap();
        let over = format!("{{ __typename }} #{}", "x".repeat(64 * 1024));
        documents.parse(&over).unwrap_err();
        documents.kept.run_pending_tasks();
        assert!(
            documents.kept.contains_key(&large),
            "one parse serves again"
        );
        assert!(!documents.kept.contains_key(&over));
    }

    #[test]
    fn a_refused_document_is_kept_with_its_verdict() {
        let documents = Documents::new(Limits {
            max_selections: 10,
            ..Limits::default()
        });
        let query = "{ ...F ...F } fragment F on Query { a b c d e }";
        for _ in 0..2 {
            let err = documents.parse(query).unwrap_err();
            let code = err.extensions.as_ref().and_then(|e| e.get("code")).cloned();
            assert_eq!(
                code,
                Some(async_graphql::Value::from("TOO_MANY_SELECTIONS"))
            );
        }
        documents.kept.run_pending_tasks();
        assert_eq!(documents.kept.entry_count(), 1, "the verdict is kept");
    }

    #[test]
    fn a_document_that_does_not_parse_is_refused_with_its_code() {
        let err = Documents::new(Limits::default())
            .parse("query {")
            .unwrap_err();
        let code = err.extensions.as_ref().and_then(|e| e.get("code")).cloned();
        assert_eq!(
            code,
            Some(async_graphql::Value::from("GRAPHQL_PARSE_FAILED"))
        );
    }
}
