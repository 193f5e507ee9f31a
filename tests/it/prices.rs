//! Costs from the price list (seed 000's Q8): each interaction priced as of its time, kept with
//! the price it used; a client's cost kept as sent; a model without a price says so; the sums
//! split into input and output; `casefile prices import`.

use casefile::api::ids::{NodeType, encode};
use casefile::auth::{AuthMode, AuthOptions};
use casefile::http::HttpOptions;
use casefile::model::Role;
use serde_json::{Value, json};

use crate::common::cli::{DataDir, casefile, stdout};
use crate::common::{TestApp, process, statements};
use crate::write_api::Agent;

const SET_PRICE: &str = "mutation ($i: SetModelPriceInput!) { setModelPrice(input: $i) {
    model provider effectiveFrom inputPerMillionUsd outputPerMillionUsd cachedInputPerMillionUsd
    thinkingPerMillionUsd createdBy } }";

const INTERACTION: &str = "id uuid createdAt costSource inputCostUsd outputCostUsd totalCostUsd
    estimatedCostUsd cachedInputTokens pricingSnapshot { model provider effectiveFrom
    inputPerMillionUsd outputPerMillionUsd cachedInputPerMillionUsd thinkingPerMillionUsd }";

const USAGE: &str = "inputTokens cachedInputTokens outputTokens thinkingTokens totalCostUsd
    inputCostUsd outputCostUsd unsplitCostUsd estimatedCostUsd llmInteractionCount
    unpricedLlmInteractionCount";

async fn set_price(app: &TestApp, input: Value) -> Value {
    app.data(SET_PRICE, json!({ "i": input })).await["setModelPrice"].clone()
}

/// A running execution of an agent configured with `provider`, in a new session.
async fn execution(app: &TestApp, provider: Option<&str>) -> (String, String) {
    let a = Agent { app };
    let session = a.session().await;
    let stage = a.stage(&session, 0, 1, None).await;
    let d = app
        .data(
            "mutation ($s: ID!, $p: String) { createAgentExecution(input: { stageId: $s,
               agentIndex: 1, agentName: \"A\", iterationStrategy: \"react\", llmProvider: $p }) { uuid } }",
            json!({ "s": stage, "p": provider }),
        )
        .await;
    let execution = d["createAgentExecution"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    (session, execution)
}

/// Records an LLM interaction of `model` under `execution` with the fields of `input`.
async fn record(app: &TestApp, execution: &str, model: &str, input: Value) -> Value {
    let mut fields =
        json!({ "executionId": execution, "interactionType": "ITERATION", "modelName": model });
    fields
        .as_object_mut()
        .unwrap()
        .extend(input.as_object().unwrap().clone());
    let query = format!(
        "mutation ($i: RecordLLMInteractionInput!) {{ recordLLMInteraction(input: $i) {{ {INTERACTION} }} }}"
    );
    app.data(&query, json!({ "i": fields })).await["recordLLMInteraction"].clone()
}

async fn refused(app: &TestApp, execution: &str, input: Value) -> (String, String) {
    let mut fields =
        json!({ "executionId": execution, "interactionType": "ITERATION", "modelName": "m" });
    fields
        .as_object_mut()
        .unwrap()
        .extend(input.as_object().unwrap().clone());
    app.error(
        "mutation ($i: RecordLLMInteractionInput!) { recordLLMInteraction(input: $i) { uuid } }",
        json!({ "i": fields }),
    )
    .await
}

async fn session_usage(app: &TestApp, session: &str) -> Value {
    let query = format!("query ($id: ID!) {{ session(id: $id) {{ tokenUsage {{ {USAGE} }} }} }}");
    app.data(&query, json!({ "id": session })).await["session"]["tokenUsage"].clone()
}

/// The usage of every session, grouped by model, from the roll-ups.
async fn usage_by_model(app: &TestApp) -> Vec<Value> {
    let d = app
        .data(
            "{ sessionStats { usage(by: [MODEL]) { nodes { key { model } llmCalls unpricedLlmCalls
               inputTokens cachedInputTokens outputTokens totalCostUsd inputCostUsd outputCostUsd
               unsplitCostUsd estimatedCostUsd } } } }",
            json!({}),
        )
        .await;
    d["sessionStats"]["usage"]["nodes"]
        .as_array()
        .unwrap()
        .clone()
}

