//! What an LLM call costs: its token counts at a model's prices (US dollars per million tokens),
//! in exact decimals from the price list to the sums. The live writer prices each interaction
//! as it is recorded (`store::write::interactions`), the demo prices its own calls the same way.
//!
//! What the counts mean (providers report them differently; counting a token twice would
//! overcharge it):
//! - cached input tokens are part of the input tokens (OpenAI's `cached_tokens`, Gemini's
//!   `cached_content_token_count`; add Anthropic's `cache_read_input_tokens` to its
//!   `input_tokens`);
//! - thinking tokens are part of the output tokens (OpenAI's `reasoning_tokens`, Anthropic's
//!   thinking; add Gemini's `thoughts_token_count` to its `candidates_token_count`).

use chrono::{DateTime, Utc};
use rust_decimal::{Decimal, RoundingStrategy};
use serde::{Deserialize, Serialize};

/// Decimal places a cost keeps, as its columns do (a ten-billionth of a dollar).
pub const COST_SCALE: u32 = 10;
/// Decimal places a price may have (its columns' scale).
pub const PRICE_SCALE: u32 = 10;
/// The highest price per million tokens accepted, in dollars (real prices are far below; the
/// bound keeps every product of a price and a token count exact in a `Decimal`).
pub const MAX_PRICE: i64 = 1_000_000;

/// The price applied to one interaction: the price list's row (model, provider, from when), with
/// each rate resolved. Stored with the interaction (`pricing_snapshot`: JSON, decimals as
/// strings), so its cost is explained by what it was computed with after the list changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PricingSnapshot {
    pub model: String,
    /// `None`: the model's price for any provider.
    pub provider: Option<String>,
    pub effective_from: DateTime<Utc>,
    pub input_per_million: Decimal,
    pub output_per_million: Decimal,
    /// The input price when the list sets no price of its own for cached input.
    pub cached_input_per_million: Decimal,
    /// The output price when the list sets no price of its own for thinking.
    pub thinking_per_million: Decimal,
}

/// The token counts a cost is computed from (see the module's notes on what they include).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input: Option<i32>,
    pub cached_input: Option<i32>,
    pub output: Option<i32>,
    pub thinking: Option<i32>,
}

impl Usage {
    /// Whether there is anything to price: neither input nor output was counted.
    pub fn is_unknown(&self) -> bool {
        self.input.is_none() && self.output.is_none()
    }
}

/// A computed cost: each part rounded to [`COST_SCALE`] places, the total their exact sum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cost {
    pub input: Decimal,
    pub output: Decimal,
    pub total: Decimal,
}

impl PricingSnapshot {
    /// What `usage` costs at these prices. A count not given is 0 tokens; a part of a count
    /// larger than the count (refused on input) is taken as all of it.
    pub fn cost(&self, usage: Usage) -> Cost {
        let count = |n: Option<i32>| i64::from(n.unwrap_or(0).max(0));
        let (input, output) = (count(usage.input), count(usage.output));
        let cached = count(usage.cached_input).min(input);
        let thinking = count(usage.thinking).min(output);
        let side = |plain: i64, plain_price: Decimal, part: i64, part_price: Decimal| {
            let micros = Decimal::from(plain) * plain_price + Decimal::from(part) * part_price;
            // Exact: prices have at most 10 places and are at most 10^6, counts below 2^31, so
            // the sum has at most 27 digits and dividing by 10^6 only moves the point.
            (micros / Decimal::from(1_000_000))
                .round_dp_with_strategy(COST_SCALE, RoundingStrategy::MidpointAwayFromZero)
        };
        let input = side(
            input - cached,
            self.input_per_million,
            cached,
            self.cached_input_per_million,
        );
        let output = side(
            output - thinking,
            self.output_per_million,
            thinking,
            self.thinking_per_million,
        );
        Cost {
            input,
            output,
            total: input + output,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn usd(text: &str) -> Decimal {
        Decimal::from_str(text).unwrap()
    }

    fn price() -> PricingSnapshot {
        PricingSnapshot {
            model: "m".into(),
            provider: None,
            effective_from: DateTime::UNIX_EPOCH,
            input_per_million: usd("1.25"),
            output_per_million: usd("10"),
            cached_input_per_million: usd("0.3125"),
            thinking_per_million: usd("10"),
        }
    }

    #[test]
    fn cached_input_and_thinking_are_parts_of_their_counts() {
        let usage = Usage {
            input: Some(10_000),
            cached_input: Some(4_000),
            output: Some(3_000),
            thinking: Some(2_000),
        };
        let cost = price().cost(usage);
        // 6,000 × 1.25 + 4,000 × 0.3125 = 8,750 micro-dollars; 3,000 × 10 = 30,000.
        assert_eq!(cost.input, usd("0.00875"));
        assert_eq!(cost.output, usd("0.03"));
        assert_eq!(cost.total, usd("0.03875"));
    }

    #[test]
    fn costs_are_exact_and_rounded_half_away_from_zero_at_ten_places() {
        let mut p = price();
        let one_token = Usage {
            input: Some(1),
            ..Usage::default()
        };
        // 5 × 10^-11 dollars: half of the last place kept, so up; 4 × 10^-11, down.
        p.input_per_million = usd("0.00005");
        assert_eq!(p.cost(one_token).input, usd("0.0000000001"));
        p.input_per_million = usd("0.00004");
        assert_eq!(p.cost(one_token).input, Decimal::ZERO);
        p.input_per_million = usd("0.15");
        let cost = p.cost(Usage {
            input: Some(1),
            output: Some(i32::MAX),
            ..Usage::default()
        });
        assert_eq!(cost.input, usd("0.00000015"));
        assert_eq!(cost.output, usd("21474.83647"));
        assert_eq!(cost.total.to_string(), "21474.83647015");
        // Where floats add 0.1 and 0.2 to 0.30000000000000004.
        p.input_per_million = usd("0.1");
        p.output_per_million = usd("0.2");
        let million = Some(1_000_000);
        let cost = p.cost(Usage {
            input: million,
            output: million,
            ..Usage::default()
        });
        assert_eq!(cost.total.to_string(), "0.3");
    }

    #[test]
    fn the_largest_price_and_counts_do_not_overflow() {
        let max = Decimal::from(MAX_PRICE);
        let p = PricingSnapshot {
            input_per_million: max,
            output_per_million: max,
            cached_input_per_million: max,
            thinking_per_million: max,
            ..price()
        };
        let all = Some(i32::MAX);
        let cost = p.cost(Usage {
            input: all,
            cached_input: all,
            output: all,
            thinking: all,
        });
        assert_eq!(cost.total, Decimal::from(2 * i64::from(i32::MAX)));
    }
}
