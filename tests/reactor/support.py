"""Providers the tests of the runtime use to see cancellation, a poll of a condition, and
a long-running graph."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from reactor import (
    AgentContext,
    End,
    Provider,
    ProviderRequest,
    Reactive,
    TextDelta,
    agent,
    reactive,
)


class SlowProvider(Provider):
    """Answers after `delay` seconds and records whether it saw its cancellation."""

    model = "slow-model"

    def __init__(self, delay: float, answer: str = "late") -> None:
        self.delay = delay
        self.answer = answer
        self.started: list[str] = []
        self.cancelled: list[str] = []

    async def stream(self, request: ProviderRequest) -> AsyncIterator[TextDelta | End]:
        self.started.append(request.agent)
        try:
            await asyncio.sleep(self.delay)
        except asyncio.CancelledError:
            self.cancelled.append(request.agent)
            raise
        yield TextDelta(self.answer)
        yield End(output=self.answer)


async def until(check: Callable[[], bool]) -> None:
    """Poll `check` until it holds; the 60 s deadline only bounds a hang."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition never held")


def ticking(ticks: int) -> Reactive:
    """A ticker emits ``ticks`` ticks; a counter folds each into the state (4 signals a tick)."""

    async def ticker(ctx: AgentContext[Any]) -> None:
        for i in range(ticks):
            ctx.emit("tick", i)

    async def count(ctx: AgentContext[Any]) -> int:
        return int(ctx.state.n) + 1

    return reactive(
        {
            "ticker": agent(run=ticker, activate_on="harness:start", emits=["tick"]),
            "count": agent(run=count, activate_on="tick", updates="n", concurrency="serial"),
        },
        state={"n": 0},
        name="ticking",
    )
