-- The price list: what each model costs per million tokens, from an instant on. A price is
-- never changed or removed (a change is a new row from a later instant), so every cost computed
-- from it can be traced to the row it used, and the list says what was in effect at any time.
-- Reference data: small, read on every LLM interaction's write.
CREATE TABLE model_prices (
    id                        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    model_name                text NOT NULL CHECK (length(model_name) BETWEEN 1 AND 200),
    -- NULL: any provider (used when the execution's provider has no price of its own).
    provider                  text CHECK (length(provider) BETWEEN 1 AND 200),
    effective_from            timestamptz NOT NULL,
    -- US dollars per million tokens. Cached input tokens and thinking tokens without a price
    -- of their own cost the input and output prices.
    input_per_million         numeric(20, 10) NOT NULL
        CHECK (input_per_million BETWEEN 0 AND 1000000),
    output_per_million        numeric(20, 10) NOT NULL
        CHECK (output_per_million BETWEEN 0 AND 1000000),
    cached_input_per_million  numeric(20, 10)
        CHECK (cached_input_per_million BETWEEN 0 AND 1000000),
    thinking_per_million      numeric(20, 10)
        CHECK (thinking_per_million BETWEEN 0 AND 1000000),
    created_at                timestamptz NOT NULL DEFAULT now(),
    created_by                text,
    -- One price per model and provider at an instant; also the look-up's index (the latest
    -- price at or before an instant is one probe, backwards from it).
    CONSTRAINT model_prices_key UNIQUE NULLS NOT DISTINCT (model_name, provider, effective_from)
);
