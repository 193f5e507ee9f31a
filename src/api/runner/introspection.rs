//! What an introspection selection returns, priced before it runs.
//!
//! async-graphql prices an introspection field at 1 however long its list is, and its own
//! resolvers build the answer outside the response-size count, so `possibleTypes { interfaces
//! { possibleTypes … } }` a few levels deep answers hundreds of megabytes for a cost of a few
//! dozen. Here the schema's introspection is read once, at start, into a graph of what each
//! introspection object holds; an operation's `__schema` and `__type` selections are then
//! walked over that graph as the executor would walk them (fragments, `@skip`/`@include`,
//! `includeDeprecated`), each (selection set, object) pair once, to count the fields the
//! executor resolves and the bytes of JSON they make. A field selected twice under one key is
//! counted twice: async-graphql resolves each occurrence, with its whole selection, before it
//! merges their answers. Without repeated keys the count is the response's exact number of
//! fields. It is the operation's cost for them; the bytes (at least the response's) are
//! checked against the response limit before anything runs. (Apollo Router and graphql-java
//! bound introspection by its shape instead, with a depth of nested lists; pricing what it
//! returns lets GraphiQL's and the code generators' full queries through and nothing heavier.)

use std::collections::HashMap;

use async_graphql::parser::types::{
    Directive, ExecutableDocument, Field, FragmentDefinition, Selection, SelectionSet,
};
use async_graphql::{Name, Positioned, Value as ConstValue, Variables};
use async_graphql_value::Value;
use serde_json::Value as Json;

use super::documents::selected_operation;

/// Reads everything introspection can answer about the schema (every list with its deprecated
/// items too; the evaluation filters them as the arguments ask).
const EVERYTHING: &str = r#"
query {
  __schema {
    description
    queryType { name } mutationType { name } subscriptionType { name }
    types { ...Type }
    directives { name description locations isRepeatable args(includeDeprecated: true) { ...Input } }
  }
}
fragment Type on __Type {
  kind name description specifiedByURL isOneOf
  fields(includeDeprecated: true) {
    name description isDeprecated deprecationReason
    args(includeDeprecated: true) { ...Input }
    type { ...Ref }
  }
  interfaces { name } possibleTypes { name }
  enumValues(includeDeprecated: true) { name description isDeprecated deprecationReason }
  inputFields(includeDeprecated: true) { ...Input }
  ofType { name }
}
fragment Input on __InputValue {
  name description defaultValue isDeprecated deprecationReason type { ...Ref }
}
fragment Ref on __Type {
  kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name
  ofType { kind name ofType { kind name ofType { kind name } } } } } } }
}
"#;

/// Fields whose value is a type, and lists of types (given by name or as a wrapper).
const TYPE_FIELDS: [&str; 5] = [
    "type",
    "ofType",
    "queryType",
    "mutationType",
    "subscriptionType",
];
const TYPE_LISTS: [&str; 3] = ["types", "interfaces", "possibleTypes"];

type NodeId = usize;

/// An introspection object (`__Schema`, `__Type`, `__Field`, …) and what each field answers.
struct Node {
    typename: &'static str,
    fields: HashMap<String, Answer>,
}

enum Answer {
    /// A scalar: the length of its JSON.
    Leaf(u64),
    Null,
    Object(NodeId),
    /// A list of objects, each marked if it is deprecated (left out unless asked for).
    Objects(Vec<(NodeId, bool)>),
    /// A list of scalars: the lengths of their JSON.
    Leaves(Vec<u64>),
}

/// What a selection answers: fields (keys of the response's objects) and bytes of JSON.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Weight {
    pub values: u64,
    pub bytes: u64,
}

impl Weight {
    const FULL: Weight = Weight {
        values: u64::MAX,
        bytes: u64::MAX,
    };

    fn add(self, other: Weight) -> Weight {
        Weight {
            values: self.values.saturating_add(other.values),
            bytes: self.bytes.saturating_add(other.bytes),
        }
    }

    fn bytes(bytes: u64) -> Weight {
        Weight { values: 0, bytes }
    }
}