fn counts() -> Value {
    // 10,000 input tokens of which 4,000 cached; 3,000 output of which 2,000 thinking.
    json!({ "inputTokens": 10000, "cachedInputTokens": 4000, "outputTokens": 3000, "thinkingTokens": 2000 })
}

#[tokio::test]
async fn each_interaction_is_priced_as_of_its_time_and_keeps_that_price() {
    let app = TestApp::start().await;
    let first = set_price(
        &app,
        json!({ "model": "gemini-2.5-pro", "provider": "google", "effectiveFrom": "2026-01-01T00:00:00Z",
                "inputPerMillionUsd": "1.25", "outputPerMillionUsd": "10.00",
                "cachedInputPerMillionUsd": "0.3125" }),
    )
    .await;
    assert_eq!(
        first,
        json!({ "model": "gemini-2.5-pro", "provider": "google", "effectiveFrom": "2026-01-01T00:00:00+00:00",
                "inputPerMillionUsd": "1.25", "outputPerMillionUsd": "10",
                "cachedInputPerMillionUsd": "0.3125", "thinkingPerMillionUsd": null, "createdBy": null })
    );
    let (session, exec) = execution(&app, Some("google")).await;

    let before = record(&app, &exec, "gemini-2.5-pro", counts()).await;
    // 6,000 × 1.25 + 4,000 × 0.3125 micro-dollars in; 3,000 × 10 out (thinking at the output
    // price, the list setting none for it).
    assert_eq!(before["costSource"], "PRICE_LIST");
    assert_eq!(before["inputCostUsd"], "0.00875");
    assert_eq!(before["outputCostUsd"], "0.03");
    assert_eq!(before["totalCostUsd"], "0.03875");
    assert_eq!(before["estimatedCostUsd"], 0.03875);
    assert_eq!(before["cachedInputTokens"], 4000);
    assert_eq!(
        before["pricingSnapshot"],
        json!({ "model": "gemini-2.5-pro", "provider": "google", "effectiveFrom": "2026-01-01T00:00:00+00:00",
                "inputPerMillionUsd": "1.25", "outputPerMillionUsd": "10",
                "cachedInputPerMillionUsd": "0.3125", "thinkingPerMillionUsd": "10" })
    );

    // The price changes from now on (cached input now at the input price).
    let second = set_price(
        &app,
        json!({ "model": "gemini-2.5-pro", "provider": "google",
                "inputPerMillionUsd": "2.5", "outputPerMillionUsd": "15" }),
    )
    .await;
    let after = record(&app, &exec, "gemini-2.5-pro", counts()).await;
    assert_eq!(after["costSource"], "PRICE_LIST");
    assert_eq!(after["inputCostUsd"], "0.025");
    assert_eq!(after["outputCostUsd"], "0.045");
    assert_eq!(after["totalCostUsd"], "0.07");
    assert_eq!(
        after["pricingSnapshot"]["effectiveFrom"],
        second["effectiveFrom"]
    );

    // The first interaction kept its price.
    let reread = app
        .data(
            &format!("query ($id: ID!) {{ node(id: $id) {{ ... on LLMInteraction {{ {INTERACTION} }} }} }}"),
            json!({ "id": before["id"] }),
        )
        .await;
    assert_eq!(reread["node"], before);

    // A call recorded late, in a batch, is priced as of when it happened.
    let late = app
        .data(
            &format!(
                "mutation ($i: RecordLLMInteractionInput!) {{ ingest(operations: [{{ recordLLMInteraction: $i }}]) {{
                   ... on LLMInteraction {{ {INTERACTION} }} }} }}"
            ),
            json!({ "i": { "executionId": exec, "interactionType": "ITERATION", "modelName": "gemini-2.5-pro",
                           "calledAt": before["createdAt"], "inputTokens": 10000, "cachedInputTokens": 4000,
                           "outputTokens": 3000, "thinkingTokens": 2000 } }),
        )
        .await;
    let late = &late["ingest"][0];
    assert_eq!(late["createdAt"], before["createdAt"]);
    assert_eq!(late["totalCostUsd"], "0.03875");
    assert_eq!(late["pricingSnapshot"], before["pricingSnapshot"]);

    // The price list as it was, and as it is.
    let list = |at: Value| {
        let app = &app;
        async move {
            app.data(
                "query ($at: DateTime) { modelPrices(at: $at) { model inputPerMillionUsd } }",
                json!({ "at": at }),
            )
            .await["modelPrices"]
                .clone()
        }
    };
    assert_eq!(
        list(before["createdAt"].clone()).await,
        json!([{ "model": "gemini-2.5-pro", "inputPerMillionUsd": "1.25" }])
    );
    assert_eq!(
        list(Value::Null).await,
        json!([{ "model": "gemini-2.5-pro", "inputPerMillionUsd": "2.5" }])
    );
    assert_eq!(list(json!("2025-12-31T23:59:59Z")).await, json!([]));

    // The sums split input from output, exactly, from the interactions and from the roll-ups.
    let usage = session_usage(&app, &session).await;
    assert_eq!(
        usage,
        json!({ "inputTokens": 30000, "cachedInputTokens": 12000, "outputTokens": 9000,
                "thinkingTokens": 6000, "totalCostUsd": "0.1475", "inputCostUsd": "0.0425",
                "outputCostUsd": "0.105", "unsplitCostUsd": "0", "estimatedCostUsd": 0.1475,
                "llmInteractionCount": 3, "unpricedLlmInteractionCount": 0 })
    );
    assert_eq!(
        usage_by_model(&app).await,
        vec![
            json!({ "key": { "model": "gemini-2.5-pro" }, "llmCalls": 3, "unpricedLlmCalls": 0,
                     "inputTokens": 30000, "cachedInputTokens": 12000, "outputTokens": 9000,
                     "totalCostUsd": "0.1475", "inputCostUsd": "0.0425", "outputCostUsd": "0.105",
                     "unsplitCostUsd": "0", "estimatedCostUsd": 0.1475 })
        ]
    );
}

