"""What the service keeps of the runs executing in its process: their feeds and their log.

* :class:`RunFeed` is a reporter of one run that keeps its signals, serialized once,
  and hands them to any number of watchers (Server-Sent Events, WebSockets): history
  first, then new signals in batches, until ``harness:end``.
"""

from __future__ import annotations

import asyncio
import bisect
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from reactor._recording.info import RunInfo
from reactor._signals.names import (
    HARNESS_END,
    SESSION_PROMPT,
    SESSION_REPLY,
    SESSION_TIMEOUT,
    TIMER_FIRED,
    TIMER_SET,
)
from reactor._signals.signal import Signal

__all__ = ["FeedItem", "RunFeed"]

_WAITS = frozenset((SESSION_PROMPT, SESSION_REPLY, SESSION_TIMEOUT, TIMER_SET, TIMER_FIRED))
_OPENS = {SESSION_PROMPT: "prompt_id", TIMER_SET: "timer_id"}

FeedItem = tuple[int, str, str]
"""One signal of a feed: its ``seq``, its name, and its JSON text."""

COALESCE = 0.05
"""Seconds a burst of signals is gathered for before watchers are woken: a signal after
a quiet spell goes out at once, the ones that follow it within this time go out
together (one wake-up and one write per watcher, not one per signal)."""


class RunFeed:
    """One live run's signals for its watchers (a reporter: give it to ``run(reporters=)``).

    The signals are kept once, in one list that every watcher reads from its own
    position; a watcher waits on one future shared by all of them, resolved at most
    every :data:`COALESCE` seconds while signals arrive. A slow watcher costs nothing
    to the others: it reads a longer stretch of the list when it comes back.
    """

    patterns = ("**",)

    def __init__(self) -> None:
        self.items: list[FeedItem] = []
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self.started: asyncio.Future[str] = self._loop.create_future()
        self.ended = False
        self.asking: set[Any] = set()  # prompts asked and not answered, timers not fired
        self._next: asyncio.Future[None] = self._loop.create_future()
        self._waking: asyncio.Handle | None = None
        self._woken = 0.0  # when watchers were last woken (loop time)
        self._watchers = 0

    @property
    def first_seq(self) -> int:
        """The first ``seq`` this feed saw (a resumed run's earlier signals are in the store)."""
        return self.items[0][0] if self.items else 0

    def start(self, info: RunInfo) -> None:
        """Learn the run's id as it begins."""
        if not self.started.done():
            self.started.set_result(info.run_id)

    def on_request(self, run_id: str, request: Any) -> None:
        """Model requests are not followed (they are in the signals already)."""

    def on_signal(self, signal: Signal) -> None:
        """Keep the signal; watchers are woken soon (this runs during dispatch)."""
        if self.ended:
            return
        if signal.name in _WAITS and isinstance(signal.payload, dict | Mapping):
            key = _OPENS.get(signal.name)
            if key is not None:
                self.asking.add(signal.payload.get(key))
            else:
                self.asking.discard(signal.payload.get("timer_id", signal.payload.get("prompt_id")))
        self.items.append((signal.seq, signal.name, signal.to_json()))
        if signal.name == HARNESS_END:
            self.end()
        elif self._waking is None and self._watchers:
            self._on_loop(self._schedule)

    def end(self) -> None:
        """No more signals: every watcher's stream ends after what it was given."""
        self.ended = True
        self._on_loop(self._end)

    def _on_loop(self, call: Callable[[], None]) -> None:
        """Call now on the loop's thread; from another (a sync handler's), through the loop."""
        if threading.get_ident() == self._thread:
            call()
        else:
            self._loop.call_soon_threadsafe(call)

    def _schedule(self) -> None:
        if self._waking is None and not self.ended:
            delay = self._woken + COALESCE - self._loop.time()
            if delay <= 0:
                self._waking = self._loop.call_soon(self._wake)
            else:
                self._waking = self._loop.call_later(delay, self._wake)

    def _end(self) -> None:
        if self._waking is not None:
            self._waking.cancel()
        self._wake()

    def _wake(self) -> None:
        self._waking = None
        self._woken = self._loop.time()
        woken, self._next = self._next, self._loop.create_future()
        if not woken.done():
            woken.set_result(None)

    async def watch(
        self,
        after: int = 0,
        *,
        heartbeat: float | None = None,
        stop: asyncio.Future[Any] | None = None,
    ) -> AsyncIterator[list[FeedItem]]:
        """The signals after ``seq`` ``after``, in batches: those so far, then new ones.

        Ends after the run's last signal (or when the feed is ended, or once ``stop``
        is done); yields an empty batch after each quiet ``heartbeat`` seconds.
        """
        items = self.items
        position = bisect.bisect_right(items, after, key=lambda item: item[0])
        self._watchers += 1
        try:
            while True:
                if position < len(items):
                    batch = items[position:]
                    position += len(batch)
                    yield batch
                    continue
                if self.ended or (stop is not None and stop.done()):
                    return
                waiting = {self._next} if stop is None else {self._next, stop}
                # asyncio.wait leaves the shared future alone when this watcher is cancelled
                done, _ = await asyncio.wait(
                    waiting, timeout=heartbeat, return_when=asyncio.FIRST_COMPLETED
                )
                if not done:
                    yield []
        finally:
            self._watchers -= 1

    @property
    def waiting(self) -> bool:
        """Whether the run waits for a person or a timer: it can be held at once."""
        return bool(self.asking)

    @property
    def watchers(self) -> int:
        """How many watchers are attached."""
        return self._watchers
