from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from reactor import End, ProviderRequest, RunResult, TextDelta


def names(result: RunResult, *, deltas: bool = False) -> list[str]:
    """Signal names of a run, without text deltas unless asked."""
    return [
        s.name for s in result.signals if deltas or s.name not in ("text:delta", "thinking:delta")
    ]


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


@pytest.fixture
def slow_provider() -> SlowProvider:
    return SlowProvider(10.0)
