//! `casefile prices import FILE`: loads a price list into the database, in one transaction
//! (every price of the file, or none). Each entry is set as `setModelPrice` sets it: a price
//! already in effect from its instant is left as it is, so importing a file again writes
//! nothing.

use std::path::PathBuf;

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use clap::Subcommand;
use rust_decimal::Decimal;
use serde::Deserialize;

use super::database::with_database;
use crate::db::DatabaseArgs;
use crate::store::audit::Origin;
use crate::store::prices::{NewPrice, PriceSet, set_price};

/// The price list.
#[derive(Debug, Subcommand)]
pub enum PricesCommand {
    /// Load prices from FILE: JSON (a list of objects) when its first non-blank character is
    /// `[`, otherwise CSV with a header row. Fields, as `setModelPrice` names them: model,
    /// provider, effectiveFrom (RFC 3339; default now), inputPerMillionUsd,
    /// outputPerMillionUsd, cachedInputPerMillionUsd, thinkingPerMillionUsd (US dollars per
    /// million tokens; JSON takes them as strings or numbers). Optional fields may be left out
    /// or empty.
    Import {
        /// The price list file.
        file: PathBuf,
        /// Who sets the prices, for their record (default: `cli:` and the system user).
        #[arg(long, env = "CASEFILE_PRICES_ACTOR")]
        actor: Option<String>,
        #[command(flatten)]
        database: DatabaseArgs,
    },
}

/// One price of a file.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Entry {
    model: String,
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    effective_from: Option<DateTime<Utc>>,
    input_per_million_usd: Decimal,
    output_per_million_usd: Decimal,
    #[serde(default)]
    cached_input_per_million_usd: Option<Decimal>,
    #[serde(default)]
    thinking_per_million_usd: Option<Decimal>,
}

impl Entry {
    fn into_price(self, created_by: &str) -> NewPrice {
        // An empty CSV cell is no value.
        let provider = self.provider.filter(|p| !p.is_empty());
        NewPrice {
            model_name: self.model,
            provider,
            effective_from: self.effective_from,
            input_per_million: self.input_per_million_usd,
            output_per_million: self.output_per_million_usd,
            cached_input_per_million: self.cached_input_per_million_usd,
            thinking_per_million: self.thinking_per_million_usd,
            created_by: Some(created_by.to_owned()),
        }
    }
}

/// The entries of a price list file's text, in order.
fn parse(text: &str) -> anyhow::Result<Vec<Entry>> {
    if text.trim_start().starts_with('[') {
        return serde_json::from_str(text).context("the file is not a JSON list of prices");
    }
    csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes())
        .deserialize()
        .enumerate()
        .map(|(i, entry)| entry.with_context(|| format!("entry {} of the CSV file", i + 1)))
        .collect()
}

pub async fn run(command: PricesCommand) -> anyhow::Result<()> {
    let PricesCommand::Import {
        file,
        actor,
        database,
    } = command;
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read {}", file.display()))?;
    let entries = parse(&text)?;
    let actor = actor.unwrap_or_else(|| match std::env::var("USER").unwrap_or_default() {
        user if user.is_empty() => "cli".to_owned(),
        user => format!("cli:{user}"),
    });
    let prices: Vec<NewPrice> = entries.into_iter().map(|e| e.into_price(&actor)).collect();
    // Audited as `setModelPrice` by the importing user, without a request or client.
    let origin = Origin {
        actor: Some(actor.clone()),
        action: "setModelPrice".to_owned(),
        ..Origin::default()
    };
    with_database(&database, |store| async move {
        let mut tx = store.begin().await?;
        let mut added = 0;
        for (i, price) in prices.iter().enumerate() {
            let set = set_price(&mut tx, price, &origin).await.with_context(|| {
                format!(
                    "entry {} ({}): nothing was imported",
                    i + 1,
                    price.model_name
                )
            })?;
            if matches!(set, PriceSet::Added(_)) {
                added += 1;
            }
        }
        tx.commit().await?;
        println!(
            "{added} prices added, {} already set, from {}",
            prices.len() - added,
            file.display()
        );
        Ok(())
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn csv_and_json_read_the_same_prices_exactly() {
        let csv = "model,provider,effectiveFrom,inputPerMillionUsd,outputPerMillionUsd,\
                   cachedInputPerMillionUsd,thinkingPerMillionUsd\n\
                   gemini-2.5-pro,google,2026-01-01T00:00:00Z,1.25,10,0.31,\n\
                   gpt-4.1,,,2,8,,\n";
        let json = r#"[
            {"model": "gemini-2.5-pro", "provider": "google",
             "effectiveFrom": "2026-01-01T00:00:00Z", "inputPerMillionUsd": "1.25",
             "outputPerMillionUsd": 10, "cachedInputPerMillionUsd": 0.31},
            {"model": "gpt-4.1", "inputPerMillionUsd": 2, "outputPerMillionUsd": "8"}
        ]"#;
        let read = |text| -> Vec<NewPrice> {
            parse(text)
                .unwrap()
                .into_iter()
                .map(|e| e.into_price("t"))
                .collect()
        };
        let (from_csv, from_json) = (read(csv), read(json));
        assert_eq!(from_csv, from_json);
        assert_eq!(
            from_csv[0].input_per_million,
            Decimal::from_str("1.25").unwrap()
        );
        assert_eq!(
            from_csv[0].cached_input_per_million,
            Some(Decimal::from_str("0.31").unwrap())
        );
        assert_eq!(from_csv[0].thinking_per_million, None);
        assert_eq!(from_csv[1].provider, None);
        assert_eq!(from_csv[1].effective_from, None);
    }

    #[test]
    fn an_unknown_or_missing_field_is_refused() {
        assert!(parse(r#"[{"model": "m", "inputPerMillionUsd": 1}]"#).is_err());
        assert!(parse("model,input,outputPerMillionUsd\nm,1,2\n").is_err());
    }
}
