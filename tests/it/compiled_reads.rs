//! The compiled path (`api::compiled`) answers a session's tree from one statement, and its
//! answer is the resolvers' answer: random selections over the demo's sessions (every field it
//! answers, at every level, aliases, type names, page sizes literal and by variable, agents with
//! and without sub-agents) sent through `session(id:)`, which it answers, and through
//! `node(id:)`, whose fragment sends them to the resolvers, under one alias. The same values,
//! each written the same way (a JSON scalar's keys in the same order); only the order of an
//! object's keys may differ: the compiled path
//! writes them in the query's order (as the GraphQL spec asks), the resolvers in the order
//! their fields finished (async-graphql resolves a query's fields concurrently and keeps them
//! as they come: async-graphql/async-graphql#612).

use base64::Engine as _;
use serde_json::{Value, json};

use crate::common::rng::Rng;
use crate::common::{TestApp, statements};

const SESSION: &[&str] = &[
    "id",
    "uuid",
    "alertType",
    "alertData",
    "status",
    "chainId",
    "chainOverrides",
    "author",
    "createdBy",
    "runbookUrl",
    "finalAnalysis",
    "executiveSummary",
    "errorMessage",
    "startedAt",
    "completedAt",
    "durationMs",
    "createdAt",
    "updatedAt",
    "deletedAt",
];
const STAGE: &[&str] = &[
    "id",
    "uuid",
    "name",
    "stageIndex",
    "expectedAgentCount",
    "parallelType",
    "successPolicy",
    "status",
    "startedAt",
    "completedAt",
    "durationMs",
    "errorMessage",
    "createdAt",
    "updatedAt",
];
const EXECUTION: &[&str] = &[
    "id",
    "uuid",
    "agentName",
    "agentIndex",
    "status",
    "startedAt",
    "completedAt",
    "durationMs",
    "errorMessage",
    "iterationStrategy",
    "llmProvider",
    "llmModel",
    "agentType",
    "teamName",
    "task",
    "resultSummary",
    "depth",
    "parentId",
    "createdAt",
    "updatedAt",
];
const TIMELINE_EVENT: &[&str] = &[
    "id",
    "uuid",
    "sequenceNumber",
    "eventType",
    "status",
    "content",
    "metadata",
    "createdAt",
    "updatedAt",
];
const MESSAGE: &[&str] = &[
    "id",
    "uuid",
    "sequenceNumber",
    "role",
    "content",
    "toolCallId",
    "toolName",
    "toolCalls",
    "createdAt",
];
const LLM_INTERACTION: &[&str] = &[
    "id",
    "uuid",
    "interactionType",
    "modelName",
    "llmRequest",
    "llmResponse",
    "thinkingContent",
    "responseMetadata",
    "inputTokens",
    "cachedInputTokens",
    "outputTokens",
    "totalTokens",
    "thinkingTokens",
    "durationMs",
    "errorMessage",
    "success",
    "createdAt",
    "historyEdited",
];
const MCP_INTERACTION: &[&str] = &[
    "id",
    "uuid",
    "interactionType",
    "serverName",
    "toolName",
    "toolArguments",
    "toolResult",
    "availableTools",
    "durationMs",
    "errorMessage",
    "success",
    "createdAt",
    "toolCallId",
    "attempt",
];

const CHAT: &[&str] = &[
    "id",
    "uuid",
    "createdBy",
    "title",
    "createdAt",
    "updatedAt",
    "deletedAt",
    "deletedBy",
];
const QUESTION: &[&str] = &["id", "uuid", "content", "author", "createdBy", "createdAt"];

/// A random query being written, with the variables it declares.
struct Writer {
    rng: Rng,
    variables: Vec<(String, Value)>,
    aliases: usize,
}

impl Writer {
    /// A response key: the field's name, or now and then an alias of it.
    fn key(&mut self, field: &str) -> String {
        if self.rng.chance(15) {
            self.aliases += 1;
            format!("a{}: {field}", self.aliases)
        } else {
            field.to_owned()
        }
    }

    /// Some of `fields` (each at most once under its own name), `__typename` now and then.
    fn scalars(&mut self, fields: &[&str], out: &mut String) {
        let mut any = false;
        for field in fields {
            if self.rng.chance(35) {
                let key = self.key(field);
                out.push_str(&format!(" {key}"));
                any = true;
            }
        }
        if !any {
            out.push_str(" uuid");
        }
        if self.rng.chance(15) {
            out.push_str(" __typename");
        }
    }

