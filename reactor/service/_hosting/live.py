"""What the service keeps of the runs executing in its process: their feeds.

* :class:`RunFeed` is a reporter of one run that keeps its most recent signals in a
  bounded ring and hands them to any number of watchers (Server-Sent Events,
  WebSockets) in batches, until ``harness:end`` (or ``harness:suspended``). What came
  before the ring is in the store: a watcher that needs it reads it there, page by page.
* :class:`Watcher` is one watcher's place in the feed. A watcher more than the ring
  behind (its client stopped reading) is *behind*: it can no longer be served from the
  ring, :attr:`Watcher.behind` is resolved at once, and the next batch it asks for
  raises :class:`FeedBehind`. Its client reconnects and catches up from the store.

A signal is serialized to JSON only when a watcher takes it, once (the text is kept in
the ring beside it): a run nobody follows pays for no JSON, and reactions run as
recorded runs by the thousand a second.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from reactor._recording.info import RunInfo
from reactor._signals.names import (
    HARNESS_END,
    HARNESS_SUSPENDED,
    SESSION_PROMPT,
    SESSION_REPLY,
    SESSION_TIMEOUT,
    TIMER_FIRED,
    TIMER_SET,
)
from reactor._signals.signal import Signal

__all__ = ["COALESCE", "DEFAULT_BUFFER", "FeedBehind", "FeedItem", "RunFeed", "Watcher"]

_WAITS = frozenset((SESSION_PROMPT, SESSION_REPLY, SESSION_TIMEOUT, TIMER_SET, TIMER_FIRED))
_OPENS = {SESSION_PROMPT: "prompt_id", TIMER_SET: "timer_id"}

FeedItem = tuple[int, str, str]
"""One signal of a feed: its ``seq``, its name, and its JSON text."""

DEFAULT_BUFFER = 1_000
"""Signals a feed keeps when it is not told (``REACTOR_STREAM_BUFFER``'s default)."""

COALESCE = 0.05
"""Seconds a burst of signals is gathered for before watchers are woken: a signal after
a quiet spell goes out at once, the ones that follow it within this time go out
together (one wake-up and one write per watcher, not one per signal)."""


class FeedBehind(Exception):
    """A watcher fell more than the feed's ring behind: what it needs next is gone from it."""


class RunFeed:
    """One live run's most recent signals for its watchers.

    The service's log feeds it what its run records (``ServiceRecord.feeds``); it is
    also a reporter (``run(reporters=[feed])``), for a run recorded elsewhere.

    The last ``buffer`` signals are kept once, in a ring that every watcher reads from
    its own position; watchers wait on one future shared by all of them, resolved at
    most every :data:`COALESCE` seconds while signals arrive. Positions are absolute
    (the number of signals the feed had seen before), so a position the ring has
    dropped is known at once: that watcher is behind.

    Args:
        buffer: How many signals the ring keeps (a positive number).

    Raises:
        ValueError: ``buffer`` is not positive.
    """

    patterns = ("**",)

    def __init__(self, buffer: int = DEFAULT_BUFFER) -> None:
        if buffer < 1:
            raise ValueError(f"A feed's buffer must be a positive number of signals, got {buffer}.")
        self.buffer = buffer
        self._signals: list[Signal] = []  # the ring; its texts beside it, made when taken
        self._texts: list[str | None] = []
        self._count = 0  # signals seen: the position after the newest
        self._base = 0  # the position of the signal in slot 0 before the ring wrapped
        self._first_seq = 0
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self.ended = False
        self.asking: set[Any] = set()  # prompts asked and not answered, timers not fired
        self._next: asyncio.Future[None] = self._loop.create_future()
        self._waking: asyncio.Handle | None = None
        self._woken = 0.0  # when watchers were last woken (loop time)
        self._watching: set[Watcher] = set()

    # -- the reporter --------------------------------------------------------------

    def start(self, info: RunInfo) -> None:
        """Nothing to learn as the run begins (the service knows it by its handle)."""

    def on_request(self, run_id: str, request: Any) -> None:
        """Model requests are not followed (they are in the signals already)."""

    def on_signal(self, signal: Signal) -> None:
        """Keep the signal in the ring; watchers are woken soon (this runs during dispatch)."""
        if self.ended:
            return
        name = signal.name
        if name in _WAITS and isinstance(signal.payload, dict | Mapping):
            key = _OPENS.get(name)
            if key is not None:
                self.asking.add(signal.payload.get(key))
            else:
                self.asking.discard(signal.payload.get("timer_id", signal.payload.get("prompt_id")))
        ring = self._signals
        if len(ring) < self.buffer:
            ring.append(signal)
            self._texts.append(None)
            if not self._count:
                self._first_seq = signal.seq
        else:
            slot = (self._count - self._base) % self.buffer
            ring[slot] = signal
            self._texts[slot] = None
        self._count += 1
        if name in (HARNESS_END, HARNESS_SUSPENDED):  # its last signal here
            self.end()
        elif self._waking is None and self._watching:
            self._on_loop(self._schedule)

    def end(self) -> None:
        """No more signals: every watcher's stream ends after what it was given."""
        self.ended = True
        self._on_loop(self._end)

    # -- what it keeps ---------------------------------------------------------------

    @property
    def first_seq(self) -> int:
        """The first ``seq`` this feed saw (a resumed run's earlier signals are in the store)."""
        return self._first_seq

    @property
    def oldest_seq(self) -> int:
        """The ``seq`` of the oldest signal in the ring (``0`` while it is empty)."""
        return self._signals[self._slot(self._count - len(self._signals))].seq if self else 0

    def __len__(self) -> int:
        """How many signals the ring holds (at most ``buffer``)."""
        return len(self._signals)

    def covers(self, after: int) -> bool:
        """Whether the ring holds every signal this run has after ``seq`` ``after``.

        False while the ring is empty (the signals before the feed began, a resumed
        run's, are in the store) and once it has dropped the signal after ``after``.
        """
        return bool(self) and self.oldest_seq <= after + 1

    def resize(self, buffer: int) -> None:
        """Keep ``buffer`` signals from now on (the newest, when it keeps fewer).

        The service's setting (``REACTOR_STREAM_BUFFER``) reaches the feeds this way:
        its followers resize the feed of the run they follow.
        """
        if buffer < 1:
            raise ValueError(f"A feed's buffer must be a positive number of signals, got {buffer}.")
        if buffer == self.buffer:
            return
        kept = min(buffer, len(self._signals))
        start = self._count - kept
        slots = [self._slot(position) for position in range(start, self._count)]
        self._signals = [self._signals[slot] for slot in slots]
        self._texts = [self._texts[slot] for slot in slots]
        self._base, self.buffer = start, buffer
        self._check_behind()

    def _slot(self, position: int) -> int:
        return (position - self._base) % self.buffer

    def take(self, position: int) -> list[FeedItem]:
        """The signals from ``position`` to the newest, each serialized once.

        Raises:
            FeedBehind: The ring no longer holds ``position``.
        """
        if position < self._count - len(self._signals):
            raise FeedBehind(f"the feed keeps the last {self.buffer} signals only")
        signals, texts, batch = self._signals, self._texts, []
        for taken in range(position, self._count):
            slot = self._slot(taken)
            signal, text = signals[slot], texts[slot]
            if text is None:
                texts[slot] = text = signal.to_json()
            batch.append((signal.seq, signal.name, text))
        return batch

    def position_after(self, after: int) -> int:
        """The position of the first signal in the ring with a ``seq`` above ``after``."""
        low, high = self._count - len(self._signals), self._count
        while low < high:
            middle = (low + high) // 2
            if self._signals[self._slot(middle)].seq <= after:
                low = middle + 1
            else:
                high = middle
        return low

    # -- watchers ----------------------------------------------------------------------

    def watch(
        self,
        after: int = 0,
        *,
        heartbeat: float | None = None,
        stop: asyncio.Future[Any] | None = None,
    ) -> Watcher:
        """A watcher of the signals after ``seq`` ``after``: those in the ring, then new ones.

        Iterate it for batches; it ends after the run's last signal (or when the feed is
        ended, or once ``stop`` is done) and yields an empty batch after each quiet
        ``heartbeat`` seconds. Signals before the ring (see :meth:`covers`) are not
        given: read them from the store first.
        """
        return Watcher(self, self.position_after(after), heartbeat, stop)

    @property
    def waiting(self) -> bool:
        """Whether the run waits for a person or a timer: it can be held at once."""
        return bool(self.asking)

    @property
    def watchers(self) -> int:
        """How many watchers are attached."""
        return len(self._watching)

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
        self._check_behind()

    def _check_behind(self) -> None:
        """Tell the watchers the ring has passed (their clients are stuck writing)."""
        lowest = self._count - len(self._signals)
        for watcher in self._watching:
            if watcher.position < lowest and not watcher.behind.done():
                watcher.behind.set_result(None)


class Watcher:
    """One watcher's place in a :class:`RunFeed`; iterate it for batches.

    ``position`` moves past a batch only when the next one is asked for: while its
    client is still writing a batch, the watcher holds that batch's place, so a client
    that stops reading is found behind as soon as the ring has dropped what it holds.

    Attributes:
        behind: Resolved when the ring has passed the watcher (it is checked each time
            watchers are woken): a client stuck writing stops waiting on it.
    """

    def __init__(
        self,
        feed: RunFeed,
        position: int,
        heartbeat: float | None,
        stop: asyncio.Future[Any] | None,
    ) -> None:
        self.feed, self.position = feed, position
        self.heartbeat, self.stop = heartbeat, stop
        self.behind: asyncio.Future[None] = feed._loop.create_future()

    def __aiter__(self) -> AsyncIterator[list[FeedItem]]:
        return self._batches()

    async def _batches(self) -> AsyncIterator[list[FeedItem]]:
        feed, stop = self.feed, self.stop
        feed._watching.add(self)
        try:
            while True:
                if self.position < feed._count:
                    end = feed._count
                    batch = feed.take(self.position)
                    yield batch
                    self.position = end
                    continue
                if feed.ended or (stop is not None and stop.done()):
                    return
                waiting = {feed._next} if stop is None else {feed._next, stop}
                # asyncio.wait leaves the shared future alone when this watcher is cancelled
                done, _ = await asyncio.wait(
                    waiting, timeout=self.heartbeat, return_when=asyncio.FIRST_COMPLETED
                )
                if not done:
                    yield []
        finally:
            feed._watching.discard(self)
