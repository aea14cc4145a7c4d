"""Batcher: many concurrent small writes become one transaction.

Reactions start and finish one at a time, but under load hundreds are in flight:
each ``await batcher.submit(item)`` queues its item and waits, and the batcher's
task hands everything queued so far to one ``flush(items)`` call (one transaction),
then answers each caller with its own result. Alone, an item is written at once; under
load the cost of a transaction is shared.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

__all__ = ["Batcher"]

T = TypeVar("T")
R = TypeVar("R")


class Batcher(Generic[T, R]):
    """Coalesces ``submit`` calls into ``flush`` calls of up to ``max_items`` items.

    Run :meth:`run` in a task (the owner's ``TaskGroup``); cancelling it fails the
    callers still waiting with ``CancelledError``.

    Args:
        flush: Writes a batch; returns one result per item, in order.
        max_items: The most items per ``flush``.
        linger: Seconds to let more items come before a batch that is not full is
            written: a little latency for many fewer transactions under load.
    """

    def __init__(
        self,
        flush: Callable[[list[T]], Awaitable[Sequence[R]]],
        *,
        max_items: int = 1000,
        linger: float = 0.0,
    ) -> None:
        self._flush = flush
        self._max_items = max_items
        self._linger = linger
        self._queue: list[tuple[T, asyncio.Future[R]]] = []
        self._ready = asyncio.Event()

    async def submit(self, item: T) -> R:
        """Queue ``item`` and return its result once its batch is written.

        Raises:
            Exception: Whatever the batch's ``flush`` raised.
        """
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._queue.append((item, future))
        self._ready.set()
        return await future

    async def run(self) -> None:
        """Write queued items batch after batch, until cancelled."""
        try:
            while True:
                await self._ready.wait()
                if self._linger and len(self._queue) < self._max_items:
                    await asyncio.sleep(self._linger)
                self._ready.clear()
                while self._queue:
                    batch = self._queue[: self._max_items]
                    del self._queue[: self._max_items]
                    live = [(item, future) for item, future in batch if not future.done()]
                    if not live:
                        continue
                    try:
                        results = await self._flush([item for item, _ in live])
                    except asyncio.CancelledError:
                        self._queue[:0] = live
                        raise
                    except Exception as exc:
                        for _, future in live:
                            if not future.done():
                                future.set_exception(exc)
                        continue
                    for (_, future), result in zip(live, results, strict=True):
                        if not future.done():
                            future.set_result(result)
        finally:
            for _, future in self._queue:
                future.cancel()
            self._queue.clear()
