//! A request fuzzer: operations generated from the introspected schema, most of them valid so
//! they reach resolvers and the database, some with hostile values, plus malformed bodies, sent
//! over HTTP (POST, GET, batches) and WebSocket (both protocols). Whatever arrives, the server
//! must answer without a 5xx, without `INTERNAL_SERVER_ERROR`, without a panic, keep answering
//! correctly afterwards, and leave no partial write behind.
//!
//! Reproducible: request `i` is generated from its own generator seeded by the run's seed and
//! `i` (`CASEFILE_FUZZ_SEED`, printed), so a reported request can be regenerated alone;
//! `CASEFILE_FUZZ_REQUESTS` sets the count (10,000).
//!
//! A shape-mutation mode folds generated operations into hostile shapes (fragments spreading
//! each other up to doubling chains and cycles, duplicated selections, nested inline fragments,
//! repeated directives, introspection that fans out): each must still be answered in time, with
//! codes, and with at most 101 errors.

#[path = "it/common/mod.rs"]
mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use futures::{SinkExt as _, StreamExt as _};
use serde_json::{Map, Value, json};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use common::TestApp;
use common::rng::Rng;

static PANICS: AtomicUsize = AtomicUsize::new(0);

/// Fields nested below a root field at most.
const MAX_DEPTH: usize = 3;
/// Requests in flight at once.
const CONCURRENCY: usize = 4;

/// The introspected schema: every named type's introspection object, by name.
struct Schema {
    types: HashMap<String, Value>,
    roots: [Option<String>; 3],
}

const INTROSPECTION: &str = r#"
query IntrospectionQuery {
  __schema {
    queryType { name } mutationType { name } subscriptionType { name }
    types {
      kind name isOneOf
      fields(includeDeprecated: true) { name args { name type { ...TypeRef } } type { ...TypeRef } }
      inputFields { name type { ...TypeRef } }
      enumValues(includeDeprecated: true) { name }
      possibleTypes { name }
    }
  }
}
fragment TypeRef on __Type {
  kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name } } } }
}"#;

impl Schema {
    fn new(introspection: &Value) -> Schema {
        let schema = &introspection["__schema"];
        let types = schema["types"]
            .as_array()
            .expect("types")
            .iter()
            .map(|t| (t["name"].as_str().unwrap().to_owned(), t.clone()))
            .collect();
        let root = |key: &str| schema[key]["name"].as_str().map(str::to_owned);
        Schema {
            types,
            roots: [
                root("queryType"),
                root("mutationType"),
                root("subscriptionType"),
            ],
        }
    }
}

fn type_text(ty: &Value) -> String {
    match ty["kind"].as_str() {
        Some("NON_NULL") => format!("{}!", type_text(&ty["ofType"])),
        Some("LIST") => format!("[{}]", type_text(&ty["ofType"])),
        _ => ty["name"].as_str().unwrap().to_owned(),
    }
}

fn named(ty: &Value) -> &str {
    match ty["name"].as_str() {
        Some(name) => name,
        None => named(&ty["ofType"]),
    }
}

fn is_leaf(schema: &Schema, ty: &Value) -> bool {
    matches!(
        schema.types[named(ty)]["kind"].as_str(),
        Some("SCALAR" | "ENUM")
    )
}

/// Real ids, uuids and cursors read back from the seeded data.
#[derive(Default)]
struct Pools {
    ids: Vec<String>,
    uuids: Vec<String>,
    cursors: Vec<String>,
}

impl Pools {
    fn harvest(&mut self, value: &Value) {
        match value {
            Value::Object(map) => {
                for (key, v) in map {
                    match (key.as_str(), v.as_str()) {
                        ("id", Some(s)) => self.ids.push(s.to_owned()),
                        ("uuid", Some(s)) => self.uuids.push(s.to_owned()),
                        ("cursor", Some(s)) => self.cursors.push(s.to_owned()),
                        _ => self.harvest(v),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|v| self.harvest(v)),
            _ => {}
        }
    }
}

/// Marks a string that is sent as a lone UTF-16 surrogate escape (serde cannot hold one).
const SURROGATE: &str = "\u{E000}lone-surrogate";

/// One operation being generated: its text, variable declarations and values.
struct Op<'a> {
    rng: &'a mut Rng,
    schema: &'a Schema,
    pools: &'a Pools,
    decls: Vec<String>,
    vars: Map<String, Value>,
    aliases: usize,
}

impl Op<'_> {
    /// A whole operation of `kind` (0 query, 1 mutation, 2 subscription): (text, variables).
    fn operation(&mut self, kind: usize) -> (String, Value) {
        let root = self.schema.roots[kind].clone().expect("root type");
        let fields = self.schema.types[&root]["fields"].as_array().unwrap();
        let count = if kind == 0 { 1 + self.rng.index(2) } else { 1 };
        let mut body = String::new();
        for _ in 0..count {
            let field = self.rng.pick(fields).clone();
            body.push_str(&self.field(&field, 0));
        }
        if self.rng.chance(2) {
            body.push_str(" noSuchField ");
        }
        let keyword = ["query", "mutation", "subscription"][kind];
        let decls = if self.decls.is_empty() {
            String::new()
        } else {
            format!("({})", self.decls.join(", "))
        };
        (
            format!("{keyword} Fuzz{decls} {{{body}}}"),
            Value::Object(std::mem::take(&mut self.vars)),
        )
    }

