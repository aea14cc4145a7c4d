"""Phases and tasks: named parts of an activation, as signals that nest in the causal tree.

``async with ctx.phase("research"):`` (or ``with``) emits ``phase:start`` when the
block begins and ``phase:complete`` or ``phase:failed`` when it ends, each ``{name,
agent, duration_ms, error}``. Everything emitted inside the block, tasks and phases
included, is caused by the start signal, so ``result.tree()`` and ``reactor show``
draw the block as a node with its work under it. ``ctx.task(name)`` is the same with
``task:*`` signals: phases for the stages of a run, tasks for units of work in them.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import Iterator
from types import TracebackType
from typing import TYPE_CHECKING

from reactor._signals.bus import pop_cause, push_cause
from reactor._signals.names import ErrorInfo, SpanKind, error_info, span_event

if TYPE_CHECKING:
    from reactor._signals.bus import SignalBus
    from reactor._signals.signal import Signal

__all__ = ["Span", "caused_by"]


class Span:
    """The context manager of ``ctx.phase(name)`` and ``ctx.task(name)``; use it once.

    Entering returns the start signal. A block that raises is ``failed`` (with the
    error), also when it is cancelled, and the error goes on.
    """

    __slots__ = ("_agent", "_bus", "_kind", "_name", "_started", "_token", "start")

    def __init__(self, bus: SignalBus, kind: SpanKind, name: str, agent: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"A {kind} needs a name (a non-empty string), got {name!r}.")
        self._bus = bus
        self._kind: SpanKind = kind
        self._name = name
        self._agent = agent
        self._started = 0.0
        self._token: contextvars.Token[Signal | None] | None = None
        self.start: Signal | None = None

    def __enter__(self) -> Signal:
        if self.start is not None:
            raise RuntimeError(f"{self!r} was already used; call ctx.{self._kind}() again.")
        start = self._bus.emit(
            span_event(self._kind, "start"),
            {"name": self._name, "agent": self._agent, "duration_ms": None, "error": None},
            source=self._agent,
        )
        self.start = start
        self._token = push_cause(start)
        self._started = time.perf_counter()
        return start

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._token is not None:
            pop_cause(self._token)
            self._token = None
        failed = exc is not None
        error: ErrorInfo | None = None
        if isinstance(exc, asyncio.CancelledError):
            error = {"type": "CancelledError", "message": str(exc) or "cancelled"}
        elif exc is not None:
            error = error_info(exc)
        self._bus.emit(
            span_event(self._kind, "failed" if failed else "complete"),
            {
                "name": self._name,
                "agent": self._agent,
                "duration_ms": round((time.perf_counter() - self._started) * 1000, 3),
                "error": error,
            },
            source=self._agent,
            cause=self.start,
        )

    async def __aenter__(self) -> Signal:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    def __repr__(self) -> str:
        return f"<{self._kind} {self._name!r} of {self._agent}>"


@contextlib.contextmanager
def caused_by(signal: Signal | None) -> Iterator[None]:
    """Make ``signal`` the cause of what this context emits inside the block.

    ``agent.prompt()`` hangs its model calls under its ``prompt:start`` this way; a
    child run started with ``ctx.spawn`` gets ``None``: a causal tree of its own.
    """
    token = push_cause(signal)
    try:
        yield
    finally:
        pop_cause(token)
