"""Replaying concurrent work in its recorded order, signal for signal.

A replay answers providers from the log at once, but the agents of a run are
concurrent: if the replay let each recorded answer go as soon as it was asked for,
one agent would stream its whole answer before the next agent even started, where
the recording interleaved them (their latencies overlapped), and a handler that
finished before a model answered would finish after it. The :class:`Sequencer`
holds each *step* (an event of a provider call, a tool result, a handler activation
finishing) until the replayed run has emitted every signal recorded before it: a
step waits for the bus to reach the ``seq`` recorded just before it. Everything
between steps is the run's own deterministic work (dispatch, activations starting,
``provider:start``), which fills the gaps in the same order as when it was recorded,
so the replayed log equals the recording signal for signal.
"""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
from collections.abc import Callable
from typing import Any

from reactor._signals.diagnostics import log

__all__ = ["Sequencer", "Step"]


@dataclasses.dataclass(eq=False)
class Step:
    """One recorded step: it goes once the replay has emitted signal ``after``.

    Attributes:
        seq: The ``seq`` of the signal the step emits (for a handler, of its
            ``completed``).
        after: The ``seq`` that must be emitted first (by default ``seq - 1``).
    """

    seq: int
    after: int = -1

    def __post_init__(self) -> None:
        if self.after < 0:
            self.after = self.seq - 1


class Sequencer:
    """Lets steps go in their recorded order, watching the replayed run's ``seq``.

    Args:
        timeout: How long a step waits for the signals recorded before it (a replay
            that diverged never brings them); ``0`` lets every step go at once. After
            a timeout the replay has diverged, and no step waits any more.
    """

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.diverged = False
        self._last_seq: Callable[[], int] | None = None
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._count = 0

    def follow(self, last_seq: Callable[[], int]) -> Callable[[Any], None]:
        """Watch a run: ``last_seq`` reads its bus; subscribe the returned handler to ``**``.

        Following a new run forgets the previous one (a replay provider may be reused).
        """
        self._last_seq = last_seq
        self.diverged = False
        self._wake_all()
        return self._emitted

    async def wait(self, step: Step, agent: str) -> None:
        """Wait until the replayed run has emitted the signal recorded before ``step``."""
        waiter = self.ahead(step.after)
        if waiter is None:
            return
        try:
            async with asyncio.timeout(self.timeout):
                await waiter
        except TimeoutError:
            self._diverge(agent)

    def ahead(self, after: int, agent: str = "") -> asyncio.Future[None] | None:
        """A future done once the replayed run has emitted signal ``after``; None if it has.

        What a step that cannot ``await`` (an activation between two of its steps, a
        handler's thread before it emits) waits on. Past the timeout the replay has
        diverged: the future is done, and nothing waits any more.
        """
        last_seq = self._last_seq
        if self.timeout <= 0 or self.diverged or last_seq is None or last_seq() >= after:
            return None
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        self._count += 1
        heapq.heappush(self._waiting, (after, self._count, waiter))
        late = loop.call_later(self.timeout, self._late, waiter, agent)
        waiter.add_done_callback(lambda _: late.cancel())
        return waiter

    def _late(self, waiter: asyncio.Future[None], agent: str) -> None:
        if not waiter.done():
            self._diverge(agent)

    def _diverge(self, agent: str) -> None:
        if not self.diverged:
            self.diverged = True
            log(
                "reactor.replay",
                "warning",
                "replay order not reproduced",
                agent=agent,
                hint="the run diverged from the recording; work recorded earlier never came",
            )
        self._wake_all()

    def _emitted(self, _: Any) -> None:
        waiting, last_seq = self._waiting, self._last_seq
        if not waiting or last_seq is None:
            return
        reached = last_seq()
        while waiting and waiting[0][0] <= reached:
            _, _, waiter = heapq.heappop(waiting)
            if not waiter.done():
                waiter.set_result(None)

    def _wake_all(self) -> None:
        while self._waiting:
            _, _, waiter = heapq.heappop(self._waiting)
            if not waiter.done():
                waiter.set_result(None)