    fn field(&mut self, field: &Value, depth: usize) -> String {
        self.aliases += 1;
        let name = field["name"].as_str().unwrap();
        let mut args = Vec::new();
        for arg in field["args"].as_array().into_iter().flatten() {
            let required = arg["type"]["kind"] == "NON_NULL";
            if (!required && self.rng.chance(50)) || (required && self.rng.chance(1)) {
                continue;
            }
            let var = format!("v{}", self.decls.len());
            self.decls
                .push(format!("${var}: {}", type_text(&arg["type"])));
            let value = self.value(&arg["type"], arg["name"].as_str().unwrap(), 0);
            self.vars.insert(var.clone(), value);
            args.push(format!("{}: ${var}", arg["name"].as_str().unwrap()));
        }
        let args = if args.is_empty() {
            String::new()
        } else {
            format!("({})", args.join(", "))
        };
        let selection = self.selection(named(&field["type"]).to_owned(), depth + 1);
        format!(" a{}: {name}{args}{selection}", self.aliases)
    }

    fn selection(&mut self, type_name: String, depth: usize) -> String {
        let ty = &self.schema.types[&type_name];
        match ty["kind"].as_str() {
            Some("OBJECT") => {
                let fields: Vec<Value> = ty["fields"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|f| depth < MAX_DEPTH || is_leaf(self.schema, &f["type"]))
                    .cloned()
                    .collect();
                let mut out = String::from(" { __typename");
                for _ in 0..1 + self.rng.index(3) {
                    if fields.is_empty() {
                        break;
                    }
                    let field = self.rng.pick(&fields).clone();
                    out.push_str(&self.field(&field, depth));
                }
                out + " }"
            }
            Some("INTERFACE" | "UNION") => {
                let possible = ty["possibleTypes"].as_array().unwrap();
                let pick = self.rng.pick(possible)["name"].as_str().unwrap().to_owned();
                let inner = self.selection(pick.clone(), depth);
                format!(" {{ __typename ... on {pick}{inner} }}")
            }
            _ => String::new(),
        }
    }

    /// A value for `ty`: plausible most of the time, hostile some of the time.
    fn value(&mut self, ty: &Value, name: &str, depth: usize) -> Value {
        if self.rng.chance(4) {
            return self.hostile();
        }
        match ty["kind"].as_str() {
            Some("NON_NULL") => self.value(&ty["ofType"], name, depth),
            Some("LIST") => (0..self.rng.index(4))
                .map(|_| self.value(&ty["ofType"], name, depth + 1))
                .collect(),
            _ => self.named_value(ty["name"].as_str().unwrap(), name, depth),
        }
    }

    fn named_value(&mut self, type_name: &str, name: &str, depth: usize) -> Value {
        let ty = &self.schema.types[type_name];
        match ty["kind"].as_str() {
            Some("ENUM") => ty["enumValues"]
                .as_array()
                .map_or(Value::Null, |values| self.rng.pick(values)["name"].clone()),
            Some("INPUT_OBJECT") => {
                let fields = ty["inputFields"].as_array().unwrap();
                let mut object = Map::new();
                if ty["isOneOf"] == true {
                    let field = self.rng.pick(fields);
                    let value = self.value(&field["type"], field["name"].as_str().unwrap(), depth);
                    object.insert(field["name"].as_str().unwrap().to_owned(), value);
                    return Value::Object(object);
                }
                for field in fields {
                    let required = field["type"]["kind"] == "NON_NULL";
                    if required || (depth < 3 && self.rng.chance(40)) {
                        let field_name = field["name"].as_str().unwrap();
                        let value = self.value(&field["type"], field_name, depth + 1);
                        object.insert(field_name.to_owned(), value);
                    }
                }
                Value::Object(object)
            }
            _ => self.scalar(type_name, name),
        }
    }

