//! A GraphQL client of a running server's public API: what `casefile simulate` plays through,
//! what `casefile token --url` acts through, and what the live benchmark drives the server with.

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

/// A GraphQL client of the public API.
#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    url: String,
    /// Sent as `Authorization: Bearer …` when set.
    token: Option<String>,
}

impl Api {
    /// A client of the GraphQL endpoint at `url`, authenticated with `token` when given.
    pub fn new(url: String, token: Option<String>) -> Api {
        Api {
            http: reqwest::Client::new(),
            url,
            token,
        }
    }

    /// Runs an operation; its `data`, or an error when the server refused it.
    pub async fn call(&self, query: &str, variables: Value) -> anyhow::Result<Value> {
        let mut request = self
            .http
            .post(&self.url)
            .json(&json!({ "query": query, "variables": variables }));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let body: Value = request
            .send()
            .await
            .with_context(|| format!("cannot reach {}", self.url))?
            .json()
            .await?;
        if let Some(errors) = body.get("errors") {
            bail!("the server refused a call: {errors}");
        }
        Ok(body["data"].clone())
    }

    /// Runs an operation whose `field` returns a record; that record's uuid.
    pub async fn id(&self, query: &str, variables: Value, field: &str) -> anyhow::Result<String> {
        let data = self.call(query, variables).await?;
        Ok(data[field]["uuid"]
            .as_str()
            .context("no uuid in the answer")?
            .to_owned())
    }
}
