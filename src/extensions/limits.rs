//! What one request may ask for: depth, cost (summed over a batch), aliases, root fields, and
//! the size of its response. Each limit has its own code, and its error names the limit's value
//! and the request's figure.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use async_graphql::extensions::{
    Extension, ExtensionContext, ExtensionFactory, NextExecute, NextParseQuery, NextResolve,
    NextValidation, ResolveInfo,
};
use async_graphql::parser::types::{ExecutableDocument, Selection, SelectionSet};
use async_graphql::{Response, ServerError, ServerResult, ValidationResult, Value, Variables};

use crate::config::Limits;

pub const TOO_DEEP: &str = "QUERY_TOO_DEEP";
pub const TOO_COMPLEX: &str = "QUERY_TOO_COMPLEX";
pub const TOO_MANY_ALIASES: &str = "TOO_MANY_ALIASES";
pub const TOO_MANY_ROOT_FIELDS: &str = "TOO_MANY_ROOT_FIELDS";
pub const RESPONSE_TOO_LARGE: &str = "RESPONSE_TOO_LARGE";

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

/// Installs the limits.
pub struct RequestLimits(pub Limits);

impl ExtensionFactory for RequestLimits {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(LimitsOfOne {
            limits: self.0,
            response_bytes: AtomicUsize::new(0),
            too_large: AtomicBool::new(false),
        })
    }
}

/// The limits, for one request (or one subscription: then the response size is per event).
struct LimitsOfOne {
    limits: Limits,
    /// Bytes resolved so far in this response.
    response_bytes: AtomicUsize,
    too_large: AtomicBool,
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
fn figure(n: usize) -> String {
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

#[async_graphql::async_trait::async_trait]
impl Extension for LimitsOfOne {
    async fn parse_query(
        &self,
        ctx: &ExtensionContext<'_>,
        query: &str,
        variables: &Variables,
        next: NextParseQuery<'_>,
    ) -> ServerResult<ExecutableDocument> {
        let document = next.run(ctx, query, variables).await?;
        let aliases = count_aliases(&document);
        if aliases > self.limits.max_aliases {
            return Err(coded_error(
                TOO_MANY_ALIASES,
                format!(
                    "{} aliases exceed the limit of {}",
                    figure(aliases),
                    figure(self.limits.max_aliases)
                ),
            ));
        }
        let roots = most_root_fields(&document);
        if roots > self.limits.max_root_fields {
            return Err(coded_error(
                TOO_MANY_ROOT_FIELDS,
                format!(
                    "{} root fields in one operation exceed the limit of {}",
                    figure(roots),
                    figure(self.limits.max_root_fields)
                ),
            ));
        }
        Ok(document)
    }

    async fn validation(
        &self,
        ctx: &ExtensionContext<'_>,
        next: NextValidation<'_>,
    ) -> Result<ValidationResult, Vec<ServerError>> {
        let result = next.run(ctx).await?;
        let limits = &self.limits;
        if result.depth > limits.max_query_depth {
            return Err(vec![coded_error(
                TOO_DEEP,
                format!(
                    "query depth {} exceeds the limit of {}",
                    result.depth, limits.max_query_depth
                ),
            )]);
        }
        if result.complexity > limits.max_query_complexity {
            return Err(vec![coded_error(
                TOO_COMPLEX,
                format!(
                    "query cost {} exceeds the limit of {}",
                    figure(result.complexity),
                    figure(limits.max_query_complexity)
                ),
            )]);
        }
        if let Some(budget) = ctx.data_opt::<CostBudget>() {
            let spent = budget.spend(result.complexity);
            if spent > limits.max_query_complexity {
                return Err(vec![coded_error(
                    TOO_COMPLEX,
                    format!(
                        "the batch's cost {} so far exceeds the limit of {} for one request",
                        figure(spent),
                        figure(limits.max_query_complexity)
                    ),
                )]);
            }
        }
        Ok(result)
    }

    async fn execute(
        &self,
        ctx: &ExtensionContext<'_>,
        operation_name: Option<&str>,
        next: NextExecute<'_>,
    ) -> Response {
        // Once per query or mutation, and once per event of a subscription.
        self.response_bytes.store(0, Ordering::Relaxed);
        self.too_large.store(false, Ordering::Relaxed);
        let response = next.run(ctx, operation_name).await;
        if self.too_large.load(Ordering::Relaxed) {
            // Nothing of an oversized response goes out: it was not finished anyway.
            return Response::from_errors(vec![coded_error(
                RESPONSE_TOO_LARGE,
                format!(
                    "the response exceeds the limit of {} bytes; select fewer fields or rows",
                    figure(self.limits.max_response_bytes)
                ),
            )]);
        }
        response
    }

    async fn resolve(
        &self,
        ctx: &ExtensionContext<'_>,
        info: ResolveInfo<'_>,
        next: NextResolve<'_>,
    ) -> ServerResult<Option<Value>> {
        // Once over the limit, nothing more is resolved.
        if self.too_large.load(Ordering::Relaxed) {
            return Err(coded_error(
                RESPONSE_TOO_LARGE,
                "response too large".to_owned(),
            ));
        }
        let is_json = info.return_type.trim_end_matches('!') == "JSON";
        let value = next.run(ctx, info).await?;
        if let Some(value) = &value {
            // Objects and lists of objects are counted through their own fields.
            let bytes = match value {
                Value::Object(_) | Value::List(_) if !is_json => 0,
                value => size_of(value),
            };
            let total = self.response_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
            if total > self.limits.max_response_bytes {
                self.too_large.store(true, Ordering::Relaxed);
            }
        }
        Ok(value)
    }
}

/// About how many bytes `value` takes as JSON.
fn size_of(value: &Value) -> usize {
    match value {
        Value::Null => 4,
        Value::Boolean(_) => 5,
        Value::Number(_) => 8,
        Value::String(s) => s.len() + 2,
        Value::Enum(name) => name.len() + 2,
        Value::Binary(bytes) => bytes.len() * 4 / 3 + 2,
        Value::List(items) => items.iter().map(size_of).sum::<usize>() + items.len() + 1,
        Value::Object(fields) => fields
            .iter()
            .map(|(key, v)| key.len() + 4 + size_of(v))
            .sum::<usize>()
            .saturating_add(1),
    }
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
