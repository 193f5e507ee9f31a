//! `casefile token create|list|revoke`: on the database directly, or through a running
//! server's admin mutations (`--url` with an admin token).

use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::client::Api;
use super::database::with_database;
use crate::auth::tokens::{generate_secret, hash};
use crate::db::DatabaseArgs;
use crate::model::{Role, db_name};
use crate::options::parse_period;
use crate::store::Store;
use crate::store::audit::Origin;
use crate::store::tokens::{self as token_store, ApiTokenRow, NewToken};

/// API token management. Works on the database directly (the embedded one only while no server
/// holds its data directory), or through a running server's admin mutations with `--url`.
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token; its secret is printed once, as the last line of standard output.
    Create {
        /// Unique name (letters, digits, '.', '_', '-'); recorded as `token:NAME` on what it creates.
        #[arg(long)]
        name: String,
        /// What it may do.
        #[arg(long, value_enum)]
        role: Role,
        /// Lifetime, e.g. `30d`, `12h`, `90m` (default: no expiry).
        #[arg(long, value_parser = parse_period)]
        expires_in: Option<chrono::Duration>,
        #[command(flatten)]
        target: TokenTarget,
    },
    /// List tokens: name, role, created, last used, expires, revoked (never the secret).
    List {
        #[command(flatten)]
        target: TokenTarget,
    },
    /// Revoke a token: refused from then on by every server on the database, and its open
    /// streams are closed.
    Revoke {
        /// The token's name.
        name: String,
        #[command(flatten)]
        target: TokenTarget,
    },
}

/// Where a token command acts: a running server (`--url`, with an admin token) or the database.
#[derive(Debug, Clone, Args)]
pub struct TokenTarget {
    /// GraphQL endpoint of a running server to act through (its admin mutations).
    #[arg(long)]
    pub url: Option<String>,

    /// Admin token for `--url`.
    #[arg(long, env = "CASEFILE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,

    #[command(flatten)]
    pub database: DatabaseArgs,
}

/// Runs `command` through the server at `--url`, or else on the database.
pub async fn run(command: TokenCommand) -> anyhow::Result<()> {
    let target = match &command {
        TokenCommand::Create { target, .. }
        | TokenCommand::List { target }
        | TokenCommand::Revoke { target, .. } => target.clone(),
    };
    match &target.url {
        Some(url) => {
            let api = Api::new(url.clone(), target.token.clone());
            run_remote(&api, &command).await
        }
        None => {
            let command = &command;
            with_database(&target.database, |store| async move {
                run_on_database(&store, command).await
            })
            .await
        }
    }
}

/// A token as listed, wherever it came from.
struct Listed {
    name: String,
    role: String,
    created_at: String,
    last_used_at: Option<String>,
    expires_at: Option<String>,
    revoked_at: Option<String>,
}

impl From<ApiTokenRow> for Listed {
    fn from(row: ApiTokenRow) -> Listed {
        let time = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        Listed {
            name: row.name,
            role: db_name(row.role),
            created_at: time(row.created_at),
            last_used_at: row.last_used_at.map(time),
            expires_at: row.expires_at.map(time),
            revoked_at: row.revoked_at.map(time),
        }
    }
}

impl Listed {
    fn from_json(token: &Value) -> Listed {
        let text = |key: &str| token[key].as_str().map(str::to_owned);
        Listed {
            name: text("name").unwrap_or_default(),
            role: text("role").unwrap_or_default().to_lowercase(),
            created_at: text("createdAt").unwrap_or_default(),
            last_used_at: text("lastUsedAt"),
            expires_at: text("expiresAt"),
            revoked_at: text("revokedAt"),
        }
    }
}

