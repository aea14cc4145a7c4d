"""Calls from a worker thread, run on the event loop that owns the run.

Synchronous handlers run in worker threads (so a blocking call never freezes the
loop), but a run's bus and store belong to its loop, which is not thread-safe. The
thread's context carries an :class:`OffLoop`; the few places that change a run
(``ctx.emit``, a store's commit) ask :func:`on_loop` and, in such a thread, hand the
call to the loop and wait for its result: the call runs there in the thread's
context, so it keeps its cause (the activation) and its actor (the agent).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["OffLoop", "on_loop", "set_pace"]

_T = TypeVar("_T")
_CURRENT: contextvars.ContextVar[OffLoop | None] = contextvars.ContextVar(
    "reactor_off_loop", default=None
)
Pace = Callable[[], "asyncio.Future[None] | None"]
_PACE: contextvars.ContextVar[Pace | None] = contextvars.ContextVar("reactor_pace", default=None)


def set_pace(pace: Pace) -> None:
    """Make calls from worker threads started in this context wait while ``pace()`` says so.

    ``pace`` gives a future while the call must wait: the run's store is behind (its
    ``room``), or, in a replay, the call's turn has not come. Each call handed to the
    loop waits for it first (the thread waits, not the loop), as an activation on the
    loop does before each of its steps.
    """
    _PACE.set(pace)


class OffLoop:
    """The loop a worker thread's calls go back to (made on that loop's thread).

    Args:
        what: What runs in the thread, for the error once it is abandoned.
    """

    def __init__(self, what: str) -> None:
        self.loop = asyncio.get_running_loop()
        self.thread = threading.get_ident()
        self.what = what
        self.abandoned = False
        self._pending: set[concurrent.futures.Future[Any]] = set()
        self._pace = _PACE.get()

    def enter(self, context: contextvars.Context) -> None:
        """Make ``context`` (the thread's) hand its calls to this loop."""
        context.run(_CURRENT.set, self)

    def call(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Run ``fn(*args)`` on the loop, in the calling thread's context; wait for it.

        Raises:
            RuntimeError: The run gave up on the thread (a timeout, an abort).
        """
        if self.abandoned:
            raise self._gone()
        context = contextvars.copy_context()
        future: concurrent.futures.Future[_T] = concurrent.futures.Future()

        def run() -> None:
            if future.done():
                return
            if self.abandoned:
                future.set_exception(self._gone())
                return
            waiting = None if self._pace is None else self._pace()
            if waiting is not None:  # not yet: the thread waits, the loop goes on
                waiting.add_done_callback(lambda _: run())
                return
            try:
                future.set_result(context.run(fn, *args))
            except BaseException as exc:  # handed to the thread, which raises it
                future.set_exception(exc)

        self._pending.add(future)
        try:
            self.loop.call_soon_threadsafe(run)
            return future.result()
        finally:
            self._pending.discard(future)

    def abandon(self) -> None:
        """The run no longer waits for the thread: its later calls raise, none waits."""
        self.abandoned = True
        for future in list(self._pending):
            if not future.done():
                future.set_exception(self._gone())

    def _gone(self) -> RuntimeError:
        return RuntimeError(
            f"{self.what} was abandoned (the run timed out or was aborted): it can no "
            "longer emit or change the state."
        )


def on_loop() -> OffLoop | None:
    """The loop to hand a call to, when running in a handler's worker thread."""
    off = _CURRENT.get()
    if off is None or threading.get_ident() == off.thread:
        return None
    return off
