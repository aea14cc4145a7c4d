"""Async consumption of a bus's signals."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import TracebackType
from typing import Protocol, Self

from reactor._signals.patterns import Pattern, compile_pattern
from reactor._signals.signal import Signal

__all__ = ["SignalStream", "StreamSource"]


class _Cancellable(Protocol):
    def cancel(self) -> None: ...


class StreamSource(Protocol):
    """What a stream reads from: a bus's history and its subscriptions."""

    @property
    def history(self) -> tuple[Signal, ...]:
        """Signals emitted so far."""
        ...

    @property
    def last_seq(self) -> int:
        """The ``seq`` of the last emitted signal."""
        ...

    def subscribe(
        self, patterns: tuple[Pattern, ...], handler: Callable[[Signal], object]
    ) -> _Cancellable:
        """Deliver matching signals to ``handler``."""
        ...


class SignalStream:
    """Async iterator over a bus's signals; see :meth:`SignalBus.signals`.

    Closing it (``aclose()``, leaving ``async with``, or ``until`` matching) cancels
    its subscription.
    """

    def __init__(
        self,
        bus: StreamSource,
        patterns: tuple[Pattern, ...],
        *,
        until: Pattern | None,
        history: bool,
        keep: tuple[Pattern, ...] | None = None,
        until_after: int = 0,
    ) -> None:
        self._queue: asyncio.Queue[Signal | None] = asyncio.Queue()
        self._until = compile_pattern(until) if until is not None else None
        self._until_after = until_after  # ``until`` ends it only after this seq
        # Received only to end the stream (``until`` outside the patterns): not yielded.
        self._keep = None if keep is None else [compile_pattern(p) for p in keep]
        self._closed = False
        self._floor = 0
        if history:
            matchers = [compile_pattern(p) for p in patterns]
            for signal in bus.history:
                if any(m(signal.name) for m in matchers):
                    self._queue.put_nowait(signal)
            # Signals already emitted but still queued for dispatch are in the
            # backlog above; drop them when they are delivered live.
            self._floor = bus.last_seq
        self._subscription = bus.subscribe(patterns, self._push)

    def _push(self, signal: Signal) -> None:
        if signal.seq > self._floor:
            self._queue.put_nowait(signal)

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Signal:
        while True:
            if self._closed:
                raise StopAsyncIteration
            signal = await self._queue.get()
            if signal is None:  # closed while waiting
                raise StopAsyncIteration
            if (
                self._until is not None
                and signal.seq > self._until_after
                and self._until(signal.name)
            ):
                self.close()
            keep = self._keep
            if keep is None or any(matches(signal.name) for matches in keep):
                return signal

    def close(self) -> None:
        """Stop the stream; iteration ends after signals already yielded."""
        if not self._closed:
            self._closed = True
            self._subscription.cancel()
            self._queue.put_nowait(None)

    async def aclose(self) -> None:
        """Async spelling of :meth:`close`."""
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
