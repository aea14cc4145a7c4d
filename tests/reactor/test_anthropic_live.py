"""One real call to the Anthropic API; opt in by setting ANTHROPIC_API_KEY."""

from __future__ import annotations

import os

import pytest

from reactor import AnthropicProvider, agent, run_reactive

pytestmark = pytest.mark.skipif(
    not os.environ.get("ANTHROPIC_API_KEY"),
    reason="live API test: set ANTHROPIC_API_KEY to run it (it makes one small, paid call)",
)


async def test_a_tiny_prompt_runs_on_the_real_api() -> None:
    provider = AnthropicProvider("claude-haiku-5-5", max_tokens=2048, max_retries=2)
    try:
        result = await run_reactive(
            agent(name="echo", prompt="Reply with the single word: pong"),
            provider=provider,
            timeout=60,
        )
    finally:
        await provider.aclose()
    assert result.status == "completed", result.error
    assert "pong" in result.output.lower()
    (end,) = result.select("provider:end")
    assert end.payload["usage"]["input_tokens"] > 0
    assert end.payload["cost_usd"] > 0
