"""RunHandle: a live run you can watch, feed, close, abort and await."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from reactor._frozen import freeze_payload
from reactor._names import HARNESS_END, reserved_namespace
from reactor._signal import Signal
from reactor._stream import SignalStream
from reactor.exceptions import RunClosedError, SignalNameError

if TYPE_CHECKING:
    from reactor._result import RunResult
    from reactor._runtime import Run

__all__ = ["RunHandle"]


class RunHandle:
    """A run started with ``graph.start(...)``.

    ::

        handle = graph.start(input=..., provider=p)
        handle.send("market:tick", {"price": 101.5})
        async for signal in handle.signals():
            ...
        result = await handle.result()
    """

    def __init__(self, run: Run, task: asyncio.Task[RunResult]) -> None:
        self._run = run
        self._task = task

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self._run.run_id

    @property
    def done(self) -> bool:
        """Whether the run has finished."""
        return self._task.done()

    @property
    def closed(self) -> bool:
        """Whether the run takes no more input (closed, ending, ended or aborted)."""
        return self._run.closed

    def signals(self) -> SignalStream:
        """Every signal of the run from its start, then live ones until ``harness:end``."""
        return self._run.bus.signals("**", until=HARNESS_END, history=True)

    def send(self, name: str, payload: Any = None) -> Signal:
        """Inject a signal from outside the graph (``source="user"``).

        Raises:
            SignalNameError: ``name`` is in a namespace only the runtime emits
                (``harness:``, ``agent:``, ``state:``, ``provider:``, ``tool:``, ...).
            RunClosedError: The run was closed, has ended or was aborted.
        """
        namespace = reserved_namespace(name)
        if namespace is not None:
            raise SignalNameError(
                f"Cannot send {name!r}: '{namespace}:' signals come from the runtime only, "
                "so outside input cannot forge an agent's result or a state change. Send "
                "your own names (declare them with reactive(external=[...])), change the "
                "state through the store, and answer prompts with reply().",
                name=name,
            )
        run = self._run
        if run.closed:
            state = run.status or "closing"
            raise RunClosedError(
                f"Run {run.run_id} takes no more input ({state}); send signals before "
                "close(), end_when or abort()."
            )
        return run.bus.publish(name, freeze_payload(payload), "user", None, 0)

    def close(self) -> None:
        """Accept no more input; the run finishes once in-flight work is done."""
        self._run.close()

    def abort(self, reason: str = "aborted") -> None:
        """Stop now: cancel in-flight activations (their provider calls too)."""
        self._run.stop("aborted", reason)

    async def result(self) -> RunResult:
        """Wait for the run to finish and return its result."""
        return await self._task

    def __await__(self) -> Generator[Any, None, RunResult]:
        return self.result().__await__()

    def __repr__(self) -> str:
        state = "done" if self.done else ("closed" if self.closed else "open")
        return f"<RunHandle {self.run_id} {state}>"
