//! Chats people own (seed 002): titles their owners set, each person's chats across sessions
//! by latest activity, where each chat stands, and each question's answer.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use casefile::auth::{AuthMode, AuthOptions};
use casefile::http::HttpOptions;
use casefile::model::Role;
use casefile::store::chats::ChatListFilter;
use casefile::store::page::Slice;

use crate::common::TestApp;

/// One caller, by API token.
struct Caller<'a> {
    app: &'a TestApp,
    secret: String,
}

impl Caller<'_> {
    async fn new<'a>(app: &'a TestApp, name: &str, role: Role) -> Caller<'a> {
        Caller {
            app,
            secret: app.token(name, role, None).await,
        }
    }

    async fn graphql(&self, query: &str, variables: Value) -> Value {
        self.app
            .client
            .post(self.app.url("/graphql"))
            .bearer_auth(&self.secret)
            .json(&json!({ "query": query, "variables": variables }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    async fn ok(&self, query: &str, variables: Value) -> Value {
        let body = self.graphql(query, variables).await;
        assert!(body.get("errors").is_none(), "unexpected errors: {body:#}");
        body["data"].clone()
    }

    /// The error code of an operation that must fail, and that it changed nothing visible.
    async fn refused(&self, query: &str, variables: Value) -> String {
        let body = self.graphql(query, variables).await;
        assert!(body["errors"][0].is_object(), "expected an error: {body:#}");
        body["errors"][0]["extensions"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// A session, created and completed.
    async fn finished_session(&self) -> String {
        let d = self
            .ok(
                "mutation { createSession(input: { alertType: \"Disk\", chainId: \"c\" }) { uuid } }",
                json!({}),
            )
            .await;
        let id = d["createSession"]["uuid"].as_str().unwrap().to_owned();
        self.ok(FINISH_SESSION, json!({ "id": id })).await;
        id
    }

    async fn open(&self, session: &str, title: Option<&str>) -> String {
        let d = self
            .ok(
                "mutation ($s: ID!, $t: String) { openChat(input: { sessionId: $s, title: $t }) { id } }",
                json!({ "s": session, "t": title }),
            )
            .await;
        d["openChat"]["id"].as_str().unwrap().to_owned()
    }

    /// Asks a question; the answering execution's id.
    async fn ask(&self, chat: &str, question: &str) -> String {
        let d = self
            .ok(
                "mutation ($c: ID!, $q: String!) { postChatMessage(input: { chatId: $c, content: $q }) { stage { executions { id } } } }",
                json!({ "c": chat, "q": question }),
            )
            .await;
        d["postChatMessage"]["stage"]["executions"][0]["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// Records a finished event of `kind` with `content` in an execution.
    async fn event(&self, execution: &str, kind: &str, content: &str) {
        self.ok(
            "mutation ($e: ID!, $k: TimelineEventType!, $c: String!) { createTimelineEvent(input: { executionId: $e, eventType: $k, status: COMPLETED, content: $c }) { id } }",
            json!({ "e": execution, "k": kind, "c": content }),
        )
        .await;
    }

    async fn finish(&self, execution: &str, status: &str) {
        let error = (status != "COMPLETED").then_some("the model was unavailable");
        self.ok(
            "mutation ($e: ID!, $s: ExecutionOutcome!, $m: String) { finishAgentExecution(input: { id: $e, status: $s, errorMessage: $m }) { status } }",
            json!({ "e": execution, "s": status, "m": error }),
        )
        .await;
    }

    /// The caller's chat list (ids) with `args`, and its page info and total.
    async fn list(&self, args: &str) -> (Vec<String>, Value, i64) {
        let d = self
            .ok(
                &format!(
                    "{{ chats{args} {{ edges {{ cursor node {{ id }} }} pageInfo {{ hasPreviousPage hasNextPage startCursor endCursor }} totalCount }} }}"
                ),
                json!({}),
            )
            .await;
        let ids = d["chats"]["edges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["node"]["id"].as_str().unwrap().to_owned())
            .collect();
        (
            ids,
            d["chats"]["pageInfo"].clone(),
            d["chats"]["totalCount"].as_i64().unwrap(),
        )
    }
}

fn instant(value: &Value) -> DateTime<Utc> {
    value.as_str().unwrap().parse().unwrap()
}

fn tokens_mode() -> HttpOptions {
    HttpOptions {
        auth: AuthOptions {
            mode: AuthMode::Tokens,
            ..AuthOptions::default()
        },
        ..HttpOptions::default()
    }
}

const FINISH_SESSION: &str = "mutation ($id: ID!) { startSession(id: $id) { status }
    completeSession(input: { id: $id }) { status } }";

const CHAT: &str = "query ($c: ID!) { node(id: $c) { ... on Chat { title status createdBy updatedAt
    messages { content answering answer { eventType content } stage { status } } } } }";

#[tokio::test]
async fn people_list_their_own_chats_by_latest_activity_and_see_each_answer() {
    let app = TestApp::start_with(tokens_mode()).await;
    let agent = Caller::new(&app, "agent", Role::Writer).await;
    let alice = Caller::new(&app, "alice", Role::Operator).await;
    let bob = Caller::new(&app, "bob", Role::Operator).await;
    let admin = Caller::new(&app, "carol", Role::Admin).await;
    let first_session = agent.finished_session().await;
    let second_session = agent.finished_session().await;

    let rollback = alice
        .open(&first_session, Some("Can we roll back checkout?"))
        .await;
    let untitled = alice.open(&second_session, None).await;
    let bobs = bob.open(&first_session, Some("Bob's")).await;

    // Newest activity first; a chat with no question yet is NEW.
    assert_eq!(
        alice.list("").await.0,
        [untitled.as_str(), rollback.as_str()]
    );
    let d = alice.ok(CHAT, json!({ "c": rollback })).await;
    assert_eq!(d["node"]["title"], "Can we roll back checkout?");
    assert_eq!(d["node"]["status"], "NEW");
    assert_eq!(d["node"]["createdBy"], "token:alice");
    let opened_at = instant(&d["node"]["updatedAt"]);

    // A question moves its chat to the top, and is being answered until its stage ends.
    let answering = alice
        .ask(&rollback, "Is 2.13.4 safe to roll back to?")
        .await;
    let (ids, _, total) = alice.list("").await;
    assert_eq!((ids, total), (vec![rollback.clone(), untitled.clone()], 2));
    let d = alice.ok(CHAT, json!({ "c": rollback })).await;
    assert_eq!(d["node"]["status"], "ANSWERING");
    let asked_at = instant(&d["node"]["updatedAt"]);
    assert!(asked_at > opened_at, "{asked_at} after {opened_at}");
    assert_eq!(
        d["node"]["messages"][0],
        json!({ "content": "Is 2.13.4 safe to roll back to?", "answering": true,
                "answer": null, "stage": { "status": "PENDING" } })
    );

    // The answer is the stage's last response, once the stage completes.
    agent
        .event(&answering, "LLM_RESPONSE", "Let me read the manifests.")
        .await;
    agent
        .event(&answering, "LLM_TOOL_CALL", "get_application_manifests")
        .await;
    let d = alice.ok(CHAT, json!({ "c": rollback })).await;
    assert_eq!(d["node"]["messages"][0]["answer"], Value::Null, "{d}");
    agent
        .event(
            &answering,
            "LLM_RESPONSE",
            "Yes: 2.13.4 still sets the URL.",
        )
        .await;
    agent.finish(&answering, "COMPLETED").await;
    let d = alice.ok(CHAT, json!({ "c": rollback })).await;
    assert_eq!(d["node"]["status"], "ANSWERED");
    assert_eq!(
        d["node"]["messages"][0],
        json!({ "content": "Is 2.13.4 safe to roll back to?", "answering": false,
                "answer": { "eventType": "LLM_RESPONSE", "content": "Yes: 2.13.4 still sets the URL." },
                "stage": { "status": "COMPLETED" } })
    );
    let answered_at = instant(&d["node"]["updatedAt"]);
    assert!(answered_at > asked_at, "the answer's end is activity");

    // An answer that fails leaves the question without one, and the chat FAILED; a final
    // analysis counts as a response.
    let failing = alice.ask(&untitled, "Why the disk?").await;
    agent
        .event(&failing, "FINAL_ANALYSIS", "Half an answer")
        .await;
    agent.finish(&failing, "FAILED").await;
    let d = alice.ok(CHAT, json!({ "c": untitled })).await;
    assert_eq!(d["node"]["status"], "FAILED");
    assert_eq!(
        d["node"]["messages"][0]["answer"],
        Value::Null,
        "a failed stage has no answer"
    );
    assert_eq!(
        alice.list("").await.0,
        [untitled.as_str(), rollback.as_str()]
    );
    let retried = alice.ask(&untitled, "Why the disk, again?").await;
    agent
        .event(&retried, "FINAL_ANALYSIS", "The log volume filled up.")
        .await;
    agent.finish(&retried, "COMPLETED").await;
    let d = alice.ok(CHAT, json!({ "c": untitled })).await;
    assert_eq!(d["node"]["status"], "ANSWERED");
    assert_eq!(
        d["node"]["messages"][1]["answer"]["content"],
        "The log volume filled up."
    );

    // Pages, either way.
    let (page, info, total) = alice.list("(first: 1)").await;
    assert_eq!((page, total), (vec![untitled.clone()], 2));
    assert_eq!(
        (&info["hasPreviousPage"], &info["hasNextPage"]),
        (&json!(false), &json!(true))
    );
    let after = info["endCursor"].as_str().unwrap();
    let (page, info, _) = alice.list(&format!("(first: 5, after: \"{after}\")")).await;
    assert_eq!(page, [rollback.as_str()]);
    assert_eq!(
        (&info["hasPreviousPage"], &info["hasNextPage"]),
        (&json!(true), &json!(false))
    );
    let (page, info, _) = alice.list("(last: 1)").await;
    assert_eq!(page, [rollback.as_str()]);
    assert_eq!(info["hasPreviousPage"], true);
    let before = info["startCursor"].as_str().unwrap();
    let (page, info, _) = alice
        .list(&format!("(last: 5, before: \"{before}\")"))
        .await;
    assert_eq!(page, [untitled.as_str()]);
    assert_eq!(
        (&info["hasPreviousPage"], &info["hasNextPage"]),
        (&json!(false), &json!(true))
    );
    // A cursor of a session's chats (ordered by creation) is not one of this list.
    let d = alice
        .ok(
            "query ($s: ID!) { session(id: $s) { chatsConnection(first: 1) { edges { cursor } } } }",
            json!({ "s": first_session }),
        )
        .await;
    let foreign = d["session"]["chatsConnection"]["edges"][0]["cursor"]
        .as_str()
        .unwrap();
    let query = format!("{{ chats(after: \"{foreign}\") {{ totalCount }} }}");
    assert_eq!(alice.refused(&query, json!({})).await, "BAD_USER_INPUT");

    // Each person sees their own; only an admin sees anyone's.
    assert_eq!(bob.list("").await.0, [bobs.as_str()]);
    assert_eq!(
        bob.list("(owner: ANYONE, createdBy: \"token:bob\")")
            .await
            .0,
        [bobs.as_str()]
    );
    for args in ["owner: ANYONE", "owner: ANYONE, createdBy: \"token:alice\""] {
        let query = format!("{{ chats({args}) {{ totalCount }} }}");
        assert_eq!(bob.refused(&query, json!({})).await, "FORBIDDEN", "{args}");
    }
    let (everyone, _, total) = admin.list("(owner: ANYONE)").await;
    assert_eq!((everyone.len(), total), (3, 3));
    assert_eq!(
        everyone[2], bobs,
        "bob's has had no activity since it opened"
    );
    let (alices, _, _) = admin
        .list("(owner: ANYONE, createdBy: \"token:alice\")")
        .await;
    assert_eq!(alices, [untitled.as_str(), rollback.as_str()]);
    assert_eq!(
        admin.list("").await.1["hasNextPage"],
        false,
        "an admin's own list holds only their own (none)"
    );
    assert_eq!(admin.list("").await.2, 0);
    let query = "{ chats(owner: ME, createdBy: \"token:bob\") { totalCount } }";
    assert_eq!(alice.refused(query, json!({})).await, "BAD_USER_INPUT");
    let query = "{ chats(after: \"bm90IGEgY3Vyc29y\") { totalCount } }";
    assert_eq!(alice.refused(query, json!({})).await, "BAD_USER_INPUT");

    // A deleted session's chats leave the list unless asked for.
    admin
        .ok(
            "mutation ($id: ID!) { deleteSession(id: $id) { deletedAt } }",
            json!({ "id": second_session }),
        )
        .await;
    assert_eq!(alice.list("").await.0, [rollback.as_str()]);
    assert_eq!(
        alice.list("(includeDeleted: true)").await.0,
        [untitled.as_str(), rollback.as_str()]
    );
    app.stop().await;
}

#[tokio::test]
async fn only_a_chats_owner_or_an_admin_renames_it_and_a_rename_is_not_activity() {
    let app = TestApp::start_with(tokens_mode()).await;
    let agent = Caller::new(&app, "agent", Role::Writer).await;
    let alice = Caller::new(&app, "alice", Role::Operator).await;
    let bob = Caller::new(&app, "bob", Role::Operator).await;
    let admin = Caller::new(&app, "carol", Role::Admin).await;
    let session = agent.finished_session().await;
    let chat = alice.open(&session, None).await;
    let rename = "mutation ($c: ID!, $t: String) { renameChat(input: { id: $c, title: $t }) { title updatedAt } }";
    let before = alice.ok(CHAT, json!({ "c": chat })).await["node"]["updatedAt"].clone();

    let d = alice
        .ok(rename, json!({ "c": chat, "t": "Disk pressure on db-2" }))
        .await;
    assert_eq!(
        d["renameChat"],
        json!({ "title": "Disk pressure on db-2", "updatedAt": before })
    );
    let longest = "é".repeat(200);
    let d = alice.ok(rename, json!({ "c": chat, "t": longest })).await;
    assert_eq!(d["renameChat"]["title"], longest.as_str());

    for (title, why) in [
        (json!(""), "empty"),
        (json!("   "), "only whitespace"),
        (json!("é".repeat(201)), "201 characters"),
        (json!("nul\u{0}"), "a NUL character"),
    ] {
        let code = alice
            .refused(rename, json!({ "c": chat, "t": title }))
            .await;
        assert_eq!(code, "BAD_USER_INPUT", "{why}");
    }
    let code = alice
        .refused(
            "mutation ($s: ID!) { openChat(input: { sessionId: $s, title: \"\" }) { id } }",
            json!({ "s": session }),
        )
        .await;
    assert_eq!(code, "BAD_USER_INPUT", "an empty title when opening");
    assert_eq!(
        bob.refused(rename, json!({ "c": chat, "t": "mine now" }))
            .await,
        "FORBIDDEN"
    );
    // "Chat:019a0000-0000-7000-8000-000000000000"
    let missing = "Q2hhdDowMTlhMDAwMC0wMDAwLTcwMDAtODAwMC0wMDAwMDAwMDAwMDA=";
    let code = alice
        .refused(rename, json!({ "c": missing, "t": "x" }))
        .await;
    assert_eq!(code, "NOT_FOUND");
    let reader = Caller::new(&app, "dora", Role::Reader).await;
    assert_eq!(
        reader.refused(rename, json!({ "c": chat, "t": "x" })).await,
        "FORBIDDEN"
    );
    let d = alice.ok(CHAT, json!({ "c": chat })).await;
    assert_eq!(
        d["node"]["title"],
        longest.as_str(),
        "refusals changed nothing"
    );

    let d = admin.ok(rename, json!({ "c": chat, "t": null })).await;
    assert_eq!(
        d["renameChat"],
        json!({ "title": null, "updatedAt": before })
    );
    // A deleted session's chat takes no rename, as it takes no question.
    admin
        .ok(
            "mutation ($id: ID!) { deleteSession(id: $id) { deletedAt } }",
            json!({ "id": session }),
        )
        .await;
    assert_eq!(
        alice
            .refused(rename, json!({ "c": chat, "t": "too late" }))
            .await,
        "CONFLICT"
    );
    app.stop().await;
}

#[tokio::test]
async fn without_authentication_chats_are_listed_by_who_opened_them() {
    let app = TestApp::start().await;
    let d = app
        .data(
            "mutation { createSession(input: { alertType: \"Disk\", chainId: \"c\" }) { uuid } }",
            json!({}),
        )
        .await;
    let session = d["createSession"]["uuid"].as_str().unwrap().to_owned();
    app.data(FINISH_SESSION, json!({ "id": session })).await;
    for who in ["alice", "bob"] {
        app.data(
            "mutation ($s: ID!, $w: String) { openChat(input: { sessionId: $s, createdBy: $w, title: $w }) { id } }",
            json!({ "s": session, "w": who }),
        )
        .await;
    }
    let (code, message) = app.error("{ chats { totalCount } }", json!({})).await;
    assert_eq!(code, "BAD_USER_INPUT");
    assert!(message.contains("owner: ANYONE"), "{message}");
    let d = app
        .data(
            "{ all: chats(owner: ANYONE) { totalCount edges { node { title } } }
               alice: chats(owner: ANYONE, createdBy: \"alice\") { edges { node { title createdBy } } } }",
            json!({}),
        )
        .await;
    assert_eq!(d["all"]["totalCount"], 2);
    assert_eq!(d["all"]["edges"][0]["node"]["title"], "bob", "newest first");
    assert_eq!(
        d["alice"]["edges"],
        json!([{ "node": { "title": "alice", "createdBy": "alice" } }])
    );
    app.stop().await;
}

#[tokio::test]
async fn a_persons_chat_list_reads_its_index_at_volume() {
    let app = TestApp::start().await;
    let mut conn = app.store.pool().acquire().await.unwrap();
    sqlx::query("SET session_replication_role = replica")
        .execute(&mut *conn)
        .await
        .unwrap();
    for statement in [
        "INSERT INTO sessions (id, alert_type, chain_id, created_at) \
         SELECT gen_random_uuid(), 'Disk', 'k8s', now() - make_interval(secs => n) \
         FROM generate_series(1, 5000) n",
        // 20,000 chats of 500 people.
        "INSERT INTO chats (id, session_id, created_by, created_at, updated_at) \
         SELECT gen_random_uuid(), s.id, 'person-' || (random() * 500)::int, now(), \
             now() - make_interval(secs => (random() * 1e6)::int) \
         FROM sessions s, generate_series(1, 4)",
        "RESET session_replication_role",
        "ANALYZE sessions, chats",
    ] {
        sqlx::query(statement).execute(&mut *conn).await.unwrap();
    }
    drop(conn);
    let slice = Slice {
        after: None,
        before: None,
        size: 20,
        from_end: false,
    };
    let filter = ChatListFilter {
        created_by: Some("person-7".to_owned()),
        include_deleted: false,
    };
    let plan = app.store.explain_chat_list(&filter, &slice).await.unwrap();
    assert!(plan.contains("chats_owner_activity_idx"), "{plan}");
    assert!(!plan.contains("Seq Scan on chats"), "{plan}");
    let everyone = ChatListFilter::default();
    let plan = app
        .store
        .explain_chat_list(&everyone, &slice)
        .await
        .unwrap();
    assert!(plan.contains("chats_activity_idx"), "{plan}");
    assert!(!plan.contains("Seq Scan on chats"), "{plan}");
    let page = app.store.list_chats(&filter, &slice).await.unwrap();
    let count = app.store.count_chats(&filter).await.unwrap();
    assert_eq!(page.rows.len() as i64, count.min(20));
    assert!(
        page.rows
            .windows(2)
            .all(|w| (w[0].updated_at, w[0].id) > (w[1].updated_at, w[1].id)),
        "most recent first"
    );
    app.stop().await;
}

const QUESTIONS: &str =
    "query ($c: ID!, $first: Int, $after: String, $last: Int, $before: String) {
    node(id: $c) { ... on Chat { questionCount
      questionsConnection(first: $first, after: $after, last: $last, before: $before) {
        totalCount edges { cursor node { content } }
        pageInfo { hasPreviousPage hasNextPage startCursor endCursor } } } } }";

/// The contents of a page of a chat's questions, and the page.
fn questions(data: &Value) -> (Vec<String>, Value) {
    let page = data["node"]["questionsConnection"].clone();
    let contents = page["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["node"]["content"].as_str().unwrap().to_owned())
        .collect();
    (contents, page)
}

#[tokio::test]
async fn a_chats_questions_page_oldest_first_and_are_counted() {
    let app = TestApp::start_with(tokens_mode()).await;
    let agent = Caller::new(&app, "agent", Role::Writer).await;
    let alice = Caller::new(&app, "alice", Role::Operator).await;
    let session = agent.finished_session().await;
    let chat = alice.open(&session, Some("Disk")).await;
    let quiet = alice.open(&session, None).await;
    for question in ["one?", "two?", "three?"] {
        let answering = alice.ask(&chat, question).await;
        agent.finish(&answering, "COMPLETED").await;
    }

    let d = alice.ok(QUESTIONS, json!({ "c": chat, "first": 2 })).await;
    assert_eq!(d["node"]["questionCount"], 3);
    let (page, info) = questions(&d);
    assert_eq!(page, ["one?", "two?"]);
    assert_eq!(info["totalCount"], 3);
    assert_eq!(
        (
            &info["pageInfo"]["hasPreviousPage"],
            &info["pageInfo"]["hasNextPage"]
        ),
        (&json!(false), &json!(true))
    );
    let after = info["pageInfo"]["endCursor"].clone();
    let d = alice
        .ok(QUESTIONS, json!({ "c": chat, "first": 2, "after": after }))
        .await;
    let (page, info) = questions(&d);
    assert_eq!(page, ["three?"]);
    assert_eq!(info["pageInfo"]["hasNextPage"], false);
    assert_eq!(info["pageInfo"]["hasPreviousPage"], true);
    let d = alice.ok(QUESTIONS, json!({ "c": chat, "last": 1 })).await;
    let (page, info) = questions(&d);
    assert_eq!(page, ["three?"]);
    let before = info["pageInfo"]["startCursor"].clone();
    let d = alice
        .ok(QUESTIONS, json!({ "c": chat, "last": 5, "before": before }))
        .await;
    assert_eq!(questions(&d).0, ["one?", "two?"]);
    // A chat with none: an empty page, counted 0.
    let d = alice.ok(QUESTIONS, json!({ "c": quiet })).await;
    assert_eq!(d["node"]["questionCount"], 0);
    assert_eq!(questions(&d).1["totalCount"], 0);

    // Each list's cursors are its own.
    let d = alice
        .ok(
            "query ($s: ID!) { session(id: $s) { chatsConnection(first: 1) { pageInfo { endCursor } } } }",
            json!({ "s": session }),
        )
        .await;
    let chat_cursor = d["session"]["chatsConnection"]["pageInfo"]["endCursor"].clone();
    let body = alice
        .graphql(QUESTIONS, json!({ "c": chat, "after": chat_cursor }))
        .await;
    assert_eq!(body["errors"][0]["extensions"]["code"], "BAD_USER_INPUT");
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("not to a chat's questions"),
        "{body}"
    );
    let query = format!(
        "{{ session(id: \"{session}\") {{ chatsConnection(after: {after}) {{ totalCount }} }} }}"
    );
    assert_eq!(alice.refused(&query, json!({})).await, "BAD_USER_INPUT");

    // Counts of many chats in one query; the plain list is deprecated in favour of the
    // connection.
    let d = alice
        .ok(
            "{ chats { edges { node { title questionCount } } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        d["chats"]["edges"],
        json!([{ "node": { "title": "Disk", "questionCount": 3 } },
               { "node": { "title": null, "questionCount": 0 } }])
    );
    let d = alice
        .ok(
            "{ __type(name: \"Chat\") { fields(includeDeprecated: true) { name isDeprecated deprecationReason } } }",
            json!({}),
        )
        .await;
    let messages = d["__type"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "messages")
        .unwrap()
        .clone();
    assert_eq!(messages["isDeprecated"], true);
    assert!(
        messages["deprecationReason"]
            .as_str()
            .unwrap()
            .contains("questionsConnection"),
        "{messages}"
    );
    app.stop().await;
}

const DELETE: &str = "mutation ($c: ID!, $r: String) { deleteChat(input: { id: $c, reason: $r }) { deletedAt deletedBy } }";
const RESTORE: &str =
    "mutation ($c: ID!) { restoreChat(input: { id: $c }) { deletedAt deletedBy } }";

impl Caller<'_> {
    /// The ids of a session's chats (with `args`), and their total.
    async fn session_chats(&self, session: &str, args: &str) -> (Vec<String>, i64) {
        let d = self
            .ok(
                &format!(
                    "query ($s: ID!) {{ session(id: $s) {{ chatsConnection{args} {{ totalCount edges {{ node {{ id }} }} }} }} }}"
                ),
                json!({ "s": session }),
            )
            .await;
        let page = &d["session"]["chatsConnection"];
        let ids = page["edges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["node"]["id"].as_str().unwrap().to_owned())
            .collect();
        (ids, page["totalCount"].as_i64().unwrap())
    }

    /// The session's `chat` events: (action, the chat's id).
    async fn chat_events(&self, session: &str) -> Vec<(String, String)> {
        let d = self
            .ok(
                "query ($s: ID!) { session(id: $s) { eventsConnection(first: 100, filter: { categories: [CHAT] }) {
                   edges { node { action data { __typename
                     ... on ChatOpened { chat { id } }
                     ... on ChatQuestion { question { chat { id } } }
                     ... on ChatDeletion { chat { id } } } } } } } }",
                json!({ "s": session }),
            )
            .await;
        d["session"]["eventsConnection"]["edges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let data = &e["node"]["data"];
                let chat = match data["__typename"].as_str().unwrap() {
                    "ChatQuestion" => &data["question"]["chat"]["id"],
                    _ => &data["chat"]["id"],
                };
                (
                    e["node"]["action"].as_str().unwrap().to_owned(),
                    chat.as_str().unwrap().to_owned(),
                )
            })
            .collect()
    }
}

