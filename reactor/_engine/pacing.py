"""Backpressure on a run, never on the loop: activations wait for their store between steps.

A store that writes from a thread of its own says when its writer is behind
(:meth:`~reactor.SignalStore.room` gives a future instead of ``None``). A run recorded
to it runs each activation as a :class:`Paced` coroutine: before each step of the
activation (its start, and each time it resumes after an ``await``) the store is asked,
and while it is behind the activation waits on that future, as if it had awaited it
itself. Everything an activation emits comes from its steps, so a run emitting faster
than its store writes slows to the store's pace, while the event loop, other runs and
the service's requests go on. Synchronous handlers are paced in their threads (see
:func:`reactor._signals.offloop.set_pace`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Generator
from typing import Any

__all__ = ["Paced", "Room"]

Room = Callable[[], "asyncio.Future[None] | None"]
"""A store's :meth:`~reactor.SignalStore.room`."""


class Paced(Coroutine[Any, Any, None]):
    """``coroutine``, each of whose steps waits first while ``room()`` gives a future.

    A coroutine object in its own right (``send``, ``throw``, ``close``), so that a
    task runs it as it would ``coroutine``: a cancellation while it waits for room is
    thrown into ``coroutine`` (which, not started yet, never runs).
    """

    __slots__ = ("_coroutine", "_room")

    def __init__(self, coroutine: Coroutine[Any, Any, None], room: Room) -> None:
        self._coroutine = coroutine
        self._room = room

    def send(self, value: Any) -> Any:
        """Step ``coroutine``, unless the store is behind: then wait for room first."""
        waiting = self._room()
        if waiting is not None:
            waiting._asyncio_future_blocking = True  # what awaiting a future does
            return waiting
        return self._coroutine.send(value)

    def throw(self, *error: Any) -> Any:
        """Throw into ``coroutine`` (a cancellation, mostly)."""
        return self._coroutine.throw(*error)

    def close(self) -> None:
        """Close ``coroutine``."""
        self._coroutine.close()

    def __await__(self) -> Generator[Any, None, None]:
        """Await ``coroutine`` paced (what a task does with it, spelled for ``await``)."""
        return (yield from _stepped(self))


def _stepped(paced: Paced) -> Generator[Any, None, None]:
    value: Any = None
    while True:
        try:
            yielded = paced.send(value)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]  # the coroutine's result (None)
        try:
            value = yield yielded
        except BaseException as exc:
            try:
                yielded = paced.throw(exc)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]  # as above
            value = yield yielded