fn print_table(tokens: &[Listed]) {
    let or_dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".to_owned());
    let width = tokens
        .iter()
        .map(|t| t.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    println!(
        "{:width$}  {:8}  {:20}  {:20}  {:20}  REVOKED",
        "NAME", "ROLE", "CREATED", "LAST USED", "EXPIRES"
    );
    for t in tokens {
        println!(
            "{:width$}  {:8}  {:20}  {:20}  {:20}  {}",
            t.name,
            t.role,
            t.created_at,
            or_dash(&t.last_used_at),
            or_dash(&t.expires_at),
            or_dash(&t.revoked_at)
        );
    }
}

fn expiry(expires_in: Option<chrono::Duration>) -> Option<DateTime<Utc>> {
    expires_in.map(|d| Utc::now() + d)
}

fn print_created(name: &str, role: Role, expires_at: Option<DateTime<Utc>>, secret: &str) {
    let expires = expires_at.map_or("never".to_owned(), |t| t.to_rfc3339());
    println!(
        "created token {name} (role {}, expires {expires}).",
        db_name(role)
    );
    println!(
        "Send it as `Authorization: Bearer <secret>`. It is shown only now; casefile keeps only its hash:"
    );
    println!("{secret}");
}

/// A change made here, on the database directly: audited under the mutation that does the
/// same, with no caller, request or client.
fn cli_origin(action: &str) -> Origin {
    Origin {
        action: action.to_owned(),
        ..Origin::default()
    }
}

/// Runs `command` on the database behind `store`.
async fn run_on_database(store: &Store, command: &TokenCommand) -> anyhow::Result<()> {
    match command {
        TokenCommand::Create {
            name,
            role,
            expires_in,
            ..
        } => {
            let secret = generate_secret();
            let secret_hash = hash(&secret);
            let expires_at = expiry(*expires_in);
            let mut tx = store.pool().begin().await?;
            token_store::create(
                &mut tx,
                &NewToken {
                    name,
                    role: *role,
                    secret_hash: &secret_hash,
                    expires_at,
                    created_by: None,
                },
                &cli_origin("createApiToken"),
            )
            .await?;
            tx.commit().await?;
            print_created(name, *role, expires_at, &secret);
        }
        TokenCommand::List { .. } => {
            let rows = token_store::list(store.pool(), true).await?;
            print_table(&rows.into_iter().map(Listed::from).collect::<Vec<_>>());
        }
        TokenCommand::Revoke { name, .. } => {
            let mut tx = store.pool().begin().await?;
            token_store::revoke(&mut tx, name, &cli_origin("revokeApiToken")).await?;
            tx.commit().await?;
            println!("revoked token {name}");
        }
    }
    Ok(())
}

/// Runs `command` through the admin mutations of the server at `api`.
async fn run_remote(api: &Api, command: &TokenCommand) -> anyhow::Result<()> {
    match command {
        TokenCommand::Create {
            name,
            role,
            expires_in,
            ..
        } => {
            let expires_at = expiry(*expires_in);
            let data = api
                .call(
                    "mutation ($input: CreateApiTokenInput!) { createApiToken(input: $input) { secret } }",
                    json!({ "input": {
                        "name": name,
                        "role": db_name(role).to_uppercase(),
                        "expiresAt": expires_at,
                    } }),
                )
                .await?;
            let secret = data["createApiToken"]["secret"]
                .as_str()
                .ok_or_else(|| anyhow::anyhow!("the server returned no secret"))?;
            print_created(name, *role, expires_at, secret);
        }
        TokenCommand::List { .. } => {
            let data = api
                .call(
                    "{ apiTokens(includeRevoked: true) { name role createdAt lastUsedAt expiresAt revokedAt } }",
                    json!({}),
                )
                .await?;
            let tokens: Vec<Listed> = data["apiTokens"]
                .as_array()
                .map(|list| list.iter().map(Listed::from_json).collect())
                .unwrap_or_default();
            print_table(&tokens);
        }
        TokenCommand::Revoke { name, .. } => {
            api.call(
                "mutation ($name: String!) { revokeApiToken(name: $name) { revokedAt } }",
                json!({ "name": name }),
            )
            .await?;
            println!("revoked token {name}");
        }
    }
    Ok(())
}
