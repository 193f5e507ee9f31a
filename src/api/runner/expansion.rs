//! What a document expands to: every selection (fields, `__typename` included, fragment spreads
//! and inline fragments) with its arguments' values and its directives, counted as often as
//! fragment spreads repeat it. async-graphql's validation and execution walk a document this way
//! (each spread expanded again), several times per request, so this figure bounds their work.
//!
//! It is measured without expanding anything: each fragment's size is computed once, from its
//! own selections and the sizes of the fragments it spreads, in dependency order (no recursion
//! through fragments, so a long chain of them cannot exhaust the stack), with saturating sums. A
//! document of 25 fragments each spreading the next twice is measured in 25 steps, not 2^25.

use std::collections::{HashMap, HashSet};

use async_graphql::parser::types::{Directive, ExecutableDocument, Field, Selection, SelectionSet};
use async_graphql::{Name, Positioned};
use async_graphql_value::Value;

/// Why a document could not be measured.
#[derive(Debug, PartialEq, Eq)]
pub enum Unmeasurable {
    /// This fragment spreads itself, through the others named (in order).
    Cycle(Vec<String>),
}

/// The document's size once expanded: its operations' and its fragment definitions' (validation
/// visits each definition once on its own, besides every spread of it).
pub fn expanded_size(document: &ExecutableDocument) -> Result<u64, Unmeasurable> {
    let fragments = fragment_sizes(document)?;
    let operations = document.operations.iter().fold(0u64, |sum, (_, op)| {
        let op = &op.node;
        sum.saturating_add(set_size(&op.selection_set.node, &fragments))
            .saturating_add(directives_size(&op.directives))
            .saturating_add(op.variable_definitions.len() as u64)
    });
    Ok(fragments
        .values()
        .fold(operations, |sum, size| sum.saturating_add(*size)))
}

/// Each fragment's expanded size (its directives and type condition included).
fn fragment_sizes(document: &ExecutableDocument) -> Result<HashMap<&str, u64>, Unmeasurable> {
    // What each fragment holds besides spreads, and which fragments it spreads, how often.
    let mut parts: HashMap<&str, (u64, HashMap<&str, u64>)> = HashMap::new();
    for (name, fragment) in &document.fragments {
        let mut spreads = HashMap::new();
        let own = own_size(&fragment.node.selection_set.node, &mut spreads)
            .saturating_add(1)
            .saturating_add(directives_size(&fragment.node.directives));
        parts.insert(name.as_str(), (own, spreads));
    }

    // Depth-first over the spread graph with an explicit stack; a fragment met again while
    // it is still open is a cycle.
    let mut sizes: HashMap<&str, u64> = HashMap::new();
    let mut names: Vec<&str> = parts.keys().copied().collect();
    names.sort_unstable();
    for start in names {
        if sizes.contains_key(start) {
            continue;
        }
        let mut open: Vec<&str> = vec![start];
        let mut on_path: HashSet<&str> = HashSet::from([start]);
        while let Some(&name) = open.last() {
            let (own, spreads) = &parts[name];
            let waiting = spreads
                .keys()
                .copied()
                .filter(|dep| parts.contains_key(dep) && !sizes.contains_key(dep))
                .min();
            match waiting {
                Some(dep) if on_path.contains(dep) => {
                    let at = open.iter().position(|&o| o == dep).unwrap_or(0);
                    let mut cycle: Vec<String> =
                        open[at..].iter().map(|n| (*n).to_owned()).collect();
                    cycle.push(dep.to_owned());
                    return Err(Unmeasurable::Cycle(cycle));
                }
                Some(dep) => {
                    open.push(dep);
                    on_path.insert(dep);
                }
                None => {
                    let size = with_spreads(*own, spreads, &sizes);
                    sizes.insert(name, size);
                    on_path.remove(name);
                    open.pop();
                }
            }
        }
    }
    Ok(sizes)
}

/// The size of `set` without the fragments it spreads, whose spreads are counted into
/// `spreads` (each spread itself, with its directives, is part of the size).
fn own_size<'a>(set: &'a SelectionSet, spreads: &mut HashMap<&'a str, u64>) -> u64 {
    set.items.iter().fold(0u64, |sum, item| {
        let size = match &item.node {
            Selection::Field(field) => field_size(&field.node)
                .saturating_add(own_size(&field.node.selection_set.node, spreads)),
            Selection::InlineFragment(inline) => directives_size(&inline.node.directives)
                .saturating_add(1)
                .saturating_add(own_size(&inline.node.selection_set.node, spreads)),
            Selection::FragmentSpread(spread) => {
                let times = spreads
                    .entry(spread.node.fragment_name.node.as_str())
                    .or_insert(0);
                *times = times.saturating_add(1);
                directives_size(&spread.node.directives).saturating_add(1)
            }
        };
        sum.saturating_add(size)
    })
}

/// The size of `set` once every fragment's size is known.
fn set_size(set: &SelectionSet, fragments: &HashMap<&str, u64>) -> u64 {
    let mut spreads = HashMap::new();
    with_spreads(own_size(set, &mut spreads), &spreads, fragments)
}