/// The schema's introspection, as a graph.
pub struct Introspection {
    nodes: Vec<Node>,
    schema: NodeId,
    types: HashMap<String, NodeId>,
}

impl Introspection {
    /// Reads the introspection of the schema that `execute` runs queries on.
    pub fn read(execute: impl FnOnce(&str) -> async_graphql::Response) -> Introspection {
        let response = execute(EVERYTHING);
        assert!(
            response.errors.is_empty(),
            "the schema's introspection failed: {:?}",
            response.errors
        );
        let data = response.data.into_json().expect("introspection is JSON");
        Builder::default().build(&data["__schema"])
    }

    /// What the introspection fields of the operation `operation_name` answer, with these
    /// variables; [`Weight::FULL`] once past `most_values` (the walk stops there).
    pub fn weigh(
        &self,
        document: &ExecutableDocument,
        operation_name: Option<&str>,
        variables: &Variables,
        most_values: u64,
    ) -> Weight {
        let Some((_, operation)) = selected_operation(document, operation_name) else {
            return Weight::default();
        };
        // Most operations introspect nothing: say so without allocating.
        let introspects = |set: &SelectionSet| names_introspection(set);
        if !introspects(&operation.selection_set.node)
            && !document
                .fragments
                .values()
                .any(|fragment| introspects(&fragment.node.selection_set.node))
        {
            return Weight::default();
        }
        let mut values: HashMap<&Name, ConstValue> = operation
            .variable_definitions
            .iter()
            .filter_map(|def| {
                let default = def.node.default_value.as_ref()?;
                Some((&def.node.name.node, default.node.clone()))
            })
            .collect();
        for def in &operation.variable_definitions {
            if let Some(value) = variables.get(&def.node.name.node) {
                values.insert(&def.node.name.node, value.clone());
            }
        }
        let mut walk = Walk {
            model: self,
            fragments: &document.fragments,
            variables: values,
            memo: HashMap::new(),
            budget: most_values,
        };
        walk.root(&operation.selection_set.node)
            .unwrap_or(Weight::FULL)
    }
}

/// Builds the graph from the JSON of [`EVERYTHING`].
#[derive(Default)]
struct Builder {
    nodes: Vec<Node>,
    types: HashMap<String, NodeId>,
    wrappers: HashMap<(String, NodeId), NodeId>,
}

impl Builder {
    fn build(mut self, schema: &Json) -> Introspection {
        let types = schema["types"].as_array().cloned().unwrap_or_default();
        // Every named type first, so that references to them resolve.
        for ty in &types {
            let name = ty["name"].as_str().unwrap_or_default().to_owned();
            let id = self.push("__Type");
            self.types.insert(name, id);
        }
        for ty in &types {
            let id = self.types[ty["name"].as_str().unwrap_or_default()];
            let fields = self.fields_of(ty);
            self.nodes[id].fields = fields;
        }
        let schema_id = self.object("__Schema", schema);
        Introspection {
            nodes: self.nodes,
            schema: schema_id,
            types: self.types,
        }
    }

    fn push(&mut self, typename: &'static str) -> NodeId {
        self.nodes.push(Node {
            typename,
            fields: HashMap::new(),
        });
        self.nodes.len() - 1
    }

    fn object(&mut self, typename: &'static str, json: &Json) -> NodeId {
        let fields = self.fields_of(json);
        let id = self.push(typename);
        self.nodes[id].fields = fields;
        id
    }

    fn fields_of(&mut self, json: &Json) -> HashMap<String, Answer> {
        let Some(object) = json.as_object() else {
            return HashMap::new();
        };
        object
            .iter()
            .map(|(key, value)| (key.clone(), self.answer(key, value)))
            .collect()
    }

