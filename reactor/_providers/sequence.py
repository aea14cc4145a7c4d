"""Replaying concurrent work in its recorded order.

A replay answers providers from the log at once, but the agents of a run are
concurrent: if a recorded model answer came after a handler finished (the handler was
faster than the model then), replaying the answer at once would reverse them, and a
join through the state would see another state. The :class:`Sequencer` holds each
*step* (an event of a provider call, or a handler activation finishing) until every step
recorded before it has been replayed, so the replay keeps the recorded order.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable

from reactor._signals.diagnostics import log

__all__ = ["Sequencer", "Step"]


@dataclasses.dataclass(eq=False)
class Step:
    """One recorded step, by the ``seq`` of its signal."""

    seq: int
    rank: int = 0  # position among all steps, by seq
    done: bool = False


class Sequencer:
    """Lets steps go in their recorded order.

    Args:
        steps: Every step to order (their ``rank`` is set here).
        timeout: How long a step waits for earlier ones (a replay that diverged never
            brings them); ``0`` lets every step go at once.
    """

    def __init__(self, steps: Iterable[Step], timeout: float) -> None:
        self.steps = sorted(steps, key=lambda step: step.seq)
        for rank, step in enumerate(self.steps):
            step.rank = rank
        self.timeout = timeout
        self.frontier = 0  # rank of the first step not replayed yet
        self._waiting: dict[int, list[asyncio.Future[None]]] = {}

    async def wait(self, step: Step, agent: str) -> None:
        """Wait until every step recorded before ``step`` is done."""
        if self.timeout <= 0 or self.frontier >= step.rank:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(step.rank, []).append(waiter)
        try:
            await asyncio.wait_for(waiter, self.timeout)
        except TimeoutError:
            log(
                "reactor.replay",
                "warning",
                "replay order not reproduced",
                agent=agent,
                hint="the run diverged from the recording; work recorded earlier never came",
            )
            for earlier in self.steps[: step.rank]:
                earlier.done = True
            self._advance()

    def done(self, step: Step) -> None:
        """Mark ``step`` replayed, letting the next ones go."""
        step.done = True
        self._advance()

    def _advance(self) -> None:
        steps = self.steps
        while self.frontier < len(steps) and steps[self.frontier].done:
            self.frontier += 1
        for rank in [r for r in self._waiting if r <= self.frontier]:
            for waiter in self._waiting.pop(rank):
                if not waiter.done():
                    waiter.set_result(None)