#[tokio::test]
async fn a_model_without_a_price_says_so_and_a_clients_cost_is_kept_as_sent() {
    let app = TestApp::start().await;
    let (session, exec) = execution(&app, Some("google")).await;
    let unpriced = record(&app, &exec, "no-such-model", counts()).await;
    assert_eq!(unpriced["costSource"], "NO_PRICE");
    assert_eq!(unpriced["totalCostUsd"], Value::Null);
    assert_eq!(unpriced["inputCostUsd"], Value::Null);
    assert_eq!(unpriced["pricingSnapshot"], Value::Null);

    set_price(
        &app,
        json!({ "model": "m", "inputPerMillionUsd": "1", "outputPerMillionUsd": "2" }),
    )
    .await;
    // Kept as sent even where a price exists, and never split.
    let sent = record(
        &app,
        &exec,
        "m",
        json!({ "inputTokens": 10, "outputTokens": 10, "totalCostUsd": "0.0123456789" }),
    )
    .await;
    assert_eq!(sent["costSource"], "CLIENT");
    assert_eq!(sent["totalCostUsd"], "0.0123456789");
    assert_eq!(sent["inputCostUsd"], Value::Null);
    assert_eq!(sent["pricingSnapshot"], Value::Null);
    // The deprecated float is read as the decimal it prints as.
    let float = record(&app, &exec, "m", json!({ "estimatedCostUsd": 0.1 })).await;
    assert_eq!(float["costSource"], "CLIENT");
    assert_eq!(float["totalCostUsd"], "0.1");
    let nothing = record(&app, &exec, "m", json!({})).await;
    assert_eq!(nothing["costSource"], "NO_TOKENS");
    assert_eq!(nothing["totalCostUsd"], Value::Null);

    // Rows from before prices existed, as an older casefile wrote them: a cost is the client's
    // and cannot be split; counts without one were never priced.
    let pool = app.db.db.pool();
    let (stage, execution_id): (uuid::Uuid, uuid::Uuid) =
        sqlx::query_as("SELECT stage_id, id FROM agent_executions WHERE session_id = $1::uuid")
            .bind(&session)
            .fetch_one(pool)
            .await
            .unwrap();
    let mut old = Vec::new();
    for cost in [Some("0.5"), None] {
        let id = uuid::Uuid::now_v7();
        sqlx::query(
            "INSERT INTO llm_interactions (id, session_id, stage_id, execution_id, \
             interaction_type, model_name, input_tokens, output_tokens, estimated_cost_usd) \
             VALUES ($1, $2::uuid, $3, $4, 'iteration', 'm', 100, 100, $5::numeric)",
        )
        .bind(id)
        .bind(&session)
        .bind(stage)
        .bind(execution_id)
        .bind(cost)
        .execute(pool)
        .await
        .unwrap();
        old.push(id);
    }
    let d = app
        .data(
            "query ($ids: [ID!]!) { nodes(ids: $ids) { ... on LLMInteraction { costSource totalCostUsd inputCostUsd } } }",
            json!({ "ids": old.iter().map(|id| encode(NodeType::LlmInteraction, *id)).collect::<Vec<_>>() }),
        )
        .await;
    assert_eq!(
        d["nodes"],
        json!([
            { "costSource": "CLIENT", "totalCostUsd": "0.5", "inputCostUsd": null },
            { "costSource": "NOT_PRICED", "totalCostUsd": null, "inputCostUsd": null }
        ])
    );

    let usage = session_usage(&app, &session).await;
    assert_eq!(usage["totalCostUsd"], "0.6123456789");
    assert_eq!(usage["unsplitCostUsd"], "0.6123456789");
    assert_eq!(usage["inputCostUsd"], "0");
    assert_eq!(usage["outputCostUsd"], "0");
    assert_eq!(usage["unpricedLlmInteractionCount"], 1);
    assert_eq!(usage["llmInteractionCount"], 6);
    let by_model = usage_by_model(&app).await;
    let model = |name: &str| {
        by_model
            .iter()
            .find(|g| g["key"]["model"] == name)
            .unwrap_or_else(|| panic!("{name} in {by_model:#?}"))
            .clone()
    };
    assert_eq!(model("no-such-model")["unpricedLlmCalls"], 1);
    assert_eq!(model("no-such-model")["totalCostUsd"], "0");
    assert_eq!(model("m")["unsplitCostUsd"], "0.6123456789");
    assert_eq!(model("m")["inputCostUsd"], "0");
    assert_eq!(model("m")["llmCalls"], 5);
}