/// `own` plus the sizes of the fragments spread, as often as they are spread (fragments not
/// defined count nothing: validation refuses them).
fn with_spreads(own: u64, spreads: &HashMap<&str, u64>, fragments: &HashMap<&str, u64>) -> u64 {
    spreads.iter().fold(own, |sum, (name, times)| {
        let each = fragments.get(name).copied().unwrap_or(0);
        sum.saturating_add(each.saturating_mul(*times))
    })
}

/// A field: itself, its arguments' values and its directives.
fn field_size(field: &Field) -> u64 {
    1u64.saturating_add(arguments_size(&field.arguments))
        .saturating_add(directives_size(&field.directives))
}

fn directives_size(directives: &[Positioned<Directive>]) -> u64 {
    directives.iter().fold(0u64, |sum, directive| {
        sum.saturating_add(1)
            .saturating_add(arguments_size(&directive.node.arguments))
    })
}

fn arguments_size(arguments: &[(Positioned<Name>, Positioned<Value>)]) -> u64 {
    arguments.iter().fold(0u64, |sum, (_, value)| {
        sum.saturating_add(value_size(&value.node))
    })
}

/// Every value in a (possibly nested) argument value. Its nesting is bounded by the text's
/// (`--max-query-nesting`), so the recursion is too.
fn value_size(value: &Value) -> u64 {
    match value {
        Value::List(items) => items
            .iter()
            .fold(1u64, |sum, item| sum.saturating_add(value_size(item))),
        Value::Object(fields) => fields
            .values()
            .fold(1u64, |sum, item| sum.saturating_add(value_size(item))),
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use async_graphql::parser::parse_query;

    use super::*;

    fn size(query: &str) -> Result<u64, Unmeasurable> {
        expanded_size(&parse_query(query).unwrap())
    }

    /// `{...F0}` where each fragment spreads the next twice, the last selects `__typename`.
    pub fn doubling(n: usize) -> String {
        let mut query = "{ ...F0 }".to_owned();
        for i in 0..n {
            query.push_str(&format!(
                " fragment F{i} on Query {{ ...F{} ...F{} }}",
                i + 1,
                i + 1
            ));
        }
        query.push_str(&format!(" fragment F{n} on Query {{ __typename }}"));
        query
    }

    #[test]
    fn plain_selections_count_once_with_arguments_and_directives() {
        // a, b (with its argument), c (with a directive and its argument).
        assert_eq!(size("{ a b(x: 1) c @skip(if: false) }"), Ok(6));
        // A list argument of three values is four values.
        assert_eq!(size("{ a(ids: [1, 2, 3]) }"), Ok(5));
        // Operations' variable definitions count.
        assert_eq!(size("query($v: Int) { a }"), Ok(2));
    }

    #[test]
    fn each_spread_expands_its_fragment_again() {
        // Operation: the spread (1) + F (1 + a + b) twice; F's definition once more on its own.
        assert_eq!(
            size("{ ...F ...F } fragment F on Query { a b }"),
            Ok(2 + 2 * 3 + 3)
        );
        // A diamond: G is reached through both F and H.
        let diamond = "{ ...F ...H } fragment F on Query { ...G } fragment H on Query { ...G } \
                       fragment G on Query { a }";
        // G = 2; F = H = 1 + 1 + 2 = 4; operation = 1 + 4 + 1 + 4 = 10; definitions 2 + 4 + 4.
        assert_eq!(size(diamond), Ok(20));
    }

    #[test]
    fn doubling_fragments_are_measured_without_expanding_them() {
        let started = std::time::Instant::now();
        let big = size(&doubling(60)).unwrap();
        assert!(big > 1 << 60, "{big}");
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(size(&doubling(200)), Ok(u64::MAX), "saturates");
    }

    #[test]
    fn cycles_are_found_not_followed() {
        assert_eq!(
            size("{ ...A } fragment A on Query { ...B } fragment B on Query { a ...A }"),
            Err(Unmeasurable::Cycle(vec![
                "A".into(),
                "B".into(),
                "A".into()
            ]))
        );
        assert_eq!(
            size("{ ...A } fragment A on Query { ... on Query { ...A } }"),
            Err(Unmeasurable::Cycle(vec!["A".into(), "A".into()]))
        );
    }

    #[test]
    fn a_long_chain_of_fragments_does_not_recurse() {
        let mut query = "{ ...F0 }".to_owned();
        for i in 0..20_000 {
            query.push_str(&format!(" fragment F{i} on Query {{ ...F{} }}", i + 1));
        }
        query.push_str(" fragment F20000 on Query { a }");
        let document = parse_query(&query).unwrap();
        // Run on a small stack: a recursive walk of 20,000 fragments would overflow it.
        let size = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || expanded_size(&document))
            .unwrap()
            .join()
            .unwrap()
            .unwrap();
        assert!(size > 20_000);
    }
}
