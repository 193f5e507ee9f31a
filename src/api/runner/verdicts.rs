//! Validation verdicts, kept with their document.
//!
//! Clients send the same few documents over and over (an agent runtime sends one append
//! mutation per token) with new variables each time, and full validation (22 rules, each
//! walking the document) was the largest cost of a small operation left in casefile's own code.
//! What it decides depends on the document and the operation alone, except in two places:
//!
//! - one rule (async-graphql's `ArgumentsOfCorrectType`) checks each argument that holds a
//!   variable against the value the request gives that variable;
//! - the figures (depth, cost) are computed by cost functions that read their field's
//!   arguments, and so the variables in them.
//!
//! So once an operation has passed in full, its verdict keeps the arguments that hold variables
//! with their types, and whether any of them feeds a cost function. A request for it again
//! checks just those arguments against its variables, here, as that rule does (same messages,
//! same positions), and takes the kept figures, or recomputes them on the fast pass when they
//! depend on the variables. A bad value is refused before anything runs, as on the full pass:
//! never a field error after an earlier root field of a mutation has written.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use async_graphql::indexmap::IndexMap;
use async_graphql::parser::types::{
    Directive, ExecutableDocument, OperationDefinition, OperationType, Selection, SelectionSet,
};
use async_graphql::registry::{MetaInputValue, MetaType, MetaTypeName, Registry};
use async_graphql::{
    Name, Pos, Positioned, QueryPathNode, QueryPathSegment, ServerError, ValidationResult,
    Variables,
};
use async_graphql_value::{ConstValue, Value};

use super::codes::code_validation_error;

/// Operations of one document whose verdicts are kept, at most: a document may hold many, and
/// a request may name any of them.
const OPERATIONS_KEPT: usize = 8;
/// Arguments holding variables that a kept verdict may list, at most: past it the operation is
/// validated in full each time (a document's fragments are listed once per operation).
const ARGUMENTS_KEPT: usize = 256;

/// The kept verdicts of a document's operations, by the operation name requests give.
#[derive(Debug, Default)]
pub struct Verdicts(Mutex<Vec<(Option<String>, Arc<Verdict>)>>);

impl Verdicts {
    /// The verdict kept for `operation_name`, if it passed before.
    pub fn get(&self, operation_name: Option<&str>) -> Option<Arc<Verdict>> {
        let kept = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        kept.iter()
            .find(|(name, _)| name.as_deref() == operation_name)
            .map(|(_, verdict)| verdict.clone())
    }

    /// Keeps the verdict of `operation_name`, which just passed in full with `figures`.
    pub fn keep(
        &self,
        registry: &Registry,
        document: &ExecutableDocument,
        operation_name: Option<&str>,
        figures: ValidationResult,
    ) {
        let Some((_, operation)) = super::selected_operation(document, operation_name) else {
            return;
        };
        let Some(verdict) = Verdict::of(registry, document, operation, figures) else {
            return;
        };
        let mut kept = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if kept.len() < OPERATIONS_KEPT
            && !kept
                .iter()
                .any(|(name, _)| name.as_deref() == operation_name)
        {
            kept.push((
                operation_name.map(str::to_owned),
                std::sync::Arc::new(verdict),
            ));
        }
    }
}

/// What an operation that passed in full still needs checked with each request's variables.
#[derive(Debug)]
pub struct Verdict {
    /// Arguments whose values hold variables, in the order the full pass visits them.
    arguments: Vec<VariableArgument>,
    /// The figures, when no cost function reads a variable (else the fast pass computes them).
    figures: Option<ValidationResult>,
}

/// An argument whose value holds a variable, and the type its value must have.
#[derive(Debug)]
struct VariableArgument {
    name: String,
    position: Pos,
    ty: String,
    value: Value,
}

