"""Agents' synchronous code in worker threads, off the event loop.

A synchronous ``run=`` handler or ``on_output`` runs in a worker thread with the
activation's context copied, the convention of FastAPI's ``def`` endpoints: a
blocking call (a ``requests.get``, a ``time.sleep``, a slow library) never freezes
the other agents or the other runs of the process, and a run's ``timeout`` or
``abort()`` ends it on time. What the code does to the run from the thread
(``ctx.emit``, store writes) is handed to the run's loop (see
:mod:`reactor._signals.offloop`). Async code stays on the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from reactor._signals.diagnostics import log
from reactor._signals.offloop import OffLoop

if TYPE_CHECKING:
    from reactor._agents.context import AgentContext

__all__ = ["Turn", "call_code", "handled"]

_THREADS = concurrent.futures.ThreadPoolExecutor(
    max_workers=32, thread_name_prefix="reactor-handler"
)
"""Where synchronous handlers run: not the loop's default executor, which
``asyncio.run`` waits for on exit (a handler abandoned by a timeout must not hold it)."""


async def call_code(fn: Callable[..., Any], *args: Any, agent: str, what: str) -> Any:
    """Call an agent's code: awaited on the loop if async, else in a worker thread.

    A cancelled call (the run's timeout, an abort) returns at once; a thread cannot be
    stopped, so a blocking one is abandoned: it finishes in the background, its result
    is dropped, its later ``ctx`` calls raise, and a warning says so.
    """
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    off = OffLoop(f"The {what} of agent {agent!r}")
    context = contextvars.copy_context()
    off.enter(context)
    future = asyncio.get_running_loop().run_in_executor(
        _THREADS, functools.partial(context.run, fn, *args)
    )
    try:
        result = await asyncio.shield(future)
    except asyncio.CancelledError:
        if not future.done():
            off.abandon()
            future.add_done_callback(_dropped)
            log(
                "reactor.run",
                "warning",
                f"{what} abandoned in its worker thread",
                agent=agent,
                hint="a thread cannot be stopped; the call finishes on its own, and its "
                "result is dropped",
            )
        raise
    if inspect.isawaitable(result):  # a plain function returning a coroutine
        result = await result
    return result


def _dropped(future: asyncio.Future[Any]) -> None:
    """An abandoned thread's outcome, taken so that nobody reports it as unretrieved."""
    if not future.cancelled():
        future.exception()


class Turn(Protocol):
    """An activation's place in a recorded order, during a replay."""

    async def wait(self) -> None:
        """Wait until what was recorded before the activation finished is replayed."""
        ...


async def handled(
    run: Callable[[AgentContext[Any]], Any], ctx: AgentContext[Any], turn: Turn | None
) -> Any:
    """Run a handler (a sync one in a worker thread); in a replay, finish in its turn."""
    try:
        output = await call_code(run, ctx, agent=ctx.agent, what="handler")
    except asyncio.CancelledError:
        raise
    except Exception:
        if turn is not None:
            await turn.wait()
        raise
    if turn is not None:
        await turn.wait()
    return output
