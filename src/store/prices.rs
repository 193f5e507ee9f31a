//! The price list (`model_prices`, migration 0070): prices set, read, and found for an LLM
//! interaction at its time. A price is never changed or removed: a new one takes effect from a
//! later instant, and each interaction keeps the price it was computed with.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use sqlx::{FromRow, PgConnection};

use super::Store;
use super::audit::{self, Origin};
use super::traced::traced;
use super::write::{check_amount, check_name, check_time};
use crate::error::{Error, Result};
use crate::pricing::{MAX_PRICE, PRICE_SCALE, PricingSnapshot};

/// A price of the list.
#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct ModelPriceRow {
    pub id: i64,
    pub model_name: String,
    /// `None`: any provider.
    pub provider: Option<String>,
    pub effective_from: DateTime<Utc>,
    pub input_per_million: Decimal,
    pub output_per_million: Decimal,
    pub cached_input_per_million: Option<Decimal>,
    pub thinking_per_million: Option<Decimal>,
    pub created_at: DateTime<Utc>,
    pub created_by: Option<String>,
}

const COLUMNS: &str = "id, model_name, provider, effective_from, input_per_million, \
                       output_per_million, cached_input_per_million, thinking_per_million, \
                       created_at, created_by";

impl ModelPriceRow {
    /// The price as applied to an interaction: cached input at the input price and thinking
    /// at the output price unless they have their own.
    pub fn snapshot(&self) -> PricingSnapshot {
        PricingSnapshot {
            model: self.model_name.clone(),
            provider: self.provider.clone(),
            effective_from: self.effective_from,
            input_per_million: self.input_per_million.normalize(),
            output_per_million: self.output_per_million.normalize(),
            cached_input_per_million: self
                .cached_input_per_million
                .unwrap_or(self.input_per_million)
                .normalize(),
            thinking_per_million: self
                .thinking_per_million
                .unwrap_or(self.output_per_million)
                .normalize(),
        }
    }

    /// Whether it sets the same prices as `new` (however many trailing zeros either has).
    fn same_prices(&self, new: &NewPrice) -> bool {
        self.input_per_million == new.input_per_million
            && self.output_per_million == new.output_per_million
            && self.cached_input_per_million == new.cached_input_per_million
            && self.thinking_per_million == new.thinking_per_million
    }
}

/// A price to set, as `setModelPrice` and `casefile prices import` take it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPrice {
    pub model_name: String,
    pub provider: Option<String>,
    /// Default: now.
    pub effective_from: Option<DateTime<Utc>>,
    pub input_per_million: Decimal,
    pub output_per_million: Decimal,
    pub cached_input_per_million: Option<Decimal>,
    pub thinking_per_million: Option<Decimal>,
    pub created_by: Option<String>,
}

/// A price in US dollars per million tokens: 0 to [`MAX_PRICE`], at most [`PRICE_SCALE`]
/// decimal places (more would be rounded by the column, silently).
fn check_price(field: &str, value: Decimal) -> Result<()> {
    check_amount(field, value, MAX_PRICE, " US dollars per million tokens")?;
    if value.normalize().scale() > PRICE_SCALE {
        return Err(Error::bad_input(format!(
            "`{field}` has more than {PRICE_SCALE} decimal places: {value}"
        )));
    }
    Ok(())
}

impl NewPrice {
    pub(crate) fn check(&self) -> Result<()> {
        check_name("model", &self.model_name)?;
        if let Some(provider) = &self.provider {
            check_name("provider", provider)?;
        }
        if let Some(at) = self.effective_from {
            check_time("effectiveFrom", at)?;
        }
        check_price("inputPerMillionUsd", self.input_per_million)?;
        check_price("outputPerMillionUsd", self.output_per_million)?;
        if let Some(price) = self.cached_input_per_million {
            check_price("cachedInputPerMillionUsd", price)?;
        }
        if let Some(price) = self.thinking_per_million {
            check_price("thinkingPerMillionUsd", price)?;
        }
        Ok(())
    }
}

/// What setting a price did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PriceSet {
    /// A new price, from its instant on.
    Added(ModelPriceRow),
    /// The price in effect from that instant was already this one: nothing was written.
    Unchanged(ModelPriceRow),
}

impl PriceSet {
    pub fn row(self) -> ModelPriceRow {
        match self {
            PriceSet::Added(row) | PriceSet::Unchanged(row) => row,
        }
    }
}

