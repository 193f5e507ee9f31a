//! What one request may ask for: depth, cost (summed over a batch), aliases, root fields, and
//! the size of its response. Each limit has its own code, and its error names the limit's value
//! and the request's figure.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_graphql::parser::types::{ExecutableDocument, Selection, SelectionSet};
use async_graphql::{ServerError, ValidationResult};

use super::codes::VALIDATION_FAILED;
use super::expansion::{Unmeasurable, expanded_size};
use crate::api::Limits;

pub const TOO_DEEP: &str = "QUERY_TOO_DEEP";
pub const TOO_COMPLEX: &str = "QUERY_TOO_COMPLEX";
pub const TOO_MANY_ALIASES: &str = "TOO_MANY_ALIASES";
pub const TOO_MANY_ROOT_FIELDS: &str = "TOO_MANY_ROOT_FIELDS";
pub const RESPONSE_TOO_LARGE: &str = "RESPONSE_TOO_LARGE";
pub const DOCUMENT_TOO_LARGE: &str = "DOCUMENT_TOO_LARGE";
pub const TOO_MANY_SELECTIONS: &str = "TOO_MANY_SELECTIONS";
pub const TOO_MANY_ERRORS: &str = "TOO_MANY_ERRORS";

/// Errors one response carries at most; the rest are summed up in one more.
pub const MAX_ERRORS: usize = 100;

/// The cost left to the operations of one HTTP request (a JSON batch shares one budget).
/// The edge puts one into every operation's data.
#[derive(Clone)]
pub struct CostBudget(Arc<AtomicUsize>);

impl CostBudget {
    pub fn new() -> CostBudget {
        CostBudget(Arc::new(AtomicUsize::new(0)))
    }

    /// Adds `cost`; the total spent so far.
    fn spend(&self, cost: usize) -> usize {
        self.0
            .fetch_add(cost, Ordering::Relaxed)
            .saturating_add(cost)
    }
}

impl Default for CostBudget {
    fn default() -> Self {
        Self::new()
    }
}

/// An error with its `extensions.code`, for errors raised outside any resolver.
pub fn coded_error(code: &str, message: impl Into<String>) -> ServerError {
    let mut err = ServerError::new(message, None);
    err.extensions
        .get_or_insert_with(Default::default)
        .set("code", code);
    err
}