#[tokio::test]
async fn an_owner_or_an_admin_deletes_and_restores_a_chat_which_lists_then_leave_out() {
    let app = TestApp::start_with(tokens_mode()).await;
    let agent = Caller::new(&app, "agent", Role::Writer).await;
    let alice = Caller::new(&app, "alice", Role::Operator).await;
    let bob = Caller::new(&app, "bob", Role::Operator).await;
    let admin = Caller::new(&app, "carol", Role::Admin).await;
    let reader = Caller::new(&app, "dora", Role::Reader).await;
    let session = agent.finished_session().await;
    let doomed = alice.open(&session, Some("Doomed")).await;
    let kept = alice.open(&session, Some("Kept")).await;
    let bobs = bob.open(&session, Some("Bob's")).await;
    let answering = alice.ask(&doomed, "Why?").await;
    agent.finish(&answering, "COMPLETED").await;

    // Only its owner or an admin; an operator not even in another's chat.
    assert_eq!(
        bob.refused(DELETE, json!({ "c": doomed })).await,
        "FORBIDDEN"
    );
    assert_eq!(
        reader.refused(DELETE, json!({ "c": doomed })).await,
        "FORBIDDEN"
    );
    let missing = "Q2hhdDowMTlhMDAwMC0wMDAwLTcwMDAtODAwMC0wMDAwMDAwMDAwMDA=";
    assert_eq!(
        alice.refused(DELETE, json!({ "c": missing })).await,
        "NOT_FOUND"
    );
    assert_eq!(alice.list("").await.0.len(), 2, "refusals changed nothing");

    let d = alice
        .ok(
            DELETE,
            json!({ "c": doomed, "r": "asked in the wrong chat" }),
        )
        .await;
    let deleted_at = d["deleteChat"]["deletedAt"].clone();
    assert!(deleted_at.is_string(), "{d}");
    assert_eq!(d["deleteChat"]["deletedBy"], "token:alice");
    // Again: nothing changes (as `deleteSession`).
    let d = alice.ok(DELETE, json!({ "c": doomed })).await;
    assert_eq!(d["deleteChat"]["deletedAt"], deleted_at);

    // Lists leave it out, items and totals, unless asked for; by id it is still there.
    let (ids, _, total) = alice.list("").await;
    assert_eq!((ids, total), (vec![kept.clone()], 1));
    let (ids, _, total) = alice.list("(includeDeleted: true)").await;
    assert_eq!((ids, total), (vec![doomed.clone(), kept.clone()], 2));
    assert_eq!(admin.list("(owner: ANYONE)").await.2, 2);
    assert_eq!(
        admin.list("(owner: ANYONE, includeDeleted: true)").await.2,
        3
    );
    assert_eq!(
        reader.session_chats(&session, "").await,
        (vec![kept.clone(), bobs.clone()], 2)
    );
    assert_eq!(
        reader
            .session_chats(&session, "(includeDeleted: true)")
            .await,
        (vec![doomed.clone(), kept.clone(), bobs.clone()], 3)
    );
    let d = reader.ok(CHAT, json!({ "c": doomed })).await;
    assert_eq!(d["node"]["title"], "Doomed");
    let d = reader
        .ok(
            "query ($c: ID!) { node(id: $c) { ... on Chat { deletedAt deletedBy questionCount } } }",
            json!({ "c": doomed }),
        )
        .await;
    assert_eq!(
        d["node"],
        json!({ "deletedAt": deleted_at, "deletedBy": "token:alice", "questionCount": 1 })
    );

    // It takes no question and no rename until restored.
    let post =
        "mutation ($c: ID!) { postChatMessage(input: { chatId: $c, content: \"Again?\" }) { id } }";
    let body = alice.graphql(post, json!({ "c": doomed })).await;
    assert_eq!(
        body["errors"][0]["extensions"]["code"], "CONFLICT",
        "{body}"
    );
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("is deleted; restore it first"),
        "{body}"
    );
    assert_eq!(
        admin.refused(post, json!({ "c": doomed })).await,
        "CONFLICT"
    );
    let rename = "mutation ($c: ID!) { renameChat(input: { id: $c, title: \"New\" }) { title } }";
    assert_eq!(
        alice.refused(rename, json!({ "c": doomed })).await,
        "CONFLICT"
    );
    assert_eq!(
        alice.ok(QUESTIONS, json!({ "c": doomed })).await["node"]["questionCount"],
        1,
        "the refused question was not stored"
    );

    // Restored by an admin: listed again, and open to questions; a restore of a live chat
    // changes nothing.
    assert_eq!(
        bob.refused(RESTORE, json!({ "c": doomed })).await,
        "FORBIDDEN"
    );
    let d = admin.ok(RESTORE, json!({ "c": doomed })).await;
    assert_eq!(
        d["restoreChat"],
        json!({ "deletedAt": null, "deletedBy": null })
    );
    let d = admin.ok(RESTORE, json!({ "c": doomed })).await;
    assert_eq!(d["restoreChat"]["deletedAt"], Value::Null);
    assert_eq!(alice.list("").await.2, 2);
    alice.ask(&doomed, "Again?").await;

    // Both are in the session's audit trail (the reason with the delete) and its event log.
    let d = admin
        .ok(
            "query ($s: ID!) { session(id: $s) { auditLog(first: 100) { edges { node {
               action actor targetType changes { field before after } } } } } }",
            json!({ "s": session }),
        )
        .await;
    let records: Vec<Value> = d["session"]["auditLog"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["node"].clone())
        .filter(|r| r["action"] == "deleteChat" || r["action"] == "restoreChat")
        .collect();
    assert_eq!(
        records.len(),
        2,
        "one each, none for the repeats: {records:#?}"
    );
    let field = |record: &Value, name: &str| -> Value {
        record["changes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["field"] == name)
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(
        (
            &records[0]["action"],
            &records[0]["actor"],
            &records[0]["targetType"]
        ),
        (&json!("deleteChat"), &json!("token:alice"), &json!("Chat"))
    );
    assert_eq!(field(&records[0], "deletedAt")["before"], Value::Null);
    assert_eq!(
        field(&records[0], "deletedBy"),
        json!({ "field": "deletedBy", "before": null, "after": "token:alice" })
    );
    assert_eq!(
        field(&records[0], "reason")["after"],
        "asked in the wrong chat"
    );
    assert_eq!(records[1]["actor"], "token:carol");
    assert_eq!(field(&records[1], "deletedBy")["after"], Value::Null);
    assert_eq!(field(&records[1], "reason"), Value::Null, "none given");
    let events = reader.chat_events(&session).await;
    let of_doomed: Vec<&str> = events
        .iter()
        .filter(|(_, chat)| *chat == doomed)
        .map(|(action, _)| action.as_str())
        .collect();
    assert_eq!(
        of_doomed,
        ["OPENED", "QUESTION", "DELETED", "RESTORED", "QUESTION"]
    );

    // A deleted session's chats take neither.
    admin
        .ok(
            "mutation ($id: ID!) { deleteSession(id: $id) { deletedAt } }",
            json!({ "id": session }),
        )
        .await;
    assert_eq!(
        alice.refused(DELETE, json!({ "c": kept })).await,
        "CONFLICT"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_chat_is_read_wherever_its_session_is_and_nowhere_else() {
    let app = TestApp::start_with(tokens_mode()).await;
    let agent = Caller::new(&app, "agent", Role::Writer).await;
    let alice = Caller::new(&app, "alice", Role::Operator).await;
    let admin = Caller::new(&app, "carol", Role::Admin).await;
    let reader = Caller::new(&app, "dora", Role::Reader).await;
    let shared = agent.finished_session().await;
    let other = agent.finished_session().await;
    let shared_chat = alice.open(&shared, Some("Shared")).await;
    let other_chat = alice.open(&other, Some("Other")).await;
    let question_of = |chat: String| {
        let alice = &alice;
        async move {
            let d = alice
                .ok(
                    "mutation ($c: ID!) { postChatMessage(input: { chatId: $c, content: \"Why?\" }) { id } }",
                    json!({ "c": chat }),
                )
                .await;
            d["postChatMessage"]["id"].as_str().unwrap().to_owned()
        }
    };
    let shared_question = question_of(shared_chat.clone()).await;
    let other_question = question_of(other_chat.clone()).await;
    alice.ok(DELETE, json!({ "c": other_chat })).await;

    // Not only its owner: whoever reads the session reads the chat, its questions and answers.
    let read = "query ($c: ID!) { node(id: $c) { ... on Chat { title createdBy
        questionsConnection { edges { node { content stage { status } } } } } } }";
    let d = reader.ok(read, json!({ "c": shared_chat })).await;
    assert_eq!(d["node"]["createdBy"], "token:alice");
    assert_eq!(
        d["node"]["questionsConnection"]["edges"][0]["node"]["content"],
        "Why?"
    );

    // A share link reads its own session's chats, and no other's, by any path.
    let d = alice
        .ok(
            "mutation ($s: ID!) { createShareLink(sessionId: $s, expiresIn: \"1h\") { secret } }",
            json!({ "s": shared }),
        )
        .await;
    let link = Caller {
        app: &app,
        secret: d["createShareLink"]["secret"].as_str().unwrap().to_owned(),
    };
    let d = link.ok(read, json!({ "c": shared_chat })).await;
    assert_eq!(d["node"]["title"], "Shared");
    let node = "query ($id: ID!) { node(id: $id) { id } }";
    let d = link.ok(node, json!({ "id": shared_question })).await;
    assert_eq!(d["node"]["id"], shared_question.as_str());
    assert_eq!(link.session_chats(&shared, "").await.1, 1);
    for (id, what) in [(&other_chat, "chat"), (&other_question, "question")] {
        assert_eq!(
            link.refused(node, json!({ "id": id })).await,
            "FORBIDDEN",
            "another session's {what}"
        );
    }
    let nodes = "query ($ids: [ID!]!) { nodes(ids: $ids) { id } }";
    assert_eq!(
        link.refused(nodes, json!({ "ids": [shared_chat, other_chat] }))
            .await,
        "FORBIDDEN"
    );
    let chats_of_other = "query ($s: ID!) { session(id: $s) { chatsConnection(includeDeleted: true) { totalCount } } }";
    assert_eq!(
        link.refused(chats_of_other, json!({ "s": other })).await,
        "FORBIDDEN"
    );
    assert_eq!(
        link.refused("{ chats(owner: ANYONE) { totalCount } }", json!({}))
            .await,
        "FORBIDDEN"
    );

    // Each session's event log carries its own chats' events alone.
    let events = reader.chat_events(&shared).await;
    assert!(!events.is_empty());
    assert!(
        events.iter().all(|(_, chat)| *chat == shared_chat),
        "{events:?}"
    );
    let events = reader.chat_events(&other).await;
    assert_eq!(
        events
            .iter()
            .map(|(action, _)| action.as_str())
            .collect::<Vec<_>>(),
        ["OPENED", "QUESTION", "DELETED"]
    );
    assert!(events.iter().all(|(_, chat)| *chat == other_chat));

    // Everyone's list: a deleted session's chats only with `includeDeleted`, as deleted chats.
    admin
        .ok(
            "mutation ($id: ID!) { restoreChat(input: { id: $id }) { id } deleteSession(id: $s) { id } }"
                .replace("$id: ID!", "$id: ID!, $s: ID!")
                .as_str(),
            json!({ "id": other_chat, "s": other }),
        )
        .await;
    assert_eq!(
        admin.list("(owner: ANYONE)").await.0,
        [shared_chat.as_str()]
    );
    let (ids, _, total) = admin.list("(owner: ANYONE, includeDeleted: true)").await;
    assert_eq!(total, 2);
    assert!(ids.contains(&other_chat));
    app.stop().await;
}