#[tokio::test]
async fn the_providers_own_price_comes_before_the_models_price_for_any_provider() {
    let app = TestApp::start().await;
    let from = "2026-01-01T00:00:00Z";
    set_price(
        &app,
        json!({ "model": "claude", "effectiveFrom": from, "inputPerMillionUsd": "3", "outputPerMillionUsd": "15" }),
    )
    .await;
    set_price(
        &app,
        json!({ "model": "claude", "provider": "bedrock", "effectiveFrom": from,
                "inputPerMillionUsd": "4", "outputPerMillionUsd": "20" }),
    )
    .await;
    let one_million = json!({ "inputTokens": 1000000, "outputTokens": 1000000 });
    for (provider, total, price_provider) in [
        (Some("bedrock"), "24", json!("bedrock")),
        (Some("anthropic"), "18", Value::Null),
        (None, "18", Value::Null),
    ] {
        let (_, exec) = execution(&app, provider).await;
        let priced = record(&app, &exec, "claude", one_million.clone()).await;
        assert_eq!(priced["totalCostUsd"], total, "{provider:?}");
        assert_eq!(priced["pricingSnapshot"]["provider"], price_provider);
    }
    let d = app
        .data("{ modelPrices { model provider } }", json!({}))
        .await;
    assert_eq!(
        d["modelPrices"],
        json!([{ "model": "claude", "provider": null }, { "model": "claude", "provider": "bedrock" }])
    );
}

