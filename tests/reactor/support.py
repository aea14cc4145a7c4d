"""Providers the tests of the runtime use to see cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

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