    fn answer(&mut self, key: &str, value: &Json) -> Answer {
        match value {
            Json::Null => Answer::Null,
            _ if TYPE_FIELDS.contains(&key) => Answer::Object(self.type_ref(value)),
            Json::Array(items) if TYPE_LISTS.contains(&key) => Answer::Objects(
                items
                    .iter()
                    .map(|item| (self.type_ref(item), false))
                    .collect(),
            ),
            Json::Array(items) if items.iter().all(Json::is_object) && !items.is_empty() => {
                let typename = match key {
                    "fields" => "__Field",
                    "enumValues" => "__EnumValue",
                    "directives" => "__Directive",
                    _ => "__InputValue",
                };
                Answer::Objects(
                    items
                        .iter()
                        .map(|item| {
                            let deprecated = item["isDeprecated"].as_bool().unwrap_or(false);
                            (self.object(typename, item), deprecated)
                        })
                        .collect(),
                )
            }
            Json::Array(items) => Answer::Leaves(items.iter().map(json_len).collect()),
            _ => Answer::Leaf(json_len(value)),
        }
    }

    /// A type as a field's `type` or `ofType` gives it: the named type, or a wrapper of one.
    fn type_ref(&mut self, json: &Json) -> NodeId {
        if let Some(id) = json["name"].as_str().and_then(|name| self.types.get(name)) {
            return *id;
        }
        let kind = json["kind"].as_str().unwrap_or("LIST").to_owned();
        let inner = self.type_ref(&json["ofType"]);
        if let Some(id) = self.wrappers.get(&(kind.clone(), inner)) {
            return *id;
        }
        let id = self.push("__Type");
        let mut fields: HashMap<String, Answer> = [
            "name",
            "description",
            "fields",
            "interfaces",
            "possibleTypes",
            "enumValues",
            "inputFields",
            "specifiedByURL",
            "isOneOf",
        ]
        .into_iter()
        .map(|field| (field.to_owned(), Answer::Null))
        .collect();
        fields.insert("kind".to_owned(), Answer::Leaf(kind.len() as u64 + 2));
        fields.insert("ofType".to_owned(), Answer::Object(inner));
        self.nodes[id].fields = fields;
        self.wrappers.insert((kind, inner), id);
        id
    }
}

fn json_len(value: &Json) -> u64 {
    serde_json::to_string(value).map_or(0, |text| text.len() as u64)
}

/// One walk of an operation's introspection selections.
struct Walk<'a> {
    model: &'a Introspection,
    fragments: &'a HashMap<Name, Positioned<FragmentDefinition>>,
    variables: HashMap<&'a Name, ConstValue>,
    /// What each selection set answers on each object.
    memo: HashMap<(*const SelectionSet, NodeId), Weight>,
    /// Values still allowed before the walk gives up.
    budget: u64,
}

/// The walk went past its budget.
struct OverBudget;

impl<'a> Walk<'a> {
    /// The introspection fields among the root's (other root fields are priced elsewhere).
    fn root(&mut self, root: &'a SelectionSet) -> Result<Weight, OverBudget> {
        let mut total = Weight::bytes(2);
        for (key, field) in self.collect(root, None) {
            let at = match field.name.node.as_str() {
                "__schema" => Some(self.model.schema),
                "__type" => match self.argument(field, "name") {
                    Some(ConstValue::String(name)) => self.model.types.get(&name).copied(),
                    _ => None,
                },
                _ => continue,
            };
            let value = match at {
                Some(id) => self.set(&field.selection_set.node, id)?,
                None => Weight::bytes(4),
            };
            total = total.add(self.key(key)?).add(value);
        }
        Ok(total)
    }

    /// One key of a response object: a value, and its name's bytes.
    fn key(&mut self, key: &str) -> Result<Weight, OverBudget> {
        self.budget = self.budget.checked_sub(1).ok_or(OverBudget)?;
        // "key": and a comma.
        Ok(Weight {
            values: 1,
            bytes: key.len() as u64 + 4,
        })
    }

    /// What a selection set answers on the object `id`.
    fn set(&mut self, set: &'a SelectionSet, id: NodeId) -> Result<Weight, OverBudget> {
        let memo_key = (set as *const SelectionSet, id);
        if let Some(weight) = self.memo.get(&memo_key) {
            self.budget = self.budget.checked_sub(weight.values).ok_or(OverBudget)?;
            return Ok(*weight);
        }
        let model = self.model;
        let node = &model.nodes[id];
        // The braces.
        let mut total = Weight::bytes(2);
        for (key, field) in self.collect(set, Some(node.typename)) {
            let value = match field.name.node.as_str() {
                "__typename" => Weight::bytes(node.typename.len() as u64 + 2),
                name => match node.fields.get(name) {
                    Some(answer) => self.answer(answer, field)?,
                    None => Weight::bytes(4),
                },
            };
            total = total.add(self.key(key)?).add(value);
        }
        self.memo.insert(memo_key, total);
        Ok(total)
    }

