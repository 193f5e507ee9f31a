//! `casefile token …` and the first admin token, as an operator would use them.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::common::cli::{DataDir, casefile, stdout};
use crate::common::process;

/// The secret a `token create` printed: its last line.
fn secret(output: &Output) -> String {
    let out = stdout(output);
    let last = out.lines().last().unwrap_or_default().to_owned();
    assert!(last.starts_with("cf_") && last.len() == 67, "{out}");
    last
}

async fn viewer(addr: std::net::SocketAddr, secret: &str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("http://{addr}/graphql"))
        .bearer_auth(secret)
        .json(&json!({ "query": "{ viewer { actor role } }" }))
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

#[tokio::test]
async fn tokens_are_managed_from_the_command_line_and_through_a_running_server() {
    let dir = DataDir::new("token");
    let created = casefile(
        &[
            "token",
            "create",
            "--name",
            "orchestrator",
            "--role",
            "writer",
            "--expires-in",
            "30d",
        ],
        &dir.0,
    );
    let agent = secret(&created);
    let refused = casefile(
        &[
            "token",
            "create",
            "--name",
            "orchestrator",
            "--role",
            "reader",
        ],
        &dir.0,
    );
    assert!(!refused.status.success(), "names are unique");
    // A delivery worker's token.
    let worker = casefile(
        &[
            "token",
            "create",
            "--name",
            "slack-worker",
            "--role",
            "notifier",
        ],
        &dir.0,
    );
    assert!(worker.status.success(), "{worker:?}");
    let listed = stdout(&casefile(&["token", "list"], &dir.0));
    let row = listed.lines().find(|l| l.starts_with("slack-worker"));
    assert!(row.expect(&listed).contains("notifier"), "{listed}");
    let row = listed
        .lines()
        .find(|l| l.starts_with("orchestrator"))
        .expect(&listed);
    assert!(row.contains("writer"), "{listed}");
    assert!(!listed.contains(&agent[3..]), "the secret is never listed");

    // A server holds the data directory: the command says what to do instead.
    let admin = format!("cf_{}", "a1".repeat(32));
    let (mut server, addr) = process::serve([
        "--data-dir".as_ref(),
        dir.0.as_os_str(),
        "--auth".as_ref(),
        "tokens".as_ref(),
        "--bootstrap-admin-token".as_ref(),
        admin.as_ref(),
    ]);
    let busy = casefile(&["token", "list"], &dir.0);
    assert!(!busy.status.success());
    let message = String::from_utf8_lossy(&busy.stderr);
    assert!(
        message.contains("in use") && message.contains("--url"),
        "{message}"
    );

    let (status, body) = viewer(addr, &agent).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["data"]["viewer"],
        json!({ "actor": "token:orchestrator", "role": "WRITER" })
    );
    let (_, body) = viewer(addr, &admin).await;
    assert_eq!(
        body["data"]["viewer"]["role"], "ADMIN",
        "the bootstrap admin: {body}"
    );

    // Through the server's admin mutations.
    let url = format!("http://{addr}/graphql");
    let remote = |args: &[&str]| {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--url", &url, "--token", &admin]);
        Command::new(env!("CARGO_BIN_EXE_casefile"))
            .args(&all)
            .env_remove("CASEFILE_TOKEN")
            .output()
            .unwrap()
    };
    let reader = secret(&remote(&[
        "token",
        "create",
        "--name",
        "dashboard",
        "--role",
        "reader",
    ]));
    let (_, body) = viewer(addr, &reader).await;
    assert_eq!(body["data"]["viewer"]["role"], "READER", "{body}");
    stdout(&remote(&["token", "revoke", "orchestrator"]));
    let (status, _) = viewer(addr, &agent).await;
    assert_eq!(status, 401, "revoked");
    let listed = stdout(&remote(&["token", "list"]));
    let row = listed
        .lines()
        .find(|l| l.starts_with("orchestrator"))
        .expect(&listed);
    assert!(
        !row.trim_end().ends_with('-'),
        "revoked, with a time: {row}"
    );
    assert!(
        listed.lines().any(|l| l.starts_with("bootstrap-admin")),
        "{listed}"
    );
    let (status, _) = viewer(addr, "cf_nope").await;
    assert_eq!(status, 401);

    process::sigterm(&server);
    server.wait().unwrap();
}

#[tokio::test]
async fn the_first_admin_token_is_printed_once() {
    let dir = DataDir::new("token");
    let start = || {
        process::serve([
            "--data-dir".as_ref(),
            dir.0.as_os_str(),
            "--auth".as_ref(),
            "tokens".as_ref(),
        ])
    };
    let (mut server, addr) = start();
    let mut out = BufReader::new(server.stdout.take().unwrap()).lines();
    let secret = loop {
        let line = out.next().expect("the secret is printed").unwrap();
        if line.starts_with("cf_") {
            break line;
        }
    };
    let (_, body) = viewer(addr, &secret).await;
    assert_eq!(body["data"]["viewer"]["role"], "ADMIN", "{body}");
    process::sigterm(&server);
    server.wait().unwrap();
    drop(out);

    // A second start finds the admin and prints nothing.
    let (mut server, _) = start();
    process::sigterm(&server);
    let mut printed = String::new();
    std::io::Read::read_to_string(&mut server.stdout.take().unwrap(), &mut printed).unwrap();
    server.wait().unwrap();
    assert!(!printed.contains("cf_"), "{printed}");
    let listed = stdout(&casefile(&["token", "list"], &dir.0));
    assert_eq!(
        listed
            .lines()
            .filter(|l| l.starts_with("bootstrap-admin"))
            .count(),
        1,
        "{listed}"
    );
}