    fn scalar(&mut self, type_name: &str, name: &str) -> Value {
        let rng = &mut *self.rng;
        let pools = self.pools;
        match type_name {
            "ID" if rng.chance(90) => {
                let pool = if rng.chance(80) {
                    &pools.ids
                } else {
                    &pools.uuids
                };
                json!(rng.pick(pool))
            }
            "ID" => json!(B64.encode(format!("Session:{}", random_uuid(rng)))),
            "UUID" if rng.chance(70) => json!(rng.pick(&pools.uuids)),
            "UUID" => json!(random_uuid(rng)),
            "Int" => json!(rng.index(12)),
            "Float" => json!(rng.index(10_000) as f64 / 100.0),
            "Boolean" => json!(rng.chance(50)),
            "DateTime" => json!(format!(
                "2026-{:02}-{:02}T{:02}:00:00Z",
                1 + rng.index(12),
                1 + rng.index(28),
                rng.index(24)
            )),
            "JSON" => json!({ "namespace": "payments", "pod": "api-7d9f", "n": rng.index(9) }),
            _ if name == "after" || name == "before" || name.contains("ursor") => {
                if rng.chance(80) && !pools.cursors.is_empty() {
                    json!(rng.pick(&pools.cursors))
                } else {
                    json!(B64.encode(rng.next().to_le_bytes()))
                }
            }
            _ => json!(
                [
                    "PodCrashLooping",
                    "kubernetes-investigation",
                    "KubernetesAgent",
                    "Initial Analysis",
                    "The pod is out of memory.",
                    "gpt-4o",
                    "kubectl_get_pods",
                    "alice@example.com",
                    "why is it crashing?",
                    "mem",
                ][rng.index(10)]
            ),
        }
    }

    fn hostile(&mut self) -> Value {
        let rng = &mut *self.rng;
        match rng.index(30) {
            0 => Value::Null,
            1 => json!(true),
            2 => json!(-1),
            3 => json!(i32::MAX as i64 + 1),
            4 => json!(i64::MAX),
            5 => json!(i64::MIN),
            6 => json!(u64::MAX),
            7 => json!(1e308),
            8 => json!(-1.5e-300),
            9 => json!("NaN"),
            10 => json!("Infinity"),
            11 => json!(""),
            12 => json!("  \t\n "),
            13 => json!("x".repeat(if rng.chance(20) { 100_000 } else { 5_001 })),
            14 => json!("\u{0}"),
            15 => json!("abc\u{0}def"),
            16 => json!(SURROGATE),
            17 => json!("👩‍👩‍👧‍👦 \u{202E}gnp.exe e\u{301}\u{301}\u{301} \u{FEFF}\u{10FFFF}"),
            18 => json!(
                B64.encode(
                    (0..rng.index(40))
                        .map(|_| rng.next() as u8)
                        .collect::<Vec<_>>()
                )
            ),
            19 => json!(B64.encode(format!("Session:{}x", random_uuid(rng)))),
            20 => json!(B64.encode(format!("Nope:{}", random_uuid(rng)))),
            21 => json!("%%%not-an-id"),
            22 => json!([]),
            23 => json!({ "unexpected": [1, "two", null] }),
            24 => (0..200).fold(json!(1), |v, _| json!([v])),
            25 => json!("9999-12-31T23:59:59Z"),
            26 => json!("0000-01-01T00:00:00Z"),
            27 => json!("+275760-09-13T00:00:00Z"),
            28 => json!("2026-02-30T25:61:00Z"),
            _ => json!(random_uuid(rng)),
        }
    }
}

fn random_uuid(rng: &mut Rng) -> String {
    uuid::Uuid::from_u64_pair(rng.next(), rng.next()).to_string()
}