    /// A page's `first`: absent, literal, or a variable.
    fn first(&mut self) -> String {
        let size = [0, 1, 2, 3, 100][self.rng.below(5) as usize];
        match self.rng.below(4) {
            0 => String::new(),
            1 => {
                let name = format!("n{}", self.variables.len());
                self.variables.push((name.clone(), json!(size)));
                format!("(first: ${name})")
            }
            _ => format!("(first: {size})"),
        }
    }

    fn connection(&mut self, field: &str, node: &[&str], out: &mut String) {
        let first = self.first();
        let mut fields = String::new();
        self.scalars(node, &mut fields);
        self.page(field, &first, &fields, out);
    }

    /// A connection of `field` with these arguments, its nodes selecting `fields`.
    fn page(&mut self, field: &str, arguments: &str, fields: &str, out: &mut String) {
        let key = self.key(field);
        let typename = |rng: &mut Rng| if rng.chance(20) { " __typename" } else { "" };
        let (outer, edge) = (typename(&mut self.rng), typename(&mut self.rng));
        out.push_str(&format!(
            " {key}{arguments} {{{outer} edges {{{edge} node {{{fields} }} }} }}"
        ));
    }

    /// A session's chats (the deleted ones too, or not) and their questions.
    fn chats(&mut self, out: &mut String) {
        let first = self.first();
        let deleted =
            ["includeDeleted: true", "includeDeleted: false", ""][self.rng.below(3) as usize];
        let arguments = match (first.strip_suffix(')'), deleted) {
            (Some(first), "") => format!("{first})"),
            (Some(first), deleted) => format!("{first}, {deleted})"),
            (None, "") => String::new(),
            (None, deleted) => format!("({deleted})"),
        };
        let mut fields = String::new();
        self.scalars(CHAT, &mut fields);
        if self.rng.chance(60) {
            self.connection("questionsConnection", QUESTION, &mut fields);
        }
        self.page("chatsConnection", &arguments, &fields, out);
    }

    /// The relationships `fields` names that each level has, each maybe.
    fn pages(&mut self, messages: bool, out: &mut String) {
        if self.rng.chance(60) {
            self.connection("timeline", TIMELINE_EVENT, out);
        }
        if messages && self.rng.chance(60) {
            self.connection("messagesConnection", MESSAGE, out);
        }
        if self.rng.chance(50) {
            let key = self.key("llmInteractionsConnection");
            let first = self.first();
            let mut fields = String::new();
            self.scalars(LLM_INTERACTION, &mut fields);
            if self.rng.chance(50) {
                self.connection("conversationConnection", MESSAGE, &mut fields);
            }
            if self.rng.chance(40) {
                let key = self.key("lastMessage");
                let mut message = String::new();
                self.scalars(MESSAGE, &mut message);
                fields.push_str(&format!(" {key} {{{message} }}"));
            }
            out.push_str(&format!(
                " {key}{first} {{ edges {{ node {{{fields} }} }} }}"
            ));
        }
        if self.rng.chance(50) {
            self.connection("mcpInteractionsConnection", MCP_INTERACTION, out);
        }
    }

    fn execution(&mut self, depth: usize) -> String {
        let mut out = String::new();
        self.scalars(EXECUTION, &mut out);
        self.pages(true, &mut out);
        if depth < 2 && self.rng.chance(40) {
            let inner = self.execution(depth + 1);
            let key = self.key("subAgents");
            out.push_str(&format!(" {key} {{{inner} }}"));
        }
        out
    }

    fn session(&mut self) -> String {
        let mut out = String::new();
        self.scalars(SESSION, &mut out);
        if self.rng.chance(85) {
            let mut stage = String::new();
            self.scalars(STAGE, &mut stage);
            self.pages(true, &mut stage);
            if self.rng.chance(85) {
                let which = match self.rng.below(4) {
                    0 => "(includeSubAgents: false)",
                    1 => "(includeSubAgents: true)",
                    _ => "",
                };
                let inner = self.execution(0);
                let key = self.key("executions");
                stage.push_str(&format!(" {key}{which} {{{inner} }}"));
            }
            let key = self.key("stages");
            out.push_str(&format!(" {key} {{{stage} }}"));
        }
        self.pages(false, &mut out);
        if self.rng.chance(50) {
            self.chats(&mut out);
        }
        out
    }