impl Verdict {
    /// The verdict of `operation`, the one a request selects; `None` when it is too large to
    /// keep.
    fn of(
        registry: &Registry,
        document: &ExecutableDocument,
        operation: &OperationDefinition,
        figures: ValidationResult,
    ) -> Option<Verdict> {
        let mut walk = Walk {
            registry,
            listing: true,
            arguments: Vec::new(),
            costed: false,
        };
        // The full pass visits every fragment definition with the request's variables, then
        // every operation; those the request's name does not select without them (it checks
        // none of their variables' values). Its cost functions read the variables everywhere.
        for fragment in document.fragments.values() {
            let on = registry
                .types
                .get(fragment.node.type_condition.node.on.node.as_str());
            walk.directives(&fragment.node.directives);
            walk.selections(on, &fragment.node.selection_set.node);
        }
        for (_, other) in document.operations.iter() {
            walk.listing = std::ptr::eq(&other.node, operation);
            let root = match other.node.ty {
                OperationType::Query => Some(registry.query_type.as_str()),
                OperationType::Mutation => registry.mutation_type.as_deref(),
                OperationType::Subscription => registry.subscription_type.as_deref(),
            }
            .and_then(|name| registry.types.get(name));
            walk.directives(&other.node.directives);
            walk.selections(root, &other.node.selection_set.node);
        }
        (walk.arguments.len() <= ARGUMENTS_KEPT).then(|| Verdict {
            arguments: walk.arguments,
            figures: (!walk.costed).then_some(figures),
        })
    }

    /// The errors the full pass would give `variables` in this operation's arguments (each
    /// coded), and its figures when they do not depend on them.
    pub fn check(
        &self,
        registry: &Registry,
        variables: &Variables,
    ) -> (Vec<ServerError>, Option<ValidationResult>) {
        let errors = self
            .arguments
            .iter()
            .filter_map(|argument| argument.check(registry, variables))
            .map(|mut err| {
                code_validation_error(&mut err);
                err
            })
            .collect();
        (errors, self.figures)
    }
}

impl VariableArgument {
    fn check(&self, registry: &Registry, variables: &Variables) -> Option<ServerError> {
        // A variable the request does not give is not checked here (as in the full pass): its
        // default was checked with the document, and a missing required one is refused when
        // the operation runs.
        let value = self
            .value
            .clone()
            .into_const_with(|name| variables.get(&name).cloned().ok_or(()))
            .ok()?;
        let path = QueryPathNode {
            parent: None,
            segment: QueryPathSegment::Name(&self.name),
        };
        is_valid_input_value(registry, &self.ty, &value, path).map(|reason| {
            ServerError::new(
                format!("Invalid value for argument {reason}"),
                Some(self.position),
            )
        })
    }
}

/// Lists the arguments holding variables, by the types the full pass resolves them against.
struct Walk<'a> {
    registry: &'a Registry,
    /// Whether the arguments walked now are checked with the variables (not in an operation
    /// the request does not select).
    listing: bool,
    arguments: Vec<VariableArgument>,
    /// Whether one of them is read by its field's cost function.
    costed: bool,
}

impl<'a> Walk<'a> {
    fn selections(&mut self, on: Option<&'a MetaType>, set: &'a SelectionSet) {
        for selection in &set.items {
            match &selection.node {
                Selection::Field(field) => {
                    let field = &field.node;
                    if field.name.node == "__typename" {
                        continue;
                    }
                    let schema_field = on.and_then(|ty| ty.field_by_name(&field.name.node));
                    if let Some(schema_field) = schema_field {
                        self.arguments(&schema_field.args, &field.arguments);
                        if schema_field.compute_complexity.is_some()
                            && field.arguments.iter().any(|(_, v)| holds_variable(&v.node))
                        {
                            self.costed = true;
                        }
                    }
                    self.directives(&field.directives);
                    let child =
                        schema_field.and_then(|f| self.registry.concrete_type_by_name(&f.ty));
                    self.selections(child, &field.selection_set.node);
                }
                // A spread's fragment is walked once, as a definition (above).
                Selection::FragmentSpread(spread) => self.directives(&spread.node.directives),
                Selection::InlineFragment(inline) => {
                    let inline = &inline.node;
                    let on = match &inline.type_condition {
                        Some(condition) => self.registry.types.get(condition.node.on.node.as_str()),
                        None => on,
                    };
                    self.directives(&inline.directives);
                    self.selections(on, &inline.selection_set.node);
                }
            }
        }
    }

    fn directives(&mut self, directives: &'a [Positioned<Directive>]) {
        for directive in directives {
            if let Some(schema_directive) = self
                .registry
                .directives
                .get(directive.node.name.node.as_str())
            {
                self.arguments(&schema_directive.args, &directive.node.arguments);
            }
        }
    }

    fn arguments(
        &mut self,
        schema_args: &IndexMap<String, MetaInputValue>,
        arguments: &[(Positioned<Name>, Positioned<Value>)],
    ) {
        if !self.listing {
            return;
        }
        for (name, value) in arguments {
            if let Some(arg) = schema_args.get(name.node.as_str())
                && holds_variable(&value.node)
            {
                self.arguments.push(VariableArgument {
                    name: arg.name.clone(),
                    position: name.pos,
                    ty: arg.ty.clone(),
                    value: value.node.clone(),
                });
            }
        }
    }
}