/// A request body as sent: JSON text with the surrogate markers turned into lone surrogates.
fn body_text(body: &Value) -> String {
    body.to_string()
        .replace(&json!(SURROGATE).to_string(), "\"\\ud800\"")
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Transport {
    Post,
    /// POSTed in a hostile shape.
    Shape,
    Get,
    Batch,
    Malformed,
    Ws,
    WsLegacy,
}

/// What one request came back with.
struct Outcome {
    transport: Transport,
    /// Operations in the request, and how many of them executed (no parse/validation error).
    operations: usize,
    valid: usize,
    status: Option<u16>,
    codes: Vec<String>,
    /// Why it breaks the rules, if it does.
    offence: Option<String>,
    request: String,
}

fn error_codes(body: &Value, codes: &mut Vec<String>) {
    let bodies = match body {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    for body in bodies {
        for error in body["errors"].as_array().into_iter().flatten() {
            let code = error["extensions"]["code"].as_str().unwrap_or("(none)");
            codes.push(code.to_owned());
        }
    }
}

fn error_count(body: &Value) -> usize {
    body["errors"].as_array().map_or(0, Vec::len)
}

/// `query` (one generated operation) in a hostile shape, or two shapes one inside the other.
fn reshaped(rng: &mut Rng, query: &str) -> String {
    // The operation's head (`query Fuzz($v0: …)`) and its selections.
    let open = query.find(" {").map_or(0, |at| at + 1);
    let (head, body) = (&query[..open], &query[open + 1..query.len() - 1]);
    let (mut body, mut fragments) = (body.to_owned(), String::new());
    for _ in 0..1 + rng.index(2) {
        body = match rng.index(7) {
            // A chain of fragments, each spreading the next up to three times.
            0 | 1 => {
                let (n, times) = (1 + rng.index(40), 1 + rng.index(3));
                let prefix = format!("S{}x", rng.index(1000));
                for i in 0..n {
                    let spreads = format!(" ...{prefix}{}", i + 1).repeat(times);
                    fragments.push_str(&format!(" fragment {prefix}{i} on Query {{{spreads} }}"));
                }
                fragments.push_str(&format!(" fragment {prefix}{n} on Query {{ {body} }}"));
                format!(" ...{prefix}0")
            }
            // The same selections many times over (merged by the executor), within a body the
            // server reads (past 8 MiB it answers 413 while the client is still sending).
            2 => {
                let most = (512 * 1024 / body.len().max(1)).max(2);
                format!(" {body}").repeat((2 + rng.index(200)).min(most))
            }
            // Inline fragments inside inline fragments.
            3 => {
                let n = 1 + rng.index(80);
                format!("{}{body}{}", " ... on Query {".repeat(n), " }".repeat(n))
            }
            // A fragment that spreads itself through another.
            4 => {
                let prefix = format!("C{}x", rng.index(1000));
                fragments.push_str(&format!(
                    " fragment {prefix}0 on Query {{ {body} ...{prefix}1 }} fragment {prefix}1 on Query {{ ...{prefix}0 }}"
                ));
                format!(" ...{prefix}0")
            }
            // A directive repeated on the whole selection.
            5 => {
                let directives = " @include(if: true)".repeat(1 + rng.index(3000));
                format!(" ...{directives} {{ {body} }}")
            }
            // Introspection fanning out beside it.
            _ => format!(" {body} {}", introspection_fan_out(rng)),
        };
    }
    format!("{head}{{{body} }}{fragments}")
}

/// `__schema` or `__type` selecting lists of types inside lists of types, under a few aliases.
fn introspection_fan_out(rng: &mut Rng) -> String {
    const STEPS: [&str; 6] = [
        "possibleTypes",
        "interfaces",
        "fields { type",
        "inputFields { type",
        "ofType",
        "types",
    ];
    let mut out = String::new();
    for alias in 0..1 + rng.index(4) {
        let depth = 1 + rng.index(12);
        let mut open = String::new();
        let mut close = String::new();
        for _ in 0..depth {
            let step = *rng.pick(&STEPS[..5]);
            open.push_str(&format!(" {step} {{"));
            close.push_str(if step.contains(" { ") { " } }" } else { " }" });
        }
        let root = if rng.chance(50) {
            format!("__schema {{ {} {{", STEPS[5])
        } else {
            "__type(name: \"Node\") {".to_owned()
        };
        let root_close = if root.starts_with("__schema") {
            " } }"
        } else {
            " }"
        };
        out.push_str(&format!(" i{alias}x: {root}{open} name{close}{root_close}"));
    }
    out
}

fn executed(body: &Value) -> usize {
    match body {
        Value::Array(items) => items.iter().map(executed).sum(),
        // Data, or only errors from resolvers (they carry a path): not refused before execution.
        Value::Object(map) => {
            let errors = map.get("errors").and_then(Value::as_array);
            let resolved = errors.is_some_and(|e| e.iter().all(|e| e.get("path").is_some()));
            usize::from(map.get("data").is_some_and(|d| !d.is_null()) || resolved)
        }
        _ => 0,
    }
}

struct Fuzzer<'a> {
    app: &'a TestApp,
    schema: &'a Schema,
    pools: &'a Pools,
    seed: u64,
}

impl Fuzzer<'_> {
    async fn run(&self, i: u64) -> Outcome {
        let mut rng = Rng::new(self.seed, i);
        let roll = rng.index(100);
        let op = |rng: &mut Rng, kind: usize| {
            Op {
                rng,
                schema: self.schema,
                pools: self.pools,
                decls: Vec::new(),
                vars: Map::new(),
                aliases: 0,
            }
            .operation(kind)
        };
        // Subscriptions go over WebSocket; now and then one is POSTed, which must be refused.
        let kind = |rng: &mut Rng| if rng.chance(3) { 2 } else { rng.index(2) };
        match roll {
            0..8 => {
                let (query, variables) = op(&mut rng, 0);
                let query = reshaped(&mut rng, &query);
                let body = body_text(&json!({ "query": query, "variables": variables }));
                self.post(Transport::Shape, 1, body, "application/json")
                    .await
            }
            8..60 => {
                let k = kind(&mut rng);
                let (query, variables) = op(&mut rng, k);
                let body = body_text(&json!({ "query": query, "variables": variables }));
                self.post(Transport::Post, 1, body, "application/json")
                    .await
            }
            60..68 => {
                let (query, variables) = op(&mut rng, 0);
                self.get(query, variables).await
            }
            68..76 => {
                let ops: Vec<Value> = (0..2 + rng.index(3))
                    .map(|_| {
                        let k = kind(&mut rng);
                        let (query, variables) = op(&mut rng, k);
                        json!({ "query": query, "variables": variables })
                    })
                    .collect();
                let n = ops.len();
                self.post(
                    Transport::Batch,
                    n,
                    body_text(&json!(ops)),
                    "application/json",
                )
                .await
            }
            76..90 => {
                let (query, variables) = op(&mut rng, 0);
                self.malformed(&mut rng, query, variables).await
            }
            _ => {
                let k = if rng.chance(85) { 2 } else { kind(&mut rng) };
                let (query, variables) = op(&mut rng, k);
                self.websocket(rng.chance(50), query, variables).await
            }
        }
    }

    /// Request `i` got no answer in time: regenerated to be shown.
    fn hung(&self, i: u64) -> Outcome {
        let mut rng = Rng::new(self.seed, i);
        let roll = rng.index(100);
        Outcome {
            transport: Transport::Post,
            operations: 1,
            valid: 0,
            status: None,
            codes: Vec::new(),
            offence: Some(format!("no answer within 20 s (roll {roll})")),
            request: format!("request {i} of seed {}", self.seed),
        }
    }

    async fn post(&self, transport: Transport, ops: usize, body: String, ty: &str) -> Outcome {
        let request = self
            .app
            .client
            .post(self.app.url("/graphql"))
            .header("content-type", ty)
            .body(body.clone());
        self.http(transport, ops, request, format!("POST {ty} {body}"))
            .await
    }

    async fn get(&self, query: String, variables: Value) -> Outcome {
        let variables = body_text(&variables);
        if query.len() + variables.len() > 30_000 {
            // Too long for a URL (the client refuses to build it): POSTed instead.
            let body = format!(r#"{{"query":{},"variables":{variables}}}"#, json!(query));
            return self
                .post(Transport::Post, 1, body, "application/json")
                .await;
        }
        let request = self
            .app
            .client
            .get(self.app.url("/graphql"))
            .query(&[("query", &query), ("variables", &variables)]);
        let shown = format!("GET query={query} variables={variables}");
        self.http(Transport::Get, 1, request, shown).await
    }

    async fn http(
        &self,
        transport: Transport,
        operations: usize,
        request: reqwest::RequestBuilder,
        shown: String,
    ) -> Outcome {
        let mut outcome = Outcome {
            transport,
            operations,
            valid: 0,
            status: None,
            codes: Vec::new(),
            offence: None,
            request: shown,
        };
        let response = match request.send().await {
            Ok(response) => response,
            Err(err) => {
                outcome.offence = Some(format!("no response: {err}"));
                return outcome;
            }
        };
        let status = response.status().as_u16();
        outcome.status = Some(status);
        let text = response.text().await.unwrap_or_default();
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        error_codes(&body, &mut outcome.codes);
        outcome.valid = if status == 200 { executed(&body) } else { 0 };
        let most_errors = match &body {
            Value::Array(items) => items.iter().map(error_count).max().unwrap_or(0),
            other => error_count(other),
        };
        if status >= 500 {
            outcome.offence = Some(format!("status {status}: {text:.500}"));
        } else if most_errors > 101 {
            outcome.offence = Some(format!("{most_errors} errors in one response"));
        } else if outcome.codes.iter().any(|c| c == "INTERNAL_SERVER_ERROR") {
            outcome.offence = Some(format!("INTERNAL_SERVER_ERROR: {text:.500}"));
        }
        outcome
    }

    async fn malformed(&self, rng: &mut Rng, query: String, variables: Value) -> Outcome {
        let good = body_text(&json!({ "query": query, "variables": variables }));
        let json = "application/json";
        let (body, ty) = match rng.index(14) {
            // Cut short, at a character boundary (the body is text).
            0 => (
                good.chars().take(rng.index(good.chars().count())).collect(),
                json,
            ),
            1 => (String::new(), json),
            2 => ("[".repeat(10_000), json),
            3 => (json!({ "query": "{".repeat(10_000) }).to_string(), json),
            4 => (
                good,
                ["text/plain", "application/x-www-form-urlencoded", ""][rng.index(3)],
            ),
            5 => (r#"{"query": 1, "variables": []}"#.to_owned(), json),
            6 => (
                r#"{"query": "{ __typename }", "variables": "x"}"#.to_owned(),
                json,
            ),
            7 => ("[]".to_owned(), json),
            8 => (
                format!(
                    r#"{{"query": "{{ __typename }}", "variables": {{"a": {}1{}}}}}"#,
                    "[".repeat(10_000),
                    "]".repeat(10_000)
                ),
                json,
            ),
            9 => (
                String::from_utf8_lossy(&rng.next().to_le_bytes()).into_owned(),
                json,
            ),
            10 => (
                r#"{"query": "{ session(id: \"\ud800\") { id } }"}"#.to_owned(),
                json,
            ),
            11 => (r#"{"query": "{ __typename \u0000 }"}"#.to_owned(), json),
            12 => (
                json!({ "query": format!("{}{{ __typename }}", " ".repeat(100_000)) }).to_string(),
                json,
            ),
            _ => (
                json!({ "query": format!("{{ {} }}", "__typename ".repeat(2_000)) }).to_string(),
                json,
            ),
        };
        self.post(Transport::Malformed, 1, body, ty).await
    }

    async fn websocket(&self, legacy: bool, query: String, variables: Value) -> Outcome {
        let transport = if legacy {
            Transport::WsLegacy
        } else {
            Transport::Ws
        };
        let (start, data, stop) = if legacy {
            ("start", "data", "stop")
        } else {
            ("subscribe", "next", "complete")
        };
        let payload = json!({ "query": query, "variables": variables });
        let mut outcome = Outcome {
            transport,
            operations: 1,
            valid: 0,
            status: None,
            codes: Vec::new(),
            offence: None,
            request: format!("WS legacy={legacy} {}", body_text(&payload)),
        };
        let request = common::ws::upgrade_request(self.app.addr, legacy);
        let mut socket = match tokio_tungstenite::connect_async(request).await {
            Ok((socket, _)) => socket,
            Err(err) => {
                outcome.offence = Some(format!("websocket refused: {err}"));
                return outcome;
            }
        };
        let init = json!({ "type": "connection_init", "payload": {} }).to_string();
        let subscribe = format!(
            r#"{{"id":"1","type":"{start}","payload":{}}}"#,
            body_text(&payload)
        );
        for text in [init, subscribe] {
            if socket.send(WsMessage::text(text)).await.is_err() {
                outcome.offence = Some("websocket closed while sending".to_owned());
                return outcome;
            }
        }
        // The ack, then the first result or two (a subscription may well stay silent).
        let mut results = 0;
        let mut wait = Duration::from_millis(2_000);
        while results < 2 {
            let frame = match tokio::time::timeout(wait, socket.next()).await {
                Err(_) => {
                    // Still subscribed, waiting for a change: it passed validation.
                    outcome.valid = 1;
                    break;
                }
                Ok(Some(Ok(frame))) => frame,
                Ok(_) => break,
            };
            let message: Value = match frame {
                WsMessage::Text(text) => serde_json::from_str(&text).unwrap_or(Value::Null),
                WsMessage::Close(frame) => {
                    let code = frame.map(|f| u16::from(f.code));
                    if code.is_none_or(|c| c == 1011) {
                        outcome.offence = Some(format!("closed with {code:?}"));
                    }
                    break;
                }
                _ => continue,
            };
            let kind = message["type"].as_str().unwrap_or_default();
            error_codes(&message["payload"], &mut outcome.codes);
            for error in message["payload"].as_array().into_iter().flatten() {
                let code = error["extensions"]["code"].as_str().unwrap_or("(none)");
                outcome.codes.push(code.to_owned());
            }
            match kind {
                "connection_ack" => wait = Duration::from_millis(60),
                "ka" | "ping" | "pong" => {}
                k if k == data => {
                    outcome.valid = executed(&message["payload"]);
                    results += 1;
                }
                "complete" => {
                    outcome.valid = 1;
                    break;
                }
                _ => break,
            }
        }
        if outcome.codes.iter().any(|c| c == "INTERNAL_SERVER_ERROR") {
            outcome.offence = Some("INTERNAL_SERVER_ERROR over WebSocket".to_owned());
        }
        let _ = socket
            .send(WsMessage::text(
                json!({ "id": "1", "type": stop }).to_string(),
            ))
            .await;
        let _ = socket.close(None).await;
        outcome
    }
}

/// Real records through the API besides the demo's: a session being recorded, with a streaming
/// timeline event (so chunks exist), messages and a chat.
async fn seed_data(app: &TestApp) {
    casefile::demo::load(&app.store).await.unwrap();
    let session = app
        .data(
            r#"mutation { createSession(input: { alertType: "PodCrashLooping", alertData: {pod: "a"},
                 chainId: "kubernetes-investigation" }) { id } }"#,
            json!({}),
        )
        .await["createSession"]["id"]
        .clone();
    app.data(
        "mutation($s: ID!) { startSession(id: $s) { id } }",
        json!({ "s": session }),
    )
    .await;
    let stage = app
        .data(
            r#"mutation($s: ID!) { createStage(input: { sessionId: $s, name: "Initial Analysis",
                 stageIndex: 0, expectedAgentCount: 1 }) { id } }"#,
            json!({ "s": session }),
        )
        .await["createStage"]["id"]
        .clone();
    let execution = app
        .data(
            r#"mutation($s: ID!) { createAgentExecution(input: { stageId: $s,
                 agentName: "KubernetesAgent", agentIndex: 1, iterationStrategy: "react" }) { id } }"#,
            json!({ "s": stage }),
        )
        .await["createAgentExecution"]["id"]
        .clone();
    app.data(
        "mutation($e: ID!) { startAgentExecution(input: { id: $e }) { id } }",
        json!({ "e": execution }),
    )
    .await;
    let event = app
        .data(
            r#"mutation($e: ID!) { createTimelineEvent(input: { executionId: $e,
                 eventType: LLM_THINKING }) { id } }"#,
            json!({ "e": execution }),
        )
        .await["createTimelineEvent"]["id"]
        .clone();
    for (offset, delta) in [(0, "The pod "), (8, "restarts.")] {
        app.data(
            r#"mutation($e: ID!, $o: Int!, $d: String!) { appendTimelineContent(input: {
                 eventId: $e, offset: $o, delta: $d }) { __typename } }"#,
            json!({ "e": event, "o": offset, "d": delta }),
        )
        .await;
    }
    app.data(
        r#"mutation($e: ID!) { appendMessage(input: { executionId: $e, role: USER,
             content: "What is wrong?" }) { id } }"#,
        json!({ "e": execution }),
    )
    .await;
}

