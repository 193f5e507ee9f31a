//! Export (issue 33): a session as one JSON document over HTTP, every record of every layer,
//! for its readers only.

use casefile::model::Role;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::common::{TestApp, tokens_mode};

/// `GET /sessions/{id}/export` with `token` as the bearer.
async fn export(app: &TestApp, token: &str, session: &str) -> reqwest::Response {
    app.client
        .get(app.url(&format!("/sessions/{session}/export")))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
}

async fn document(app: &TestApp, token: &str, session: &str) -> Value {
    let response = export(app, token, session).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "application/json");
    let disposition = response.headers()["content-disposition"].to_str().unwrap();
    assert!(
        disposition.starts_with("attachment; filename=\"casefile-session-"),
        "{disposition}"
    );
    let text = response.text().await.unwrap();
    assert!(
        text.ends_with("}\n"),
        "one line: {}",
        &text[text.len().saturating_sub(40)..]
    );
    assert_eq!(text.matches('\n').count(), 1);
    serde_json::from_str(&text).unwrap()
}

fn len(document: &Value, part: &str) -> usize {
    document[part]
        .as_array()
        .unwrap_or_else(|| panic!("no {part}"))
        .len()
}

#[tokio::test]
async fn a_session_exports_whole_as_one_document() {
    let mut app = TestApp::start_with(tokens_mode()).await;
    let admin = app.token("root", Role::Admin, None).await;
    app.token = Some(admin);
    casefile::demo::load(&app.store).await.unwrap();
    let reader = app.token("eyes", Role::Reader, None).await;

    // Every demo session: each part holds what the API counts of it.
    let data = app
        .data(
            "{ sessions(first: 50, filter: { includeDeleted: true }) { edges { node { uuid
               chain { name version }
               counts { stages executions timelineEvents messages llmInteractions mcpInteractions }
               statusHistory { toStatus } auditLog(first: 1) { totalCount }
               chatsConnection(first: 1) { totalCount } notifications { id } } } } }",
            json!({}),
        )
        .await;
    let sessions = data["sessions"]["edges"].as_array().unwrap();
    assert!(sessions.len() > 10);
    let mut seen_payload = false;
    for edge in sessions {
        let s = &edge["node"];
        let id = s["uuid"].as_str().unwrap();
        let doc = document(&app, &reader, id).await;
        assert_eq!(doc["format"], "casefile.session");
        assert_eq!(doc["version"], 1);
        assert_eq!(doc["session"]["id"], id);
        assert_eq!(doc["chain"]["name"], s["chain"]["name"], "{id}");
        let counts = &s["counts"];
        for (part, count) in [
            ("stages", "stages"),
            ("executions", "executions"),
            ("timeline_events", "timelineEvents"),
            ("messages", "messages"),
            ("llm_interactions", "llmInteractions"),
            ("mcp_interactions", "mcpInteractions"),
        ] {
            assert_eq!(
                len(&doc, part) as i64,
                counts[count].as_i64().unwrap(),
                "{id} {part}"
            );
        }
        assert_eq!(
            len(&doc, "status_history"),
            s["statusHistory"].as_array().unwrap().len()
        );
        assert_eq!(
            len(&doc, "audit") as i64,
            s["auditLog"]["totalCount"].as_i64().unwrap()
        );
        assert_eq!(
            len(&doc, "chats") as i64,
            s["chatsConnection"]["totalCount"].as_i64().unwrap()
        );
        assert_eq!(
            len(&doc, "notifications"),
            s["notifications"].as_array().unwrap().len()
        );
        // Records carry their table's columns; what the database derives is left out.
        for entry in doc["status_history"].as_array().unwrap() {
            assert!(entry.get("feed_position").is_none(), "{entry}");
            assert_eq!(entry["session_id"], id);
        }
        for interaction in doc["llm_interactions"].as_array().unwrap() {
            assert!(interaction["llm_request"].is_object(), "{interaction}");
            assert!(interaction.get("llm_response").is_some());
            seen_payload = true;
        }
        for interaction in doc["mcp_interactions"].as_array().unwrap() {
            assert!(interaction.get("tool_result").is_some(), "{interaction}");
        }
        // Timeline events in sequence order, as the session recorded them.
        let sequences: Vec<i64> = doc["timeline_events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["sequence_number"].as_i64().unwrap())
            .collect();
        assert!(
            sequences.windows(2).all(|w| w[0] < w[1]),
            "{id}: {sequences:?}"
        );
    }
    assert!(seen_payload);

    // The same session twice: the same document, but for when it was exported.
    let id = sessions[0]["node"]["uuid"].as_str().unwrap();
    let mut first = document(&app, &reader, id).await;
    let mut second = document(&app, &reader, id).await;
    first["exported_at"] = Value::Null;
    second["exported_at"] = Value::Null;
    assert_eq!(first, second);
    app.stop().await;
}

