"""Agents' synchronous code in worker threads, off the event loop.

A synchronous ``run=`` handler, ``on_output`` or tool runs in a worker thread with the
activation's context copied, the convention of FastAPI's ``def`` endpoints: a
blocking call (a ``requests.get``, a ``time.sleep``, a slow library) does not freeze
the loop, the run's other agents or other runs, and a run's ``timeout`` or ``abort()``
ends it on time. What the code does to the run from the thread (``ctx.emit``, store
writes) is handed to the run's loop (see :mod:`reactor._signals.offloop`). Async code
stays on the loop.

What a blocking call costs, and the two rules that bound it:

* The process has one pool of ``REACTOR_HANDLER_THREADS`` threads (32 by default,
  :attr:`~reactor.service.Settings.handler_threads`) for every run's calls.
* A run's calls hold at most a quarter of them at once (``max(1, threads // 4)``, 8 by
  default); its further calls wait on the run's loop (an ``await``, never a blocked
  loop), so one run's blocking handlers cannot take every thread from the others.
  Four runs that all block can still fill the pool; a fifth run's calls then wait.
* A call the run stops waiting for (its timeout, an abort, a cancelled activation) is
  abandoned: a thread cannot be stopped, so it runs to its end in the background. It
  gives its place in the run's share back at once, and the pool starts a thread in
  its place (up to ``threads`` more in all), so abandoned calls do not starve the
  calls after them. :func:`abandoned_threads` counts those still running, and each
  abandonment logs a warning naming the agent, the run and that count.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
import itertools
import queue
import threading
from collections.abc import Callable
from typing import Any

from reactor._signals.diagnostics import log
from reactor._signals.offloop import OffLoop
from reactor._signals.settings import settings

__all__ = ["Share", "abandoned_threads", "call_code"]


class _Job:
    """A call waiting for, or running in, a pool thread."""

    __slots__ = ("abandoned", "fn", "future")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.abandoned = False

    def run(self) -> None:
        if not self.future.set_running_or_notify_cancel():
            return  # dropped before it started
        try:
            result = self.fn()
        except BaseException as exc:  # handed to the awaiting run, as an executor does
            self.future.set_exception(exc)
        else:
            self.future.set_result(result)


class _Pool:
    """The process's handler threads: ``size`` for calls, plus one per abandoned call.

    Threads start when calls wait and no thread is idle, up to ``size`` plus the
    abandoned calls still running (at most ``size`` of those); a thread left over when
    an abandoned call ends stops. The threads are daemons: a process that exits does
    not wait for an abandoned call (nobody waits for its result).
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.share = max(1, size // 4)
        self.abandoned = 0
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._threads = 0
        self._idle = 0  # threads not running a call
        self._queued = 0  # calls no thread has taken yet
        self._names = itertools.count()

    def submit(self, fn: Callable[[], Any]) -> _Job:
        job = _Job(fn)
        with self._lock:
            self._jobs.put(job)
            self._queued += 1
            self._grow()
        return job

    def abandon(self, job: _Job) -> int | None:
        """Stop waiting for ``job``; say how many abandoned calls are running now.

        ``None`` if ``job`` holds no thread: it ended, or had not started and is dropped.
        """
        with self._lock:
            if job.future.cancel() or job.future.done():
                return None
            job.abandoned = True
            self.abandoned += 1
            self._grow()
            return self.abandoned

    def _limit(self) -> int:
        return self.size + min(self.abandoned, self.size)

    def _grow(self) -> None:  # with the lock held
        while self._queued > self._idle and self._threads < self._limit():
            self._threads += 1
            self._idle += 1
            name = f"reactor-handler-{next(self._names)}"
            threading.Thread(target=self._work, name=name, daemon=True).start()

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            with self._lock:
                self._queued -= 1
                self._idle -= 1
            job.run()
            with self._lock:
                if job.abandoned:
                    self.abandoned -= 1
                if self._threads > self._limit():
                    self._threads -= 1
                    return
                self._idle += 1


_POOL: _Pool | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> _Pool:
    global _POOL
    if _POOL is None:
        with _POOL_LOCK:
            if _POOL is None:
                _POOL = _Pool(settings().handler_threads)
    return _POOL


def abandoned_threads() -> int:
    """How many synchronous handler calls the process abandoned are still running.

    A call is abandoned when its run stops waiting for it (the run's ``timeout``, an
    ``abort()``, a cancelled activation): a thread cannot be stopped, so the call runs
    on in the background; its result is dropped and its ``ctx`` calls raise. Each one
    holds a thread until it returns. A count that keeps growing means handlers that
    never return (a call without a timeout of its own, a deadlock).
    """
    return 0 if _POOL is None else _POOL.abandoned


class Share:
    """One run's share of the handler threads: how many of its calls hold one at once.

    Args:
        run_id: The run, for the warning when one of its calls is abandoned.
    """

    __slots__ = ("_room", "run_id")

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._room: asyncio.Semaphore | None = None  # made on first use: most runs are async

    def room(self, pool: _Pool) -> asyncio.Semaphore:
        if self._room is None:
            self._room = asyncio.Semaphore(pool.share)
        return self._room


async def call_code(fn: Callable[..., Any], *args: Any, agent: str, what: str, share: Share) -> Any:
    """Call an agent's code: awaited on the loop if async, else in a worker thread.

    A synchronous call first waits (on the loop) for room in the run's ``share``. A
    cancelled call (the run's timeout, an abort) returns at once; a thread cannot be
    stopped, so a blocking one is abandoned: it finishes in the background, its result
    is dropped, its later ``ctx`` calls raise, and a warning says so.
    """
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    pool = _pool()
    room = share.room(pool)
    async with room:
        off = OffLoop(f"The {what} of agent {agent!r}")
        context = contextvars.copy_context()
        off.enter(context)
        job = pool.submit(functools.partial(context.run, fn, *args))
        future = asyncio.wrap_future(job.future)
        try:
            result = await asyncio.shield(future)
        except asyncio.CancelledError:
            running = pool.abandon(job)
            off.abandon()
            future.add_done_callback(_dropped)
            if running is not None:
                log(
                    "reactor.run",
                    "warning",
                    f"{what} abandoned in its worker thread",
                    agent=agent,
                    run_id=share.run_id,
                    abandoned_threads=running,
                    handler_threads=pool.size,
                    hint="a thread cannot be stopped; the call finishes on its own, its "
                    "result is dropped, and it holds a thread until then",
                )
            raise
    if inspect.isawaitable(result):  # a plain function returning a coroutine
        result = await result
    return result


def _dropped(future: asyncio.Future[Any]) -> None:
    """An abandoned thread's outcome, taken so that nobody reports it as unretrieved."""
    if not future.cancelled():
        future.exception()
