//! The price list as GraphQL: prices set (`ModelPrice`) and the price an interaction's cost was
//! computed with (`PricingSnapshot`). Money is a `Decimal`: a string in JSON, exact.

use async_graphql::Object;
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

use crate::api::scalars::Text;
use crate::pricing::PricingSnapshot;
use crate::store::prices::ModelPriceRow;

/// An amount of US dollars as served: exact, without the trailing zeros of its column's ten
/// places ("0.0125", not "0.0125000000").
pub(crate) fn usd(amount: Decimal) -> Decimal {
    amount.normalize()
}

pub struct ModelPrice(pub ModelPriceRow);

/// A price of the list: what a model costs, in US dollars per million tokens, from
/// `effectiveFrom` until the next price of the same model and provider. Never changes.
#[Object]
impl ModelPrice {
    /// The model, as LLM interactions name it (`modelName`, matched exactly).
    async fn model(&self) -> Text<'_> {
        Text(&self.0.model_name)
    }
    /// The provider it applies to (as agent executions name it, `llmProvider`); null: any
    /// provider without a price of its own for the model.
    async fn provider(&self) -> Option<Text<'_>> {
        self.0.provider.as_deref().map(Text)
    }
    /// From when it applies (to calls at or after this instant).
    async fn effective_from(&self) -> DateTime<Utc> {
        self.0.effective_from
    }
    /// Per million input tokens that were not read from a cache.
    async fn input_per_million_usd(&self) -> Decimal {
        usd(self.0.input_per_million)
    }
    /// Per million output tokens that were not thinking.
    async fn output_per_million_usd(&self) -> Decimal {
        usd(self.0.output_per_million)
    }
    /// Per million cached input tokens; null: the input price.
    async fn cached_input_per_million_usd(&self) -> Option<Decimal> {
        self.0.cached_input_per_million.map(usd)
    }
    /// Per million thinking tokens; null: the output price.
    async fn thinking_per_million_usd(&self) -> Option<Decimal> {
        self.0.thinking_per_million.map(usd)
    }
    /// When it was set.
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    /// Who set it (`cli:` and the system user for `casefile prices import`; null without authentication).
    async fn created_by(&self) -> Option<Text<'_>> {
        self.0.created_by.as_deref().map(Text)
    }
}

pub struct Pricing(pub PricingSnapshot);

/// The price an LLM interaction's cost was computed with, as it was then (later prices never
/// change it), each rate resolved: in US dollars per million tokens.
#[Object(name = "PricingSnapshot")]
impl Pricing {
    /// The model priced.
    async fn model(&self) -> Text<'_> {
        Text(&self.0.model)
    }
    /// The provider the price was set for; null: the model's price for any provider.
    async fn provider(&self) -> Option<Text<'_>> {
        self.0.provider.as_deref().map(Text)
    }
    /// From when that price applied.
    async fn effective_from(&self) -> DateTime<Utc> {
        self.0.effective_from
    }
    /// Per million input tokens not read from a cache.
    async fn input_per_million_usd(&self) -> Decimal {
        usd(self.0.input_per_million)
    }
    /// Per million output tokens that were not thinking.
    async fn output_per_million_usd(&self) -> Decimal {
        usd(self.0.output_per_million)
    }
    /// Per million cached input tokens.
    async fn cached_input_per_million_usd(&self) -> Decimal {
        usd(self.0.cached_input_per_million)
    }
    /// Per million thinking tokens.
    async fn thinking_per_million_usd(&self) -> Decimal {
        usd(self.0.thinking_per_million)
    }
}