#[tokio::test]
async fn only_a_sessions_readers_export_it() {
    let mut app = TestApp::start_with(tokens_mode()).await;
    let admin = app.token("root", Role::Admin, None).await;
    app.token = Some(admin.clone());
    casefile::demo::load(&app.store).await.unwrap();
    let ids: Vec<String> = app
        .data(
            "{ sessions(first: 2) { edges { node { uuid } } } }",
            json!({}),
        )
        .await["sessions"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["node"]["uuid"].as_str().unwrap().to_owned())
        .collect();
    let (shared, other) = (&ids[0], &ids[1]);

    // No credentials, a wrong one: 401.
    let response = app
        .client
        .get(app.url(&format!("/sessions/{shared}/export")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        export(&app, "cf_not-a-token-at-all-0000000000000000", shared)
            .await
            .status(),
        StatusCode::UNAUTHORIZED
    );
    // Not a session id, no such session.
    let response = export(&app, &admin, "not-an-id").await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["errors"][0]["extensions"]["code"], "BAD_USER_INPUT");
    let response = export(&app, &admin, &uuid::Uuid::now_v7().to_string()).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["errors"][0]["extensions"]["code"], "NOT_FOUND");

    // A share link exports its session, and no other.
    let link = app
        .data(
            "mutation ($s: ID!) { createShareLink(sessionId: $s) { secret } }",
            json!({ "s": shared }),
        )
        .await["createShareLink"]["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        document(&app, &link, shared).await["session"]["id"],
        shared.as_str()
    );
    let response = export(&app, &link, other).await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);

    // From another site's page: refused, as for the event stream.
    let response = app
        .client
        .get(app.url(&format!("/sessions/{shared}/export")))
        .bearer_auth(&admin)
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    app.stop().await;
}