    fn answer(&mut self, answer: &'a Answer, field: &'a Field) -> Result<Weight, OverBudget> {
        let children = &field.selection_set.node;
        Ok(match answer {
            Answer::Leaf(bytes) => Weight::bytes(*bytes),
            Answer::Null => Weight::bytes(4),
            Answer::Object(id) => self.set(children, *id)?,
            Answer::Objects(items) => {
                let deprecated_too = matches!(
                    self.argument(field, "includeDeprecated"),
                    Some(ConstValue::Boolean(true))
                );
                // The brackets.
                let mut total = Weight::bytes(2);
                for (id, deprecated) in items {
                    if *deprecated && !deprecated_too {
                        continue;
                    }
                    // The item and its comma.
                    total = total.add(self.set(children, *id)?).add(Weight::bytes(1));
                }
                total
            }
            Answer::Leaves(items) => items
                .iter()
                .fold(Weight::bytes(2), |sum, len| sum.add(Weight::bytes(len + 1))),
        })
    }

    /// Every field `set` selects on an object of type `typename` (`None`: the root), through
    /// its fragments, in document order, with its response key. Not merged by key: the
    /// executor resolves each one, with its whole selection, before it merges their answers.
    fn collect(&self, set: &'a SelectionSet, typename: Option<&str>) -> Vec<(&'a str, &'a Field)> {
        let mut fields = Vec::new();
        // Depth-first, in document order (a stack of what remains).
        let mut stack: Vec<std::slice::Iter<'a, Positioned<Selection>>> = vec![set.items.iter()];
        while let Some(items) = stack.last_mut() {
            let Some(item) = items.next() else {
                stack.pop();
                continue;
            };
            match &item.node {
                Selection::Field(field) => {
                    if !self.skipped(&field.node.directives) {
                        let key = field.node.alias.as_ref().unwrap_or(&field.node.name);
                        fields.push((key.node.as_str(), &field.node));
                    }
                }
                Selection::InlineFragment(inline) => {
                    let applies = inline
                        .node
                        .type_condition
                        .as_ref()
                        .is_none_or(|c| typename.is_none_or(|t| c.node.on.node.as_str() == t));
                    if applies && !self.skipped(&inline.node.directives) {
                        stack.push(inline.node.selection_set.node.items.iter());
                    }
                }
                Selection::FragmentSpread(spread) => {
                    let Some(fragment) = self.fragments.get(&spread.node.fragment_name.node) else {
                        continue;
                    };
                    let on = fragment.node.type_condition.node.on.node.as_str();
                    if typename.is_none_or(|t| on == t) && !self.skipped(&spread.node.directives) {
                        stack.push(fragment.node.selection_set.node.items.iter());
                    }
                }
            }
        }
        fields
    }

    /// Whether `@skip` or `@include` leaves the selection out.
    fn skipped(&self, directives: &[Positioned<Directive>]) -> bool {
        directives.iter().any(|directive| {
            let condition = directive
                .node
                .get_argument("if")
                .map(|value| self.resolve(&value.node));
            matches!(
                (directive.node.name.node.as_str(), condition),
                ("skip", Some(ConstValue::Boolean(true)))
                    | ("include", Some(ConstValue::Boolean(false)))
            )
        })
    }

    fn argument(&self, field: &Field, name: &str) -> Option<ConstValue> {
        field
            .get_argument(name)
            .map(|value| self.resolve(&value.node))
    }

    fn resolve(&self, value: &Value) -> ConstValue {
        value
            .clone()
            .into_const_with(|name| {
                Ok::<_, std::convert::Infallible>(
                    self.variables.get(&name).cloned().unwrap_or_default(),
                )
            })
            .unwrap_or_default()
    }
}