const HARVEST: &str = r#"{
  sessions(first: 20, filter: { includeDeleted: true }) { edges { cursor node { id uuid
    timeline(first: 3) { edges { cursor } }
    chatsConnection(first: 20) { edges { node { id uuid messages { id uuid } } } }
    llmInteractionsConnection(first: 20) { edges { node { id uuid } } }
    mcpInteractionsConnection(first: 20) { edges { node { id uuid } } }
    stages { id uuid executions { id uuid messagesConnection(first: 20) { edges { node { id uuid } } }
      timeline(first: 3) { edges { cursor node { id uuid } } } } } } } }
}"#;

/// Rows that the write side's rules make impossible; each query counts violations.
const INVARIANTS: &[(&str, &str)] = &[
    (
        "stages of a missing session",
        "SELECT count(*) FROM stages s WHERE NOT EXISTS (SELECT 1 FROM sessions x WHERE x.id = s.session_id)",
    ),
    (
        "sessions whose timeline sequence numbers are not 1..n",
        "SELECT count(*) FROM (SELECT session_id FROM timeline_events GROUP BY session_id \
         HAVING min(sequence_number) <> 1 OR max(sequence_number) <> count(*)) x",
    ),
    (
        "executions whose message sequence numbers are not 1..n",
        "SELECT count(*) FROM (SELECT execution_id FROM messages GROUP BY execution_id \
         HAVING min(sequence_number) <> 1 OR max(sequence_number) <> count(*)) x",
    ),
    (
        "chunks of finished timeline events",
        "SELECT count(*) FROM timeline_event_chunks c JOIN timeline_events e ON e.id = c.event_id \
         WHERE e.status <> 'streaming'",
    ),
    (
        "pieces (chunks and texts in the log) that do not continue their streaming event's content exactly",
        "SELECT count(*) FROM (SELECT p.start_offset, char_length(e.content) + coalesce(sum(p.end_offset - p.start_offset) \
         OVER (PARTITION BY e.id ORDER BY p.start_offset ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) \
         AS expected FROM timeline_events e CROSS JOIN LATERAL ( \
             SELECT c.start_offset, c.start_offset + char_length(c.content) AS end_offset \
             FROM timeline_event_chunks c WHERE c.event_id = e.id AND c.session_id = e.session_id \
             UNION ALL SELECT l.start_offset, l.end_offset FROM logged_event_text(e.session_id, e.id) l) p \
         WHERE e.status = 'streaming') x \
         WHERE start_offset <> expected",
    ),
    (
        // Every writer of a text keeps its end (an overlap's chunk through a trigger, 0129), and
        // an append's check reads the kept end alone.
        "kept ends of events that are not streaming, or not where their event's text ends",
        "SELECT count(*) FROM streaming_event_ends x LEFT JOIN timeline_events_live e \
         ON e.id = x.event_id AND e.session_id = x.session_id \
         WHERE e.status IS DISTINCT FROM 'streaming' OR x.end_offset <> char_length(e.content)",
    ),
    (
        // A group's check skips the log's record of an event whose kept end says it has one.
        "kept ends that say their event's text is in the log, of an event with no record of it",
        "SELECT count(*) FROM streaming_event_ends x WHERE x.logged AND NOT EXISTS ( \
         SELECT FROM event_texts_in_log f \
         WHERE f.session_id = x.session_id AND f.event_id = x.event_id)",
    ),
    (
        "positions of a session's event log (its rows and runs) that are not 1, 2, 3, … each once",
        "SELECT count(*) FROM (SELECT x.first, lag(x.last) OVER (PARTITION BY x.session_id \
                                                               ORDER BY x.first) AS before \
         FROM (SELECT s.session_id, s.position - coalesce(cardinality(s.run_events), 1) + 1 AS first, \
                      s.position AS last FROM session_events s \
               UNION ALL \
               SELECT r.session_id, r.first_position, r.first_position + r.appends - 1 \
               FROM session_event_runs r) x) y \
         WHERE y.first <> coalesce(y.before, 0) + 1",
    ),
    (
        "runs of appends whose log does not hold as many appends as they count",
        "SELECT count(*) FROM session_event_runs r \
         WHERE (SELECT count(*) FROM run_appends(r.first_position, r.appends, r.created_at, \
                                                 r.events, r.log, r.appends)) <> r.appends",
    ),
    (
        "records of texts in the log of events that are not streaming",
        "SELECT count(*) FROM event_texts_in_log f LEFT JOIN timeline_events e \
         ON e.id = f.event_id AND e.session_id = f.session_id \
         WHERE e.status IS DISTINCT FROM 'streaming'",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuzzed_requests_never_break_the_server() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        default_hook(info);
    }));
    let seed = std::env::var("CASEFILE_FUZZ_SEED")
        .ok()
        .map(|s| s.parse().expect("CASEFILE_FUZZ_SEED is a u64"))
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let requests: u64 = std::env::var("CASEFILE_FUZZ_REQUESTS")
        .ok()
        .map_or(10_000, |s| {
            s.parse().expect("CASEFILE_FUZZ_REQUESTS is a count")
        });
    println!("fuzz: seed {seed} (CASEFILE_FUZZ_SEED={seed} reproduces), {requests} requests");

    let app = TestApp::start().await;
    seed_data(&app).await;
    let schema = Schema::new(&app.data(INTROSPECTION, json!({})).await);
    let mut pools = Pools::default();
    pools.harvest(&app.data(HARVEST, json!({})).await);
    assert!(!pools.ids.is_empty() && !pools.uuids.is_empty() && !pools.cursors.is_empty());

    let started = Instant::now();
    let fuzzer = Fuzzer {
        app: &app,
        schema: &schema,
        pools: &pools,
        seed,
    };
    // After the first request left unanswered, send no more: a stuck server would otherwise
    // make every later request wait out its timeout, and the run would never end.
    let stalled = AtomicBool::new(false);
    let outcomes: Vec<(u64, Outcome)> = futures::stream::iter(0..requests)
        .map(|i| {
            let (fuzzer, stalled) = (&fuzzer, &stalled);
            async move {
                if stalled.load(Ordering::SeqCst) {
                    return None;
                }
                let outcome = tokio::time::timeout(Duration::from_secs(20), fuzzer.run(i)).await;
                Some((
                    i,
                    outcome.unwrap_or_else(|_| {
                        stalled.store(true, Ordering::SeqCst);
                        fuzzer.hung(i)
                    }),
                ))
            }
        })
        .buffer_unordered(CONCURRENCY)
        .filter_map(std::future::ready)
        .collect()
        .await;
    let elapsed = started.elapsed();

    let mut by_transport: BTreeMap<Transport, (usize, usize, usize)> = BTreeMap::new();
    let mut codes: BTreeMap<String, usize> = BTreeMap::new();
    let mut statuses: BTreeMap<u16, usize> = BTreeMap::new();
    let mut offences = Vec::new();
    for (i, outcome) in &outcomes {
        let entry = by_transport.entry(outcome.transport).or_default();
        entry.0 += 1;
        entry.1 += outcome.operations;
        entry.2 += outcome.valid;
        for code in &outcome.codes {
            *codes.entry(code.clone()).or_default() += 1;
        }
        if let Some(status) = outcome.status {
            *statuses.entry(status).or_default() += 1;
        }
        if let Some(offence) = &outcome.offence {
            offences.push(format!(
                "request {i}: {offence}\n  {:.4000}",
                outcome.request
            ));
        }
    }
    println!(
        "fuzz: {} of {requests} requests sent in {elapsed:.1?} (seed {seed})",
        outcomes.len()
    );
    let (mut all_ops, mut all_valid) = (0, 0);
    for (transport, (sent, ops, valid)) in &by_transport {
        all_ops += ops;
        all_valid += valid;
        println!(
            "  {transport:?}: {sent} requests, {ops} operations, {valid} executed ({:.0}%)",
            100.0 * *valid as f64 / (*ops).max(1) as f64
        );
    }
    println!(
        "  all: {all_ops} operations, {all_valid} executed ({:.0}%)",
        100.0 * all_valid as f64 / all_ops.max(1) as f64
    );
    println!("  statuses: {statuses:?}");
    println!("  error codes: {codes:?}");

    for offence in offences.iter().take(5) {
        eprintln!("{offence}\n");
    }
    assert!(
        offences.is_empty(),
        "{} requests broke the rules (seed {seed})",
        offences.len()
    );
    assert_eq!(
        PANICS.load(Ordering::SeqCst),
        0,
        "the server panicked (seed {seed})"
    );
    // Generated from the schema, most operations must get past validation to the resolvers.
    let ops = by_transport[&Transport::Post].1;
    assert!(
        by_transport[&Transport::Post].2 * 100 >= ops * 60,
        "fewer than 60% of POSTed operations executed"
    );

    // Still answering, and correctly.
    let health = app.client.get(app.url("/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    let total = app
        .data("{ sessions(first: 1) { totalCount } }", json!({}))
        .await["sessions"]["totalCount"]
        .as_i64()
        .unwrap();
    let live: i64 = sqlx::query_scalar("SELECT count(*) FROM sessions WHERE deleted_at IS NULL")
        .fetch_one(app.store.pool())
        .await
        .unwrap();
    assert_eq!(total, live);

    // Nothing partial stored.
    for (what, sql) in INVARIANTS {
        let violations: i64 = sqlx::query_scalar(sql)
            .fetch_one(app.store.pool())
            .await
            .unwrap();
        assert_eq!(violations, 0, "{what} (seed {seed})");
    }
    app.stop().await;
}