/// `412000` as `412,000`.
pub fn figure(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The limits on the document's shape, checked once it is parsed.
pub fn check_shape(limits: &Limits, document: &ExecutableDocument) -> Result<(), ServerError> {
    let aliases = count_aliases(document);
    if aliases > limits.max_aliases {
        return Err(coded_error(
            TOO_MANY_ALIASES,
            format!(
                "{} aliases exceed the limit of {} (--max-aliases)",
                figure(aliases),
                figure(limits.max_aliases)
            ),
        ));
    }
    let roots = most_root_fields(document);
    if roots > limits.max_root_fields {
        return Err(coded_error(
            TOO_MANY_ROOT_FIELDS,
            format!(
                "{} root fields in one operation exceed the limit of {} (--max-root-fields)",
                figure(roots),
                figure(limits.max_root_fields)
            ),
        ));
    }
    Ok(())
}

/// What the document expands to (see [`super::expansion`]) within its limit; else the error,
/// or the error of a fragment that spreads itself.
pub fn check_selections(
    limits: &Limits,
    document: &ExecutableDocument,
) -> Result<u64, ServerError> {
    match expanded_size(document) {
        Ok(size) if size > limits.max_selections as u64 => Err(coded_error(
            TOO_MANY_SELECTIONS,
            format!(
                "the document expands to {} selections (fields, fragments, argument values and \
                 directives, counted each time a fragment is spread), over the limit of {} \
                 (--max-selections)",
                if size == u64::MAX {
                    "more than 18 quintillion".to_owned()
                } else {
                    figure(usize::try_from(size).unwrap_or(usize::MAX))
                },
                figure(limits.max_selections)
            ),
        )),
        Ok(size) => Ok(size),
        Err(Unmeasurable::Cycle(names)) => Err(coded_error(
            VALIDATION_FAILED,
            format!(
                "Cannot spread fragment \"{}\" within itself (through {})",
                names[0],
                names.join(" → ")
            ),
        )),
    }
}

/// Keeps the first [`MAX_ERRORS`] errors and replaces the rest by one that counts them.
pub fn cap_errors(errors: &mut Vec<ServerError>) {
    if errors.len() > MAX_ERRORS {
        let left_out = errors.len() - MAX_ERRORS;
        errors.truncate(MAX_ERRORS);
        errors.push(coded_error(
            TOO_MANY_ERRORS,
            format!(
                "{} more errors were left out (a response carries at most {MAX_ERRORS})",
                figure(left_out)
            ),
        ));
    }
}

/// The limits on depth and cost, checked once the operation is validated; the cost is spent
/// from the request's `budget`, if it has one (a batch shares it).
pub fn check_cost(
    limits: &Limits,
    result: &ValidationResult,
    budget: Option<&CostBudget>,
) -> Result<(), ServerError> {
    if result.depth > limits.max_query_depth {
        return Err(coded_error(
            TOO_DEEP,
            format!(
                "query depth {} exceeds the limit of {} (--max-query-depth)",
                result.depth, limits.max_query_depth
            ),
        ));
    }
    if result.complexity > limits.max_query_complexity {
        // A cost past any count (an introspection walk stops at the limit) is said so.
        let cost = if result.complexity == usize::MAX {
            format!("more than {}", figure(limits.max_query_complexity))
        } else {
            figure(result.complexity)
        };
        return Err(coded_error(
            TOO_COMPLEX,
            format!(
                "query cost {cost} exceeds the limit of {} (--max-query-complexity)",
                figure(limits.max_query_complexity)
            ),
        ));
    }
    if let Some(budget) = budget {
        let spent = budget.spend(result.complexity);
        if spent > limits.max_query_complexity {
            return Err(coded_error(
                TOO_COMPLEX,
                format!(
                    "the batch's cost {} so far exceeds the limit of {} for one request \
                     (--max-query-complexity)",
                    figure(spent),
                    figure(limits.max_query_complexity)
                ),
            ));
        }
    }
    Ok(())
}

/// The error that replaces a response over the size limit.
pub fn response_too_large(limits: &Limits) -> ServerError {
    coded_error(
        RESPONSE_TOO_LARGE,
        format!(
            "the response exceeds the limit of {} bytes (--max-response-bytes); select fewer \
             fields or rows",
            figure(limits.max_response_bytes)
        ),
    )
}

/// Fields with an alias, in the whole document.
fn count_aliases(document: &ExecutableDocument) -> usize {
    fn in_set(set: &SelectionSet) -> usize {
        set.items
            .iter()
            .map(|item| match &item.node {
                Selection::Field(field) => {
                    usize::from(field.node.alias.is_some()) + in_set(&field.node.selection_set.node)
                }
                Selection::InlineFragment(fragment) => in_set(&fragment.node.selection_set.node),
                Selection::FragmentSpread(_) => 0,
            })
            .sum()
    }
    document
        .operations
        .iter()
        .map(|(_, op)| in_set(&op.node.selection_set.node))
        .chain(
            document
                .fragments
                .values()
                .map(|f| in_set(&f.node.selection_set.node)),
        )
        .sum()
}

/// The most root fields any operation selects (through fragments too).
fn most_root_fields(document: &ExecutableDocument) -> usize {
    fn in_set<'a>(
        document: &'a ExecutableDocument,
        set: &'a SelectionSet,
        seen: &mut HashSet<&'a str>,
    ) -> usize {
        set.items
            .iter()
            .map(|item| match &item.node {
                Selection::Field(_) => 1,
                Selection::InlineFragment(fragment) => {
                    in_set(document, &fragment.node.selection_set.node, seen)
                }
                Selection::FragmentSpread(spread) => {
                    let name = spread.node.fragment_name.node.as_str();
                    // A fragment spread twice selects its fields once (and cycles are invalid).
                    match document.fragments.get(&spread.node.fragment_name.node) {
                        Some(fragment) if seen.insert(name) => {
                            in_set(document, &fragment.node.selection_set.node, seen)
                        }
                        _ => 0,
                    }
                }
            })
            .sum()
    }
    document
        .operations
        .iter()
        .map(|(_, op)| in_set(document, &op.node.selection_set.node, &mut HashSet::new()))
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use async_graphql::parser::parse_query;

    use super::*;

    #[test]
    fn figures_have_thousands_separators() {
        assert_eq!(figure(0), "0");
        assert_eq!(figure(999), "999");
        assert_eq!(figure(412_000), "412,000");
        assert_eq!(figure(1_250_000), "1,250,000");
    }

    #[test]
    fn aliases_and_root_fields_are_counted_through_fragments() {
        let doc = parse_query(
            "query A { a: sessions { totalCount } b: sessions { totalCount } ...F ...F }
             fragment F on Query { c: viewer { role } node(id: \"x\") { id } }
             query B { ... on Query { viewer { role } } }",
        )
        .unwrap();
        assert_eq!(count_aliases(&doc), 3);
        assert_eq!(most_root_fields(&doc), 4);
    }
}