fn holds_variable(value: &Value) -> bool {
    match value {
        Value::Variable(_) => true,
        Value::List(items) => items.iter().any(holds_variable),
        Value::Object(fields) => fields.values().any(holds_variable),
        _ => false,
    }
}

/// Why `value` is not a value of `type_name`, worded as async-graphql's validation words it
/// (`validation::utils::is_valid_input_value`, which is private to it; ported as it is in
/// async-graphql 7.2, MIT/Apache-2.0).
fn is_valid_input_value(
    registry: &Registry,
    type_name: &str,
    value: &ConstValue,
    path: QueryPathNode,
) -> Option<String> {
    let error = |path: &QueryPathNode, message: String| format!("\"{path}\", {message}");
    match MetaTypeName::create(type_name) {
        MetaTypeName::NonNull(type_name) => match value {
            ConstValue::Null => Some(error(&path, format!("expected type \"{type_name}\""))),
            _ => is_valid_input_value(registry, type_name, value, path),
        },
        MetaTypeName::List(type_name) => match value {
            ConstValue::List(items) => items.iter().enumerate().find_map(|(index, item)| {
                is_valid_input_value(
                    registry,
                    type_name,
                    item,
                    QueryPathNode {
                        parent: Some(&path),
                        segment: QueryPathSegment::Index(index),
                    },
                )
            }),
            ConstValue::Null => None,
            _ => is_valid_input_value(registry, type_name, value, path),
        },
        MetaTypeName::Named(type_name) => {
            if let ConstValue::Null = value {
                return None;
            }
            match registry.types.get(type_name)? {
                MetaType::Scalar {
                    is_valid: Some(is_valid),
                    ..
                } => (!is_valid(value))
                    .then(|| error(&path, format!("expected type \"{type_name}\""))),
                MetaType::Scalar { is_valid: None, .. } => None,
                MetaType::Enum {
                    enum_values,
                    name: enum_name,
                    ..
                } => match value {
                    ConstValue::Enum(name) => enum_value(enum_values, enum_name, name.as_str())
                        .map(|message| error(&path, message)),
                    ConstValue::String(name) => enum_value(enum_values, enum_name, name)
                        .map(|message| error(&path, message)),
                    _ => Some(error(&path, format!("expected type \"{type_name}\""))),
                },
                MetaType::InputObject {
                    input_fields,
                    name: object_name,
                    oneof,
                    ..
                } => match value {
                    ConstValue::Object(values) => {
                        if *oneof {
                            if values.len() != 1 {
                                return Some(error(
                                    &path,
                                    "Oneof input objects requires have exactly one field"
                                        .to_string(),
                                ));
                            }
                            if let ConstValue::Null = values[0] {
                                return Some(error(
                                    &path,
                                    "Oneof Input Objects require that exactly one field must be supplied and that field must not be null"
                                        .to_string(),
                                ));
                            }
                        }
                        let mut unknown: HashSet<&str> = values.keys().map(AsRef::as_ref).collect();
                        for field in input_fields.values() {
                            unknown.remove(field.name.as_str());
                            if let Some(value) = values.get(field.name.as_str()) {
                                let reason = is_valid_input_value(
                                    registry,
                                    &field.ty,
                                    value,
                                    QueryPathNode {
                                        parent: Some(&path),
                                        segment: QueryPathSegment::Name(&field.name),
                                    },
                                );
                                if reason.is_some() {
                                    return reason;
                                }
                            } else if MetaTypeName::create(&field.ty).is_non_null()
                                && field.default_value.is_none()
                            {
                                return Some(error(
                                    &path,
                                    format!(
                                        r#"field "{}" of type "{}" is required but not provided"#,
                                        field.name, field.ty,
                                    ),
                                ));
                            }
                        }
                        unknown.iter().next().map(|name| {
                            error(
                                &path,
                                format!("unknown field \"{name}\" of type \"{object_name}\""),
                            )
                        })
                    }
                    _ => None,
                },
                _ => None,
            }
        }
    }
}

fn enum_value<V>(values: &IndexMap<String, V>, enum_name: &str, name: &str) -> Option<String> {
    (!values.contains_key(name))
        .then(|| format!("enumeration type \"{enum_name}\" does not contain the value \"{name}\""))
}