#[tokio::test]
async fn prices_never_change_and_counts_never_overlap() {
    let app = TestApp::start().await;
    let price = json!({ "model": "m", "effectiveFrom": "2026-03-01T00:00:00Z",
                        "inputPerMillionUsd": "1.5", "outputPerMillionUsd": "6" });
    let set = set_price(&app, price.clone()).await;
    // The same price again (a retry, trailing zeros or not) changes nothing.
    let mut again = price.clone();
    again["inputPerMillionUsd"] = json!("1.50");
    assert_eq!(set_price(&app, again).await, set);
    let mut other = price.clone();
    other["outputPerMillionUsd"] = json!("7");
    let (code, message) = app.error(SET_PRICE, json!({ "i": other })).await;
    assert_eq!(code, "CONFLICT", "{message}");
    assert!(message.contains("a price never changes"), "{message}");
    for (field, value, says) in [
        ("inputPerMillionUsd", json!("-1"), "between 0 and 1000000"),
        (
            "outputPerMillionUsd",
            json!("1000000.01"),
            "between 0 and 1000000",
        ),
        (
            "inputPerMillionUsd",
            json!("0.00000000001"),
            "more than 10 decimal places",
        ),
        ("model", json!(""), "`model` must not be empty"),
    ] {
        let mut bad = price.clone();
        bad[field] = value;
        let (code, message) = app.error(SET_PRICE, json!({ "i": bad })).await;
        assert_eq!(code, "BAD_USER_INPUT", "{field}: {message}");
        assert!(message.contains(says), "{field}: {message}");
    }
    let d = app.data("{ modelPrices { model } }", json!({})).await;
    assert_eq!(
        d["modelPrices"].as_array().unwrap().len(),
        1,
        "nothing refused was stored"
    );

    let (_, exec) = execution(&app, None).await;
    for (input, says) in [
        (
            json!({ "outputTokens": 10, "thinkingTokens": 11 }),
            "`thinkingTokens` (11) are part of `outputTokens` (10)",
        ),
        (
            json!({ "inputTokens": 10, "cachedInputTokens": 11 }),
            "`cachedInputTokens` (11) are part of `inputTokens` (10)",
        ),
        (
            json!({ "cachedInputTokens": 1 }),
            "`cachedInputTokens` (1) are part of `inputTokens`, which is missing",
        ),
        (
            json!({ "totalCostUsd": "1", "estimatedCostUsd": 1.0 }),
            "give the cost once",
        ),
        (
            json!({ "totalCostUsd": "-0.01" }),
            "`totalCostUsd` must be between 0",
        ),
        (json!({ "calledAt": "-5000-01-01T00:00:00Z" }), "`calledAt`"),
    ] {
        let (code, message) = refused(&app, &exec, input.clone()).await;
        assert_eq!(code, "BAD_USER_INPUT", "{input}: {message}");
        assert!(message.contains(says), "{input}: {message}");
    }
}

#[tokio::test]
async fn only_an_admin_sets_prices_and_is_recorded_as_who_set_them() {
    let options = HttpOptions {
        auth: AuthOptions {
            mode: AuthMode::Tokens,
            ..AuthOptions::default()
        },
        ..HttpOptions::default()
    };
    let mut app = TestApp::start_with(options).await;
    let writer = app.token("writer", Role::Writer, None).await;
    let reader = app.token("reader", Role::Reader, None).await;
    let admin = app.token("admin", Role::Admin, None).await;
    let price =
        json!({ "i": { "model": "m", "inputPerMillionUsd": "1", "outputPerMillionUsd": "2" } });
    app.token = Some(writer);
    let (code, _) = app.error(SET_PRICE, price.clone()).await;
    assert_eq!(code, "FORBIDDEN");
    app.token = Some(admin);
    let set = app.data(SET_PRICE, price).await;
    assert_eq!(set["setModelPrice"]["createdBy"], "token:admin");
    // Any reader reads the list.
    app.token = Some(reader);
    let d = app
        .data("{ modelPrices { model createdBy } }", json!({}))
        .await;
    assert_eq!(
        d["modelPrices"],
        json!([{ "model": "m", "createdBy": "token:admin" }])
    );
}