    /// The operation's variable declarations.
    fn declarations(&self) -> String {
        self.variables
            .iter()
            .map(|(name, _)| format!(", ${name}: Int"))
            .collect()
    }
}

/// The raw body of a POSTed query.
async fn body(app: &TestApp, query: &str, variables: &Value) -> String {
    app.client
        .post(app.url("/graphql"))
        .json(&json!({ "query": query, "variables": variables }))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_compiled_answer_is_the_resolvers_answer() {
    // Whole relationships at every level: beyond the default budgets.
    let mut options = casefile::http::HttpOptions::default();
    options.limits.max_query_complexity = usize::MAX / 2;
    options.limits.max_query_depth = 64;
    options.limits.max_selections = 100_000;
    let app = TestApp::start_with(options).await;
    casefile::demo::load(&app.store).await.unwrap();
    // Half the LLM calls sent a selection of their conversation (every other message, and
    // their last), as a compressing agent records it.
    let selected = sqlx::query(
        "UPDATE llm_interactions li SET sent_message_ids = ARRAY(SELECT m.id FROM messages m \
         WHERE m.execution_id = li.execution_id AND m.session_id = li.session_id \
         AND m.sequence_number <= (SELECT last.sequence_number FROM messages last \
         WHERE last.id = li.last_message_id AND last.session_id = li.session_id) \
         AND (m.sequence_number % 2 = 1 OR m.id = li.last_message_id) ORDER BY m.sequence_number) \
         WHERE li.last_message_id IS NOT NULL AND get_byte(uuid_send(li.id), 15) % 2 = 0",
    )
    .execute(app.store.pool())
    .await
    .unwrap();
    assert!(selected.rows_affected() > 0);
    // Up to three chats a session (some at the same moment, some titled, the second one
    // deleted), each with up to three questions (some asked at the same moment).
    for statement in [
        "INSERT INTO chats (id, session_id, created_by, title, created_at, updated_at, \
             deleted_at, deleted_by) \
         SELECT gen_random_uuid(), s.id, 'token:t' || n, \
             CASE WHEN n % 2 = 1 THEN 'Chat ' || n END, s.created_at + make_interval(mins => n / 2), \
             s.created_at + make_interval(mins => n), CASE WHEN n = 2 THEN now() END, \
             CASE WHEN n = 2 THEN 'token:admin' END \
         FROM sessions s, generate_series(1, get_byte(uuid_send(s.id), 15) % 4) n",
        "INSERT INTO chat_user_messages (id, chat_id, session_id, content, author, created_by, \
             created_at) \
         SELECT gen_random_uuid(), c.id, c.session_id, 'Why ' || k || '?', \
             CASE WHEN k % 2 = 1 THEN 'Ana' END, 'token:t', c.created_at + make_interval(secs => k / 2) \
         FROM chats c, generate_series(1, get_byte(uuid_send(c.id), 15) % 4) k",
    ] {
        sqlx::query(statement)
            .execute(app.store.pool())
            .await
            .unwrap();
    }
    let mut ids = app.session_ids(100).await;
    assert!(ids.len() > 3);
    // And the id of no session.
    let none = base64::engine::general_purpose::STANDARD
        .encode("Session:00000000-0000-7000-8000-000000000000");
    ids.push(json!(none));
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    println!("compiled selections, seed {seed}");
    let mut writer = Writer {
        rng: Rng(seed),
        variables: Vec::new(),
        aliases: 0,
    };
    for round in 0..60 {
        writer.variables.clear();
        let selection = writer.session();
        let id = ids[writer.rng.below(ids.len() as u64) as usize].clone();
        let mut variables = json!({ "id": id });
        for (name, value) in &writer.variables {
            variables[name] = value.clone();
        }
        let declared = writer.declarations();
        let compiled = body(
            &app,
            &format!("query($id: ID!{declared}) {{ s: session(id: $id) {{{selection} }} }}"),
            &variables,
        )
        .await;
        let resolved = body(
            &app,
            &format!(
                "query($id: ID!{declared}) {{ s: node(id: $id) {{ ... on Session {{{selection} }} }} }}"
            ),
            &variables,
        )
        .await;
        same(&compiled, &resolved, round, seed, &selection);
        if round % 3 == 0 {
            // A page of sessions (from the start, or after the second), with their trees.
            let first = [0, 1, 3, 20][writer.rng.below(4) as usize];
            let after = if writer.rng.chance(50) {
                let start = app
                    .data(
                        "{ sessions(first: 2) { pageInfo { endCursor } } }",
                        json!({}),
                    )
                    .await;
                start["sessions"]["pageInfo"]["endCursor"].clone()
            } else {
                Value::Null
            };
            variables["first"] = json!(first);
            variables["after"] = after;
            let page = |node: &str| {
                format!(
                    "query($first: Int, $after: String{declared}) {{ s: sessions(first: $first, \
                     after: $after) {{ pageInfo {{ hasNextPage endCursor startCursor \
                     hasPreviousPage __typename }} __typename edges {{ cursor node {{ {node} }} \
                     __typename }} }} }}"
                )
            };
            let compiled = body(&app, &page(&selection), &variables).await;
            let resolved = body(
                &app,
                &page(&format!("... on Session {{{selection} }}")),
                &variables,
            )
            .await;
            same(&compiled, &resolved, round, seed, &selection);
        }
    }
    app.stop().await;
}

/// Fails unless the two answers hold the same values, each written the same way.
fn same(compiled: &str, resolved: &str, round: usize, seed: u64, selection: &str) {
    assert!(
        !compiled.contains("\"errors\""),
        "round {round} (seed {seed}): {compiled}\n{selection}"
    );
    let (a, b): (Answer, Answer) = (
        serde_json::from_str(compiled).unwrap(),
        serde_json::from_str(resolved).unwrap(),
    );
    assert!(
        a == b,
        "round {round} (seed {seed}): the answers differ\n{selection}\ncompiled: {compiled}\nresolved: {resolved}"
    );
}

/// The fields of JSON scalars (under their own names): their values are compared as written,
/// their keys' order too.
const JSON_FIELDS: &[&str] = &[
    "alertData",
    "chainOverrides",
    "metadata",
    "toolCalls",
    "llmRequest",
    "llmResponse",
    "responseMetadata",
    "toolArguments",
    "toolResult",
    "availableTools",
];

/// An answer as compared: its objects' keys by name, every value as written (a number keeps
/// its form, `1` is not `1.0`), a JSON scalar's whole text as written.
#[derive(Debug, PartialEq)]
enum Answer {
    Object(std::collections::BTreeMap<String, Answer>),
    List(Vec<Answer>),
    Written(String),
}

impl<'de> serde::Deserialize<'de> for Answer {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(AnswerVisitor)
    }
}