/// Sets a price in the caller's transaction. Setting the price already in effect from that
/// instant (a retry, an import run again) writes nothing; another price at the very instant of
/// one already set for the model and provider is a CONFLICT: prices never change.
/// A price added is audited (`origin`).
pub async fn set_price(
    conn: &mut PgConnection,
    new: &NewPrice,
    origin: &Origin,
) -> Result<PriceSet> {
    new.check()?;
    let in_effect: Option<ModelPriceRow> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM model_prices \
         WHERE model_name = $1 AND provider IS NOT DISTINCT FROM $2 \
           AND effective_from <= coalesce($3, now()) \
         ORDER BY effective_from DESC LIMIT 1"
    ))
    .bind(&new.model_name)
    .bind(&new.provider)
    .bind(new.effective_from)
    .fetch_optional(traced(&mut *conn))
    .await?;
    if let Some(row) = in_effect.filter(|row| row.same_prices(new)) {
        return Ok(PriceSet::Unchanged(row));
    }
    let added: Option<ModelPriceRow> = sqlx::query_as(&format!(
        "INSERT INTO model_prices (model_name, provider, effective_from, input_per_million, \
            output_per_million, cached_input_per_million, thinking_per_million, created_by) \
         VALUES ($1, $2, coalesce($3, now()), $4, $5, $6, $7, $8) \
         ON CONFLICT ON CONSTRAINT model_prices_key DO NOTHING RETURNING {COLUMNS}"
    ))
    .bind(&new.model_name)
    .bind(&new.provider)
    .bind(new.effective_from)
    .bind(new.input_per_million)
    .bind(new.output_per_million)
    .bind(new.cached_input_per_million)
    .bind(new.thinking_per_million)
    .bind(&new.created_by)
    .fetch_optional(traced(&mut *conn))
    .await?;
    if let Some(row) = added {
        audit::record(conn, origin, &audit::created(&row)).await?;
        return Ok(PriceSet::Added(row));
    }
    // Another price has this very instant: set just now by a concurrent request (then the
    // same), or long ago with other prices.
    let taken: ModelPriceRow = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM model_prices \
         WHERE model_name = $1 AND provider IS NOT DISTINCT FROM $2 \
           AND effective_from = coalesce($3, now())"
    ))
    .bind(&new.model_name)
    .bind(&new.provider)
    .bind(new.effective_from)
    .fetch_one(traced(conn))
    .await?;
    if taken.same_prices(new) {
        return Ok(PriceSet::Unchanged(taken));
    }
    let provider = new
        .provider
        .as_deref()
        .map_or("any provider".to_owned(), |p| format!("provider `{p}`"));
    Err(Error::Conflict(format!(
        "model `{}` ({provider}) already has other prices from {}: a price never changes; set \
         the new one from a later instant",
        new.model_name, taken.effective_from
    )))
}

/// An interaction's time in SQL, from the time the client gave (parameter `param`, may be
/// NULL): that time, or now (the transaction's) when none was given or it is later, so that a
/// client's clock ahead of the database's never records a call in the future.
pub(crate) fn interaction_time(param: usize) -> String {
    format!("least(coalesce(${param}::timestamptz, now()), now())")
}

/// The prices of an interaction's model in effect at its time, as found once per transaction
/// for each model, provider and time: a batch of many calls to one model probes the list once.
#[derive(Debug, Default)]
pub struct PriceCache(HashMap<PriceKey, Option<PricingSnapshot>>);

/// What a price is looked up by: model, provider, and the call's time (`None`: now).
type PriceKey = (String, Option<String>, Option<DateTime<Utc>>);

impl PriceCache {
    /// The price of `model` for `provider` in effect at `at` (`None`: now, the transaction's
    /// time): the provider's own price, else the model's price for any provider; `None` when
    /// the model has neither.
    pub(crate) async fn in_effect(
        &mut self,
        conn: &mut PgConnection,
        model: &str,
        provider: Option<&str>,
        at: Option<DateTime<Utc>>,
    ) -> Result<Option<PricingSnapshot>> {
        let key = (model.to_owned(), provider.map(str::to_owned), at);
        if let Some(found) = self.0.get(&key) {
            return Ok(found.clone());
        }
        // Two probes of the key's index, each backwards from the instant; the provider's own
        // price first.
        let at_sql = interaction_time(3);
        let row: Option<ModelPriceRow> = sqlx::query_as(&format!(
            "SELECT {COLUMNS} FROM ( \
               (SELECT {COLUMNS}, 0 AS rank FROM model_prices \
                WHERE model_name = $1 AND provider = $2 AND effective_from <= {at_sql} \
                ORDER BY effective_from DESC LIMIT 1) \
               UNION ALL \
               (SELECT {COLUMNS}, 1 FROM model_prices \
                WHERE model_name = $1 AND provider IS NULL AND effective_from <= {at_sql} \
                ORDER BY effective_from DESC LIMIT 1)) p \
             ORDER BY rank LIMIT 1"
        ))
        .bind(model)
        .bind(provider)
        .bind(at)
        .fetch_optional(traced(conn))
        .await?;
        let found = row.map(|r| r.snapshot());
        self.0.insert(key, found.clone());
        Ok(found)
    }
}

impl Store {
    /// The price of each model and provider in effect at `at` (default: now), by model, then
    /// provider (any provider first); only `model`'s when given; at most `limit`.
    pub async fn prices_in_effect(
        &self,
        at: Option<DateTime<Utc>>,
        model: Option<&str>,
        limit: i64,
    ) -> Result<Vec<ModelPriceRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT DISTINCT ON (model_name, provider) {COLUMNS} FROM model_prices \
             WHERE effective_from <= coalesce($1, now()) AND ($2::text IS NULL OR model_name = $2) \
             ORDER BY model_name, provider NULLS FIRST, effective_from DESC LIMIT $3"
        ))
        .bind(at)
        .bind(model)
        .bind(limit)
        .fetch_all(self.reader().await?.traced())
        .await?)
    }
}