#[tokio::test]
async fn a_batch_looks_a_models_price_up_once() {
    let app = TestApp::start().await;
    let _recording = statements::record_on_this_thread();
    set_price(
        &app,
        json!({ "model": "m", "effectiveFrom": "2026-01-01T00:00:00Z", "inputPerMillionUsd": "1", "outputPerMillionUsd": "1" }),
    )
    .await;
    let (session, exec) = execution(&app, None).await;
    let operations: Vec<Value> = (0..20)
        .map(|i| {
            json!({ "recordLLMInteraction": { "executionId": exec, "interactionType": "ITERATION",
                    "modelName": if i % 2 == 0 { "m" } else { "other" }, "inputTokens": 1000, "outputTokens": 0 } })
        })
        .collect();
    statements::clear();
    app.data(
        "mutation ($ops: [IngestOperation!]!) { ingest(operations: $ops) { __typename } }",
        json!({ "ops": operations }),
    )
    .await;
    let probes = statements::recorded()
        .iter()
        .filter(|s| s.contains("FROM model_prices"))
        .count();
    assert_eq!(probes, 2, "one look-up per model in the batch");
    let usage = session_usage(&app, &session).await;
    assert_eq!(usage["totalCostUsd"], "0.01");
    assert_eq!(usage["unpricedLlmInteractionCount"], 10);
}

#[tokio::test]
async fn prices_are_imported_from_csv_and_json() {
    let dir = DataDir::new("prices");
    std::fs::create_dir_all(&dir.0).unwrap();
    let csv = dir.0.join("prices.csv");
    std::fs::write(
        &csv,
        "model,provider,effectiveFrom,inputPerMillionUsd,outputPerMillionUsd,cachedInputPerMillionUsd,thinkingPerMillionUsd\n\
         gemini-2.5-flash,google,2026-01-01T00:00:00Z,0.30,2.50,0.075,\n\
         gpt-4.1,,2026-01-01T00:00:00Z,2,8,0.5,\n",
    )
    .unwrap();
    let json_file = dir.0.join("later.json");
    std::fs::write(
        &json_file,
        r#"[{ "model": "gpt-4.1", "effectiveFrom": "2026-06-01T00:00:00Z",
              "inputPerMillionUsd": "1.75", "outputPerMillionUsd": 7 }]"#,
    )
    .unwrap();
    let out = stdout(&casefile(
        &["prices", "import", csv.to_str().unwrap()],
        &dir.0,
    ));
    assert!(out.starts_with("2 prices added, 0 already set"), "{out}");
    let out = stdout(&casefile(
        &["prices", "import", csv.to_str().unwrap()],
        &dir.0,
    ));
    assert!(out.starts_with("0 prices added, 2 already set"), "{out}");
    let out = stdout(&casefile(
        &["prices", "import", json_file.to_str().unwrap()],
        &dir.0,
    ));
    assert!(out.starts_with("1 prices added"), "{out}");
    // A bad entry: nothing of the file is imported.
    let bad = dir.0.join("bad.csv");
    std::fs::write(
        &bad,
        "model,inputPerMillionUsd,outputPerMillionUsd\nnew-model,1,2\ngpt-4.1,-1,2\n",
    )
    .unwrap();
    let refused = casefile(&["prices", "import", bad.to_str().unwrap()], &dir.0);
    assert!(!refused.status.success());
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(message.contains("entry 2 (gpt-4.1)"), "{message}");

    let (mut server, addr) = process::serve(["--data-dir".as_ref(), dir.0.as_os_str()]);
    let body: Value = reqwest::Client::new()
        .post(format!("http://{addr}/graphql"))
        .json(&json!({ "query": "{ modelPrices(at: \"2026-07-01T00:00:00Z\") { model provider inputPerMillionUsd cachedInputPerMillionUsd createdBy } }" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    process::sigterm(&server);
    server.wait().unwrap();
    assert_eq!(
        body["data"]["modelPrices"],
        json!([
            { "model": "gemini-2.5-flash", "provider": "google", "inputPerMillionUsd": "0.3",
              "cachedInputPerMillionUsd": "0.075", "createdBy": "cli:ops" },
            { "model": "gpt-4.1", "provider": null, "inputPerMillionUsd": "1.75",
              "cachedInputPerMillionUsd": null, "createdBy": "cli:ops" }
        ]),
        "{body:#}"
    );
}