struct AnswerVisitor;

impl<'de> serde::de::Visitor<'de> for AnswerVisitor {
    type Value = Answer;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a GraphQL response")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Answer, A::Error> {
        let mut fields = std::collections::BTreeMap::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = if JSON_FIELDS.contains(&key.as_str()) {
                let raw: Box<serde_json::value::RawValue> = map.next_value()?;
                Answer::Written(raw.get().to_owned())
            } else {
                map.next_value()?
            };
            fields.insert(key, value);
        }
        Ok(Answer::Object(fields))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Answer, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Answer::List(items))
    }
    fn visit_unit<E>(self) -> Result<Answer, E> {
        Ok(Answer::Written("null".to_owned()))
    }
    fn visit_bool<E>(self, v: bool) -> Result<Answer, E> {
        Ok(Answer::Written(v.to_string()))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Answer, E> {
        Ok(Answer::Written(v.to_string()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Answer, E> {
        Ok(Answer::Written(v.to_string()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Answer, E> {
        Ok(Answer::Written(serde_json::json!(v).to_string()))
    }
    fn visit_str<E>(self, v: &str) -> Result<Answer, E> {
        Ok(Answer::Written(Value::from(v).to_string()))
    }
}

/// The session page of the read benchmark.
const SESSION_PAGE: &str = "query Session($id: ID!) { session(id: $id) { uuid alertType status \
    finalAnalysis executiveSummary stages { uuid name stageIndex status executions { uuid \
    agentName agentIndex status llmModel \
    timeline(first: 100) { edges { node { uuid eventType status content } } } \
    messagesConnection(first: 100) { edges { node { uuid sequenceNumber role content } } } \
    llmInteractionsConnection(first: 100) { edges { node { uuid interactionType modelName \
    inputTokens outputTokens llmResponse } } } \
    mcpInteractionsConnection(first: 100) { edges { node { uuid serverName toolName \
    toolArguments toolResult } } } } } } }";

#[tokio::test]
async fn a_session_page_is_one_statement_and_what_it_does_not_answer_goes_to_the_resolvers() {
    let app = TestApp::start().await;
    casefile::demo::load(&app.store).await.unwrap();
    // A session whose agents have timelines.
    let mut id = None;
    for candidate in app.session_ids(100).await {
        let data = app.data(SESSION_PAGE, json!({ "id": candidate })).await;
        if data["session"]["stages"][0]["executions"][0]["timeline"]["edges"]
            .as_array()
            .is_some_and(|edges| !edges.is_empty())
        {
            id = Some(candidate);
            break;
        }
    }
    let id = id.expect("a demo session with timelines");
    let _recording = statements::record_on_this_thread();
    let page = |query: String| {
        let (app, id) = (&app, id.clone());
        async move {
            statements::clear();
            app.data(&query, json!({ "id": id })).await;
            statements::recorded_by_operations()
        }
    };
    let read = page(SESSION_PAGE.to_owned()).await;
    assert_eq!(read.len(), 1, "{read:#?}");
    assert_eq!(statements::round_trips(), [1]);
    // A cursor, page information, a count, a relationship it does not list, a fragment or
    // a directive: the resolvers answer, a statement per relationship and level.
    for unanswered in [
        "timeline(first: 100) { edges { cursor node { uuid } } }",
        "timeline(first: 100) { pageInfo { hasNextPage } }",
        "llmInteractionsConnection { totalCount }",
        "counts { stages }",
        "... on Session { uuid }",
        "uuid @include(if: true)",
        "timeline(last: 2) { edges { node { uuid } } }",
    ] {
        let query = SESSION_PAGE.replacen("uuid alertType", &format!("{unanswered} alertType"), 1);
        let read = page(query).await;
        assert!(read.len() > 1, "{unanswered}: {read:#?}");
    }
    // A page of sessions with their trees (to their chats' questions and their LLM calls'
    // last messages): the page as the resolver reads it, then the trees.
    statements::clear();
    app.data(
        "{ sessions(first: 20) { pageInfo { endCursor } edges { node { uuid stages { uuid \
         executions { uuid timeline(first: 5) { edges { node { uuid } } } \
         llmInteractionsConnection { edges { node { lastMessage { uuid } } } } } } \
         chatsConnection(includeDeleted: true) { edges { node { uuid \
         questionsConnection(first: 3) { edges { node { content } } } } } } } } } }",
        json!({}),
    )
    .await;
    assert_eq!(statements::recorded_by_operations().len(), 2);
    assert_eq!(statements::round_trips(), [2]);
    // Many subqueries in one statement cost PostgreSQL more to plan than their cost says:
    // past 32 levels the resolvers batch them.
    let aliases: String = (0..40)
        .map(|i| format!(" t{i}: timeline(first: 1) {{ edges {{ node {{ uuid }} }} }}"))
        .collect();
    let read =
        page(SESSION_PAGE.replacen("uuid alertType", &format!("{aliases} alertType"), 1)).await;
    assert!(read.len() > 1, "{read:#?}");
    drop(_recording);
    app.stop().await;
}

#[tokio::test]
async fn a_compiled_answer_past_the_response_limit_is_refused_as_the_resolvers_refuse_it() {
    let mut options = casefile::http::HttpOptions::default();
    options.limits.max_response_bytes = 2_000;
    let app = TestApp::start_with(options).await;
    casefile::demo::load(&app.store).await.unwrap();
    let mut refused = 0;
    for id in app.session_ids(100).await {
        let compiled = app
            .graphql(
                "query($id: ID!) { s: session(id: $id) { stages { executions { \
                 timeline(first: 100) { edges { node { content } } } } } } }",
                json!({ "id": id }),
            )
            .await;
        let resolved = app
            .graphql(
                "query($id: ID!) { s: node(id: $id) { ... on Session { stages { executions { \
                 timeline(first: 100) { edges { node { content } } } } } } } }",
                json!({ "id": id }),
            )
            .await;
        assert_eq!(compiled, resolved);
        if compiled.get("errors").is_some() {
            assert_eq!(
                compiled["errors"][0]["extensions"]["code"],
                "RESPONSE_TOO_LARGE"
            );
            refused += 1;
        }
    }
    assert!(refused > 0, "no session's timelines went past the limit");
    app.stop().await;
}