/// Whether `set` selects `__schema` or `__type` (itself or in its inline fragments), as a root
/// selection would.
fn names_introspection(set: &SelectionSet) -> bool {
    set.items.iter().any(|item| match &item.node {
        Selection::Field(field) => matches!(field.node.name.node.as_str(), "__schema" | "__type"),
        Selection::InlineFragment(inline) => names_introspection(&inline.node.selection_set.node),
        Selection::FragmentSpread(_) => false,
    })
}

#[cfg(test)]
mod tests {
    use async_graphql::parser::parse_query;

    use super::*;
    use crate::api::CasefileSchema;

    fn schema() -> CasefileSchema {
        crate::api::builder().finish()
    }

    /// Small deterministic pseudo-random numbers (xorshift), and a count of the response keys
    /// handed out.
    struct Dice(u64, usize);

    impl Dice {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }

        /// A response key no other field of the document has.
        fn key(&mut self) -> usize {
            self.1 += 1;
            self.1
        }

        fn chance(&mut self, percent: usize) -> bool {
            self.below(100) < percent
        }
    }

    /// The fields of each introspection type, with the type of their objects (`None`: scalar).
    fn fields_of(typename: &str) -> &'static [(&'static str, Option<&'static str>)] {
        match typename {
            "__Schema" => &[
                ("description", None),
                ("types", Some("__Type")),
                ("queryType", Some("__Type")),
                ("mutationType", Some("__Type")),
                ("subscriptionType", Some("__Type")),
                ("directives", Some("__Directive")),
            ],
            "__Type" => &[
                ("kind", None),
                ("name", None),
                ("description", None),
                ("fields", Some("__Field")),
                ("interfaces", Some("__Type")),
                ("possibleTypes", Some("__Type")),
                ("enumValues", Some("__EnumValue")),
                ("inputFields", Some("__InputValue")),
                ("ofType", Some("__Type")),
                ("specifiedByURL", None),
                ("isOneOf", None),
            ],
            "__Field" => &[
                ("name", None),
                ("description", None),
                ("args", Some("__InputValue")),
                ("type", Some("__Type")),
                ("isDeprecated", None),
                ("deprecationReason", None),
            ],
            "__InputValue" => &[
                ("name", None),
                ("description", None),
                ("type", Some("__Type")),
                ("defaultValue", None),
                ("isDeprecated", None),
                ("deprecationReason", None),
            ],
            "__EnumValue" => &[
                ("name", None),
                ("description", None),
                ("isDeprecated", None),
                ("deprecationReason", None),
            ],
            _ => &[
                ("name", None),
                ("description", None),
                ("locations", None),
                ("args", Some("__InputValue")),
                ("isRepeatable", None),
            ],
        }
    }

    /// A random selection set on `typename`, `depth` levels at most; named fragments it uses
    /// are added to `fragments`.
    fn selection(
        dice: &mut Dice,
        typename: &str,
        depth: usize,
        fragments: &mut Vec<String>,
    ) -> String {
        let fields = fields_of(typename);
        let mut out = String::from("{");
        for _ in 0..1 + dice.below(4) {
            let (name, object) = fields[dice.below(fields.len())];
            // Each field under a key of its own: a key selected twice is resolved twice (and
            // priced so, see `a_key_selected_twice_is_priced_twice`), but answered once.
            let argument = match dice.below(3) {
                _ if !matches!(name, "fields" | "enumValues" | "inputFields" | "args") => "",
                0 => "",
                1 => "(includeDeprecated: true)",
                _ => "(includeDeprecated: false)",
            };
            out.push_str(&format!(" k{}: {name}{argument}", dice.key()));
            if let Some(object) = object {
                if depth == 0 {
                    out.push_str(" { __typename }");
                } else {
                    out.push(' ');
                    out.push_str(&selection(dice, object, depth - 1, fragments));
                }
            }
        }
        match dice.below(10) {
            0 => out.push_str(&format!(" k{}: __typename", dice.key())),
            1 => {
                let inner = selection(dice, typename, depth.saturating_sub(1), fragments);
                out.push_str(&format!(" ... on {typename} {inner}"));
            }
            2 => {
                let inner = selection(dice, typename, depth.saturating_sub(1), fragments);
                out.push_str(&format!(" ... @skip(if: true) {inner}"));
            }
            3 => {
                let inner = selection(dice, typename, depth.saturating_sub(1), fragments);
                let name = format!("G{}", fragments.len());
                fragments.push(format!("fragment {name} on {typename} {inner}"));
                out.push_str(&format!(" ...{name}"));
            }
            _ => {}
        }
        out.push_str(" }");
        out
    }

    fn random_document(dice: &mut Dice, type_names: &[String]) -> String {
        let mut fragments = Vec::new();
        let mut roots = String::new();
        for i in 0..1 + dice.below(2) {
            let depth = dice.below(5);
            if dice.chance(40) {
                let set = selection(dice, "__Schema", depth, &mut fragments);
                roots.push_str(&format!(" s{i}: __schema {set}"));
            } else {
                let name = if dice.chance(90) {
                    type_names[dice.below(type_names.len())].clone()
                } else {
                    "NoSuchType".to_owned()
                };
                let set = selection(dice, "__Type", depth, &mut fragments);
                roots.push_str(&format!(" t{i}: __type(name: \"{name}\") {set}"));
            }
        }
        format!("{{{roots} }} {}", fragments.join(" "))
    }

    /// Fields of every object in `value`: the values a response holds.
    fn count_fields(value: &Json) -> u64 {
        match value {
            Json::Object(map) => map.values().map(|v| 1 + count_fields(v)).sum(),
            Json::Array(items) => items.iter().map(count_fields).sum(),
            _ => 0,
        }
    }

    #[tokio::test]
    async fn the_price_of_introspection_is_what_it_answers() {
        let schema = schema();
        let model = Introspection::read(|q| futures::executor::block_on(schema.execute(q)));
        let type_names: Vec<String> = model.types.keys().cloned().collect();
        let mut dice = Dice(0x9e37_79b9_7f4a_7c15, 0);
        let (mut exact, mut widest) = (0, 1.0f64);
        for _ in 0..300 {
            let query = random_document(&mut dice, &type_names);
            let response = schema.execute(query.as_str()).await;
            assert!(response.errors.is_empty(), "{query}: {:?}", response.errors);
            let data = response.data.into_json().unwrap();
            let real = Weight {
                values: count_fields(&data),
                bytes: serde_json::to_string(&data).unwrap().len() as u64,
            };
            let document = parse_query(&query).unwrap();
            let priced = model.weigh(&document, None, &Variables::default(), u64::MAX);
            assert!(
                real.values <= priced.values && priced.values <= 2 * real.values.max(1),
                "{query}: {real:?} priced {priced:?}"
            );
            assert!(
                real.bytes <= priced.bytes && priced.bytes <= 2 * real.bytes,
                "{query}: {real:?} priced {priced:?}"
            );
            exact += usize::from(real.values == priced.values);
            widest = widest.max(priced.bytes as f64 / real.bytes as f64);
        }
        println!(
            "300 random introspection documents: fields priced exactly in {exact}; \
             bytes priced at most x{widest:.3} the response's"
        );
        assert_eq!(
            exact, 300,
            "without repeated keys the price is the answer's fields"
        );
    }

    #[test]
    fn variables_and_directives_are_applied() {
        let schema = schema();
        let model = Introspection::read(|q| futures::executor::block_on(schema.execute(q)));
        let weigh = |query: &str, variables: serde_json::Value| {
            let document = parse_query(query).unwrap();
            let variables = Variables::from_json(variables);
            model.weigh(&document, None, &variables, u64::MAX).values
        };
        assert_eq!(
            weigh("{ sessions { totalCount } }", serde_json::json!({})),
            0
        );
        let spread =
            "{ ...F } fragment F on Query { ... on Query { __type(name: \"Session\") { name } } }";
        assert_eq!(
            weigh(spread, serde_json::json!({})),
            2,
            "found through fragments"
        );
        let by_name = "query($n: String!) { __type(name: $n) { name } }";
        assert_eq!(weigh(by_name, serde_json::json!({"n": "Session"})), 2);
        assert_eq!(weigh(by_name, serde_json::json!({"n": "Nope"})), 1);
        let skipped = "query($s: Boolean!) { __schema { types @skip(if: $s) { name } } }";
        assert_eq!(weigh(skipped, serde_json::json!({"s": true})), 1);
        assert!(weigh(skipped, serde_json::json!({"s": false})) > 100);
        // `Message.toolCalls` is deprecated.
        let defaulted = "query($d: Boolean = true) { __type(name: \"Message\") { \
                         fields(includeDeprecated: $d) { name } } }";
        let all = weigh(defaulted, serde_json::json!({}));
        let current = weigh(defaulted, serde_json::json!({"d": false}));
        assert!(all > current, "the default includes deprecated fields");
    }

    #[test]
    fn a_key_selected_twice_is_priced_twice() {
        let schema = schema();
        let model = Introspection::read(|q| futures::executor::block_on(schema.execute(q)));
        let weigh = |query: &str| {
            let document = parse_query(query).unwrap();
            model
                .weigh(&document, None, &Variables::default(), u64::MAX)
                .values
        };
        let once = weigh("{ __schema { types { fields { name } } } }");
        let twice = weigh("{ __schema { types { fields { name } fields { name } } } }");
        // `__schema` and `types` once, each type's `fields` and the fields' names twice.
        assert_eq!(
            twice - once,
            once - 2,
            "the second `fields` costs the first's"
        );
        let through_fragment = weigh(
            "{ __schema { types { fields { name } ...F } } } \
             fragment F on __Type { fields { name } }",
        );
        assert_eq!(through_fragment, twice);
    }

    #[test]
    fn nested_possible_types_are_priced_by_what_they_answer_and_stop_at_the_budget() {
        let schema = schema();
        let model = Introspection::read(|q| futures::executor::block_on(schema.execute(q)));
        let mut inner = "name".to_owned();
        for _ in 0..7 {
            inner = format!("possibleTypes {{ interfaces {{ {inner} }} }}");
        }
        let query = format!("{{ a: __type(name: \"Node\") {{ {inner} }} }}");
        let document = parse_query(&query).unwrap();
        let priced = model.weigh(&document, None, &Variables::default(), u64::MAX);
        assert!(priced.values > 1_000_000, "{priced:?}");
        let stopped = model.weigh(&document, None, &Variables::default(), 250_000);
        assert_eq!(stopped, Weight::FULL);
    }

    /// The introspection queries the common clients send (tests/introspection/).
    pub const CLIENT_QUERIES: [(&str, &str); 4] = [
        (
            "graphiql",
            include_str!("../../../tests/introspection/graphiql.graphql"),
        ),
        (
            "graphql-js default",
            include_str!("../../../tests/introspection/graphql-js-default.graphql"),
        ),
        (
            "apollo",
            include_str!("../../../tests/introspection/apollo.graphql"),
        ),
        (
            "python gql",
            include_str!("../../../tests/introspection/python-gql.graphql"),
        ),
    ];

    #[tokio::test]
    async fn the_clients_full_introspection_is_priced_exactly_and_within_the_defaults() {
        let schema = schema();
        let model = Introspection::read(|q| futures::executor::block_on(schema.execute(q)));
        let limits = crate::api::Limits::default();
        for (client, query) in CLIENT_QUERIES {
            let response = schema.execute(query).await;
            assert!(
                response.errors.is_empty(),
                "{client}: {:?}",
                response.errors
            );
            let data = response.data.into_json().unwrap();
            let document = parse_query(query).unwrap();
            let priced = model.weigh(&document, None, &Variables::default(), u64::MAX);
            let bytes = serde_json::to_string(&data).unwrap().len();
            println!(
                "{client}: {} fields, {bytes} bytes, priced {priced:?}",
                count_fields(&data)
            );
            assert_eq!(priced.values, count_fields(&data), "{client}");
            assert!(
                priced.values < limits.max_query_complexity as u64 / 2,
                "{client}"
            );
            assert!(
                priced.bytes < limits.max_response_bytes as u64 / 4,
                "{client}"
            );
        }
    }
}