/// A session with megabytes of prompts streams out whole.
#[tokio::test]
async fn a_large_session_streams_out() {
    let app = TestApp::start().await;
    let agent = crate::write_api::Agent { app: &app };
    let session = agent.session().await;
    let stage = agent.stage(&session, 1, 1, None).await;
    let execution = agent.execution(&stage, 1, "Lead").await;
    let prompt = "x".repeat(3 << 20);
    // Thinking written in pieces across many chunks: characters of 1 to 4 bytes, and ones JSON
    // escapes, so pieces end wherever a boundary falls.
    let thinking = "é\"\n€𝄞a".repeat(30_000);
    for _ in 0..2 {
        app.data(
            "mutation ($e: ID!, $p: String!, $t: String!) { recordLLMInteraction(input: { executionId: $e,
               interactionType: ITERATION, modelName: \"m\", thinkingContent: $t,
               llmRequest: { messages: [{ role: \"user\", content: $p }] }, llmResponse: {} }) { uuid } }",
            json!({ "e": execution, "p": prompt, "t": thinking }),
        )
        .await;
    }
    let response = app
        .client
        .get(app.url(&format!("/sessions/{session}/export")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let text = response.text().await.unwrap();
    assert!(text.len() > 6 << 20, "{} bytes", text.len());
    let doc: Value = serde_json::from_str(&text).unwrap();
    for interaction in doc["llm_interactions"].as_array().unwrap() {
        assert_eq!(
            interaction["llm_request"]["messages"][0]["content"]
                .as_str()
                .map(str::len),
            Some(3 << 20)
        );
        assert_eq!(interaction["thinking_content"], thinking.as_str());
        assert_eq!(interaction["llm_response"], json!({}));
    }
    app.stop().await;
}

/// `casefile export`'s arguments, as the command line gives them.
pub(crate) fn export_args(args: &[&str]) -> casefile::cli::export::ExportArgs {
    use clap::Parser as _;
    #[derive(clap::Parser)]
    struct Command {
        #[command(flatten)]
        args: casefile::cli::export::ExportArgs,
    }
    Command::parse_from(std::iter::once("export").chain(args.iter().copied())).args
}

/// `casefile import PATH --actor test`.
pub(crate) fn import_args(path: &std::path::Path) -> casefile::cli::import::ImportArgs {
    use clap::Parser as _;
    #[derive(clap::Parser)]
    struct Command {
        #[command(flatten)]
        args: casefile::cli::import::ImportArgs,
    }
    Command::parse_from(["import", path.to_str().unwrap(), "--actor", "test"]).args
}

/// The lines of an NDJSON file, each parsed, with when it was exported left out.
fn documents(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| {
            let mut doc: Value = serde_json::from_str(line).unwrap();
            doc["exported_at"] = Value::Null;
            doc
        })
        .collect()
}

/// A bulk export writes one document a line, oldest first, and a run cut off part way goes on
/// where it stopped: the file ends as one run would have written it.
#[tokio::test]
async fn a_bulk_export_resumes_where_it_stopped() {
    let app = TestApp::start().await;
    casefile::demo::load(&app.store).await.unwrap();
    let dir = std::env::temp_dir().join(format!("casefile-export-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).unwrap();
    let whole = dir.join("whole.ndjson");
    let run = |args: Vec<String>| {
        let store = app.store.clone();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            casefile::cli::export::run_on_database(&store, &export_args(&args))
                .await
                .unwrap();
        }
    };
    let output = |path: &std::path::Path| vec!["--output".to_owned(), path.display().to_string()];
    run(output(&whole)).await;
    let all = documents(&whole);
    let total = app.data("{ sessions { totalCount } }", json!({})).await["sessions"]["totalCount"]
        .as_i64()
        .unwrap();
    assert_eq!(all.len() as i64, total);
    let created: Vec<(String, String)> = all
        .iter()
        .map(|d| {
            let s = &d["session"];
            (
                s["created_at"].as_str().unwrap().to_owned(),
                s["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(created.windows(2).all(|w| w[0] < w[1]), "oldest first");

    // Cut off in the middle of its tenth line, then run again into the same file.
    let text = std::fs::read(&whole).unwrap();
    let cut = dir.join("cut.ndjson");
    let tenth = text
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .nth(8)
        .unwrap()
        .0
        + 1;
    std::fs::write(&cut, &text[..tenth + 100]).unwrap();
    run(output(&cut)).await;
    assert_eq!(documents(&cut), all);

    // Into standard output's place, `--after` goes on after the session it names.
    let after = dir.join("after.ndjson");
    let mut args = output(&after);
    args.extend(["--after".to_owned(), created[4].1.clone()]);
    run(args).await;
    assert_eq!(documents(&after), all[5..]);

    // `--since` counts the instant it names; `--filter` is the sessions list's.
    let since = dir.join("since.ndjson");
    let mut args = output(&since);
    args.extend(["--since".to_owned(), created[3].0.clone()]);
    run(args).await;
    assert_eq!(documents(&since), all[3..]);
    let completed = dir.join("completed.ndjson");
    let mut args = output(&completed);
    args.extend([
        "--filter".to_owned(),
        r#"{"status": ["COMPLETED"]}"#.to_owned(),
    ]);
    run(args).await;
    let completed = documents(&completed);
    assert!(!completed.is_empty() && completed.len() < all.len());
    assert!(
        completed
            .iter()
            .all(|d| d["session"]["status"] == "completed")
    );
    let bad = export_args(&["--filter", r#"{"status": ["DONE"]}"#]);
    let refused = casefile::cli::export::run_on_database(&app.store, &bad).await;
    assert!(refused.is_err_and(|e| e.to_string().contains("--filter")));

    // One session: its document alone, in place of what the file held.
    let one = dir.join("one.ndjson");
    let mut args = output(&one);
    args.extend(["--session".to_owned(), created[2].1.clone()]);
    run(args.clone()).await;
    run(args).await;
    assert_eq!(documents(&one), all[2..3]);
    std::fs::remove_dir_all(&dir).unwrap();
    app.stop().await;
}

/// Export, import into another database, export again: the same records, the status history
/// included (its feed positions are the new database's, and not exported). The audit trail
/// gains the import.
#[tokio::test]
async fn an_import_restores_what_was_exported() {
    let source = TestApp::start().await;
    casefile::demo::load(&source.store).await.unwrap();
    // A deleted chat: when and by whom travel with it.
    let deleted: uuid::Uuid = sqlx::query_scalar(
        "UPDATE chats SET deleted_at = '2026-01-02T03:04:05Z', deleted_by = 'token:alice' \
         WHERE id = (SELECT id FROM chats ORDER BY id LIMIT 1) RETURNING id",
    )
    .fetch_one(source.store.pool())
    .await
    .unwrap();
    let dir = std::env::temp_dir().join(format!("casefile-import-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).unwrap();
    let exported = dir.join("exported.ndjson");
    let all = ["--filter", r#"{"includeDeleted": true}"#, "--output"];
    let args = |path: &std::path::Path| {
        let mut args: Vec<String> = all.iter().map(|a| (*a).to_owned()).collect();
        args.push(path.display().to_string());
        args
    };
    let export_into = |store: casefile::store::Store, path: std::path::PathBuf| {
        let args = args(&path);
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            casefile::cli::export::run_on_database(&store, &export_args(&args))
                .await
                .unwrap();
        }
    };
    export_into(source.store.clone(), exported.clone()).await;

    let target = TestApp::start().await;
    let import = import_args;
    casefile::cli::import::run_on_database(&target.store, &import(&exported))
        .await
        .unwrap();
    // Again: every session is there already, and nothing changes.
    casefile::cli::import::run_on_database(&target.store, &import(&exported))
        .await
        .unwrap();
    // Each imported session's history took the feed's next positions.
    crate::sessions_feed::assert_every_change_is_fed(target.store.pool()).await;
    let again = dir.join("again.ndjson");
    export_into(target.store.clone(), again.clone()).await;

    let strip = |docs: Vec<Value>| -> Vec<Value> {
        docs.into_iter()
            .map(|mut doc| {
                let object = doc.as_object_mut().unwrap();
                object.remove("status_history");
                object.remove("audit");
                doc
            })
            .collect()
    };
    let (before, after) = (documents(&exported), documents(&again));
    assert!(before.len() > 20);
    // The import is in each session's trail.
    for doc in &after {
        let audit = doc["audit"].as_array().unwrap();
        assert!(
            audit
                .iter()
                .any(|r| r["action"] == "import" && r["actor"] == "test"),
            "{}",
            doc["session"]["id"]
        );
    }
    let deleted_in = |docs: &[Value]| -> Vec<Value> {
        docs.iter()
            .flat_map(|doc| doc["chats"].as_array().unwrap().clone())
            .filter(|chat| chat["id"] == deleted.to_string())
            .map(|chat| json!([chat["deleted_at"], chat["deleted_by"]]))
            .collect()
    };
    assert_eq!(
        deleted_in(&after),
        [json!(["2026-01-02T03:04:05Z", "token:alice"])]
    );
    assert_eq!(deleted_in(&before), deleted_in(&after));
    let (before, after) = (strip(before), strip(after));
    for (one, other) in before.iter().zip(&after) {
        assert_eq!(one, other, "session {}", one["session"]["id"]);
    }
    assert_eq!(before.len(), after.len());

    // Not a document of this format: refused, naming the line.
    let wrong = dir.join("wrong.ndjson");
    std::fs::write(&wrong, "{\"format\":\"other\",\"version\":1}\n").unwrap();
    let refused = casefile::cli::import::run_on_database(&target.store, &import(&wrong)).await;
    let message = format!("{:#}", refused.unwrap_err());
    assert!(
        message.contains("line 1") && message.contains("casefile.session"),
        "{message}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    source.stop().await;
    target.stop().await;
}

/// Purges that keep a copy (seed 000's Q12): each session is exported first, deleted only once
/// its archive is written and only if it did not change since, and a failed write deletes
/// nothing.
#[tokio::test]
async fn a_purge_archives_each_session_before_deleting_it() {
    use casefile::model::PurgeTrigger;
    use casefile::retention::{Archive, Cutoff, Policy, PurgeBatches, purge};
    let app = TestApp::start().await;
    casefile::demo::load(&app.store).await.unwrap();
    let dir = std::env::temp_dir().join(format!("casefile-archive-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).unwrap();
    // What each session's document says before the purge.
    let before = dir.join("before.ndjson");
    let args = [
        "--filter",
        r#"{"includeDeleted": true}"#,
        "--output",
        before.to_str().unwrap(),
    ];
    casefile::cli::export::run_on_database(&app.store, &export_args(&args))
        .await
        .unwrap();
    let before: std::collections::HashMap<String, Value> = documents(&before)
        .into_iter()
        .map(|d| (d["session"]["id"].as_str().unwrap().to_owned(), d))
        .collect();
    let policy = Policy::new(
        None,
        Some(Cutoff::At(chrono::Utc::now())),
        None,
        chrono::Utc::now(),
    );
    let running = tokio::sync::watch::channel(false).1;
    let batches = PurgeBatches {
        size: 3,
        pause_ms: 0,
    };

    // A directory that cannot be made (a file is in its place): the purge stops, nothing goes.
    let blocked = dir.join("blocked");
    std::fs::write(&blocked, "a file").unwrap();
    let failed = purge(
        &app.store,
        &policy,
        "cli:ops",
        PurgeTrigger::Command,
        batches,
        Some(&Archive::Directory(blocked)),
        &running,
    )
    .await
    .unwrap_err();
    assert!(failed.to_string().contains("archiving session"), "{failed}");
    assert_eq!(failed.purged.sessions, 0);
    let count = |pool: sqlx::PgPool| async move {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM sessions")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    assert_eq!(count(app.store.pool().clone()).await as usize, before.len());

    // Into a directory: one file per deleted session, each its whole document.
    let archive = dir.join("archive");
    let purged = purge(
        &app.store,
        &policy,
        "cli:ops",
        PurgeTrigger::Command,
        batches,
        Some(&Archive::Directory(archive.clone())),
        &running,
    )
    .await
    .unwrap();
    assert!(purged.sessions > 3, "in several batches: {purged:?}");
    let files: Vec<std::path::PathBuf> = std::fs::read_dir(&archive)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len() as i64, purged.sessions, "{files:?}");
    for file in &files {
        let name = file.file_name().unwrap().to_str().unwrap();
        let id = name
            .strip_suffix(".json")
            .expect("<session id>.json, nothing partial");
        let mut archived: Value =
            serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        archived["exported_at"] = Value::Null;
        assert_eq!(&archived, &before[id], "{id}");
        let gone: bool =
            sqlx::query_scalar("SELECT NOT EXISTS (SELECT FROM sessions WHERE id = $1)")
                .bind(uuid::Uuid::parse_str(id).unwrap())
                .fetch_one(app.store.pool())
                .await
                .unwrap();
        assert!(gone, "{id} was archived and deleted");
    }
    assert_eq!(
        count(app.store.pool().clone()).await,
        before.len() as i64 - purged.sessions
    );
    std::fs::remove_dir_all(&dir).unwrap();
    app.stop().await;
}

/// A session that changed after its export stays: the archive would not hold the change.
#[tokio::test]
async fn a_session_changed_since_its_export_is_not_deleted() {
    use casefile::model::PurgeTrigger;
    use casefile::retention::Archive;
    use casefile::store::retention::SessionCriteria;
    let app = TestApp::start().await;
    casefile::demo::load(&app.store).await.unwrap();
    let criteria = SessionCriteria {
        deleted_before: None,
        finished_before: Some(chrono::Utc::now()),
    };
    let session = app.store.purge_candidates(&criteria, 1).await.unwrap()[0];
    let dir = std::env::temp_dir().join(format!("casefile-archive-{}", uuid::Uuid::now_v7()));
    let exported = Archive::Directory(dir.clone())
        .write(&app.store, session)
        .await
        .unwrap();
    let purge = app
        .store
        .begin_purge("test", PurgeTrigger::Command, &json!({}))
        .await
        .unwrap();
    for stale in [
        casefile::store::export::Exported {
            last_position: exported.last_position - 1,
            ..exported
        },
        casefile::store::export::Exported {
            updated_at: exported.updated_at - chrono::TimeDelta::microseconds(1),
            ..exported
        },
    ] {
        let batch = app
            .store
            .purge_sessions(purge, &criteria, 10, Some(&[stale]))
            .await
            .unwrap();
        assert_eq!((batch.locked, batch.deleted), (1, 0), "{stale:?}");
    }
    let batch = app
        .store
        .purge_sessions(purge, &criteria, 10, Some(&[exported]))
        .await
        .unwrap();
    assert_eq!((batch.locked, batch.deleted), (1, 1));
    std::fs::remove_dir_all(&dir).unwrap();
    app.stop().await;
}

/// `casefile purge --archive -`: the archive on standard output, one document a line, and the
/// purge's own messages on standard error.
#[tokio::test]
async fn the_purge_command_archives_to_standard_output() {
    let dir = std::env::temp_dir().join(format!("casefile-purge-{}", uuid::Uuid::now_v7()));
    let data = dir.join("db");
    let casefile = |args: &[&str]| {
        let data = data.clone();
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        async move {
            tokio::task::spawn_blocking(move || {
                std::process::Command::new(env!("CARGO_BIN_EXE_casefile"))
                    .args(&args)
                    .arg("--data-dir")
                    .arg(&data)
                    .env_remove("DATABASE_URL")
                    .env("RUST_LOG", "warn")
                    .output()
                    .unwrap()
            })
            .await
            .unwrap()
        }
    };
    assert!(casefile(&["demo"]).await.status.success());
    let now = chrono::Utc::now().to_rfc3339();
    let output = casefile(&[
        "purge",
        "--finished-before",
        &now,
        "--archive",
        "-",
        "--execute",
    ])
    .await;
    let (stdout, stderr) = (
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    );
    assert!(output.status.success(), "{stderr}");
    let deleted: usize = stderr
        .split("deleted ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the purge's summary on standard error: {stderr}"));
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(deleted > 0);
    assert_eq!(lines.len(), deleted);
    assert!(
        lines
            .iter()
            .all(|d| d["format"] == "casefile.session" && d["session"]["completed_at"].is_string())
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
