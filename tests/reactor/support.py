"""Providers the tests of the runtime use to see cancellation, and a poll of a condition."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

from reactor import End, ProviderRequest, TextDelta


class SlowProvider:
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
