from __future__ import annotations

import pytest

from reactor import ModelPrice, Usage, model_prices
from reactor._providers.pricing import price_of


def test_cost_prices_each_kind_of_token() -> None:
    price = ModelPrice(2, 10, cache_write=1.25, cache_read=0.1)
    usage = Usage(
        input_tokens=1_000,
        output_tokens=100,
        cache_creation_input_tokens=4_000,
        cache_read_input_tokens=10_000,
    )
    # 1000 x $2 + 4000 x $2.50 + 10000 x $0.20 + 100 x $10, per million
    assert price.cost(usage) == pytest.approx((2_000 + 10_000 + 2_000 + 1_000) / 1e6)


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        pytest.param(Usage(100_000, 1_000), (100_000 * 0.1 + 1_000 * 0.5) / 1e6, id="at-threshold"),
        pytest.param(Usage(100_001, 1_000), (100_001 * 0.5 + 1_000 * 2.5) / 1e6, id="over"),
        pytest.param(
            Usage(50_000, 1_000, cache_read_input_tokens=60_000),
            (50_000 * 0.5 + 60_000 * 0.05 + 1_000 * 2.5) / 1e6,
            id="cache-reads-count-toward-the-prompt",
        ),
    ],
)
def test_a_long_prompt_bills_the_whole_request_at_the_higher_rate(
    usage: Usage, expected: float
) -> None:
    assert model_prices["claude-haiku-5-5"].cost(usage) == pytest.approx(expected)


def test_a_dated_snapshot_is_priced_like_its_alias() -> None:
    assert price_of("claude-haiku-4-5-20251001") == model_prices["claude-haiku-4-5"]


def test_overrides_win_over_the_table() -> None:
    mine = ModelPrice(1, 1)
    assert price_of("claude-sonnet-5-5", {"claude-sonnet-5-5": mine}) is mine


def test_an_unknown_model_has_no_price() -> None:
    assert price_of("gpt-unknown") is None
    assert price_of(None) is None
