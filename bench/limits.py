"""What shared rate limits cost: model calls through AnthropicProvider, limits on and off.

The calls go to the fake Messages endpoint in the process (the real SDK and wire
format, no network), so the figure is the provider's own work per call. With no limit
set the provider skips the limiter entirely; the second measure sets limits so high
that nothing ever waits, which is what checking them costs.
"""

from __future__ import annotations

import asyncio
import time

from bench._runner import Row, best_of_pair, micros
from reactor import AnthropicProvider, agent, reactive
from reactor.testing import FakeAnthropic, turn

CALLS = 500


async def _calls(count: int, *, limited: bool) -> float:
    fake = FakeAnthropic(brain=lambda body: turn("ok"))
    provider = AnthropicProvider(
        client=fake.client(),
        max_retries=0,
        max_concurrency=1_000_000 if limited else None,
        requests_per_minute=1e12 if limited else None,
        rate_limit_url="",
    )
    graph = reactive(agents={"w": agent(prompt="Go.")})
    start = time.perf_counter()
    for _ in range(count):
        await graph.run(provider=provider)
    elapsed = time.perf_counter() - start
    await fake.aclose()
    return elapsed


def run(runs: int, scale: float) -> list[Row]:
    count = max(100, int(CALLS * scale))
    free, limited = best_of_pair(
        runs,
        lambda: asyncio.run(_calls(count, limited=False)),
        lambda: asyncio.run(_calls(count, limited=True)),
    )
    return [
        Row(
            workload=f"rate limits: {count:,} model calls through AnthropicProvider (fake "
            "endpoint, real SDK), limits set but never reached",
            ours=f"{micros(limited / count)} per call",
            baseline=f"{micros(free / count)} per call (no limit set: the limiter is skipped)",
            ratio=limited / free,
            ratio_text=f"+{micros((limited - free) / count)} per call",
            target="report",
            met=None,
        )
    ]
