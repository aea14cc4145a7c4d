"""What Claude models cost, so that a provider can report ``cost_usd`` for each call.

:data:`model_prices` is the built-in table, keyed by model id. Prices change more often
than this library is released, so both ways of correcting it are supported:

* per provider: ``AnthropicProvider(prices={"claude-sonnet-5-5": ModelPrice(2, 10)})``;
* for the whole process: ``reactor.model_prices["my-model"] = ModelPrice(1, 5)``
  (every provider looks the table up at each call, so this also reaches providers that
  already exist).

A model in neither place has no known price: its calls report ``cost_usd=None``
rather than a guess.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

from reactor._providers.base import Usage

__all__ = ["DEFAULT_MODEL", "ModelPrice", "model_prices", "price_of"]

DEFAULT_MODEL = "claude-sonnet-5-5"
"""The newest Sonnet the installed SDK knows: Anthropic's balance of speed and quality."""


@dataclasses.dataclass(frozen=True, slots=True)
class ModelPrice:
    """What a model costs, in USD per million tokens.

    ``ModelPrice(2, 10)`` reads "$2 per million input tokens, $10 per million output
    tokens"; prompt-cache tokens are priced as multiples of the input price, as
    Anthropic's price list does.

    Attributes:
        input: USD per million uncached input tokens.
        output: USD per million output tokens (thinking tokens are output tokens).
        cache_write: Multiple of ``input`` paid for tokens written to the prompt cache.
            1.25 is the 5-minute cache, the one ``cache_system=True`` uses (a 1-hour
            cache write costs 2x, which this table does not track separately).
        cache_read: Multiple of ``input`` paid for tokens read from the prompt cache.
        long_prompt: ``(threshold, price)`` for models whose whole request is billed at
            a higher rate when its prompt (input plus cache tokens) is over
            ``threshold`` tokens.
    """

    input: float
    output: float
    cache_write: float = 1.25
    cache_read: float = 0.1
    long_prompt: tuple[int, ModelPrice] | None = None

    def cost(self, usage: Usage) -> float:
        """The price in USD of one request's ``usage``."""
        if self.long_prompt is not None:
            threshold, price = self.long_prompt
            prompt = (
                usage.input_tokens
                + usage.cache_creation_input_tokens
                + usage.cache_read_input_tokens
            )
            if prompt > threshold:
                return price.cost(usage)
        per_million = (
            usage.input_tokens * self.input
            + usage.cache_creation_input_tokens * self.input * self.cache_write
            + usage.cache_read_input_tokens * self.input * self.cache_read
            + usage.output_tokens * self.output
        )
        return per_million / 1_000_000


def _family(input: float, output: float, cache_read: float = 0.1) -> ModelPrice:
    return ModelPrice(input, output, cache_write=1.25, cache_read=cache_read)


_OPUS = _family(5, 25)
_SONNET_4 = _family(3, 15)
_HAIKU_4 = _family(1, 5)
_FABLE_5_2 = _family(8, 40, cache_read=0.025)
_FABLE_5_1 = _family(10, 50, cache_read=0.025)
_FABLE_5 = _family(10, 50)

# Anthropic's list prices for the Claude API (platform.claude.com/docs/en/about-claude/
# pricing and each model's overview page), checked November 2026. Batch, fast-mode,
# regional (inference_geo) and partner-cloud prices differ and are not modelled.
# claude-mythos-preview is left out: its price was not published where we could check
# it, and it is deprecated.
model_prices: dict[str, ModelPrice] = {
    "claude-fable-5-2": _FABLE_5_2,
    "claude-mythos-5-2": _FABLE_5_2,
    "claude-fable-5-1": _FABLE_5_1,
    "claude-mythos-5-1": _FABLE_5_1,
    "claude-fable-5": _FABLE_5,
    "claude-mythos-5": _FABLE_5,
    "claude-opus-5-5": _family(4, 20, cache_read=0.05),
    "claude-opus-5": _OPUS,
    "claude-opus-4-8": _OPUS,
    "claude-opus-4-7": _OPUS,
    "claude-opus-4-6": _OPUS,
    "claude-opus-4-5": _OPUS,
    # Sonnet 5.5 cache reads went from $0.20 to $0.10 per million on 2026-10-07.
    "claude-sonnet-5-5": _family(2, 10, cache_read=0.05),
    "claude-sonnet-5": _family(2, 10),
    "claude-sonnet-4-6": _SONNET_4,
    "claude-sonnet-4-5": _SONNET_4,
    # Haiku 5.5 bills a whole request at the higher rate when its prompt is over 100K.
    "claude-haiku-5-5": ModelPrice(0.10, 0.50, long_prompt=(100_000, ModelPrice(0.50, 2.50))),
    "claude-haiku-4-5": _HAIKU_4,
}
"""USD prices per model id; edit it to change the defaults of every provider."""

_SNAPSHOT = re.compile(r"-\d{8}$")


def price_of(
    model: str | None, overrides: Mapping[str, ModelPrice] | None = None
) -> ModelPrice | None:
    """The price of ``model``: from ``overrides``, else :data:`model_prices`.

    A dated snapshot id (``claude-haiku-4-5-20251001``) falls back to its alias's price.
    """
    if model is None:
        return None
    for name in (model, _SNAPSHOT.sub("", model)):
        for table in (overrides or {}, model_prices):
            if name in table:
                return table[name]
    return None
