"""What makes a worker's log safe to hand over: fencing in the log, and durable handovers.

* :class:`LogFence` is the fence a worker installs on its PostgreSQL signal store: in
  each write's transaction it reads the leases of the runs written (``FOR SHARE``) and
  refuses the runs whose lease another worker holds now (a stale epoch). A takeover
  waits for a write in progress to commit, so the worker taking over reads a log that
  the one it took over from no longer adds to.
* :class:`Flushes` makes what was recorded durable before a run's lease is given back
  (the next holder reads all of it), one flush for every run waiting at that moment.
* :class:`Grouped` does the same for any work done per job at its end (giving leases
  back, forgetting the jobs' rows and markers): one statement or command for every job
  waiting at that moment, not a round trip each; :class:`Batched` also hands each its
  result (the leases taken, the runs' rows read at a job's start).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

from reactor._recording.store import RunLog, SignalStore, flushed
from reactor.service._scaleout.leases import Leases

__all__ = ["Batched", "Flushes", "Grouped", "LogFence"]

T = TypeVar("T")
R = TypeVar("R")


class LogFence:
    """The log's fence of one worker (see the module's docstring).

    Args:
        leases: The worker's leases (the epochs it holds).
        refused: Called on the event loop with the runs whose appends were refused.
    """

    def __init__(self, leases: Leases, refused: Callable[[set[str]], None]) -> None:
        self.leases, self._refused = leases, refused
        self._loop = asyncio.get_running_loop()

    def guard(self, record: SignalStore) -> None:
        """Fence ``record``, a PostgreSQL store in the service's database (where the leases are)."""
        from reactor._backends.postgres import PostgresSignalStore  # psycopg: only here

        if not isinstance(record, PostgresSignalStore):
            raise TypeError(
                f"Only a PostgreSQL log beside the leases can be fenced, not {record!r}."
            )
        record.fence = self

    def __call__(self, cur: Any, runs: set[str]) -> set[str]:
        """In the log's write transaction (the writer's thread): the runs to leave out."""
        epochs = dict(self.leases.epochs)  # a copy: the event loop changes it
        mine = sorted(run for run in runs if run in epochs)
        if not mine:
            return set()
        rows = cur.execute(
            "SELECT run_id, worker, epoch FROM run_leases WHERE run_id = ANY(%s) "
            "ORDER BY run_id FOR SHARE",
            (mine,),
        ).fetchall()
        held = {run_id: (worker, epoch) for run_id, worker, epoch in rows}
        worker = self.leases.worker
        refused = {run for run in mine if held.get(run) != (worker, epochs[run])}
        if refused:
            self._loop.call_soon_threadsafe(self._refused, refused)
        return refused


class Flushes:
    """Waits until what was recorded is written, one flush for all who wait at once.

    (:func:`~reactor._recording.store.flushed`: a flush per run would each hold a
    thread of the loop's small default pool.) What the flush fails to write, the store
    reports for the runs it lost; waiting here never raises for it.
    """

    def __init__(self, record: Callable[[], RunLog | None]) -> None:
        self._record = record

    async def durable(self) -> None:
        """Return once everything recorded before the call is written (or has failed)."""
        record = self._record()
        if record is not None:
            with contextlib.suppress(Exception):  # the store says what it lost
                await flushed(record)


class Batched(Generic[T, R]):
    """Does ``work`` once for all the items given while it was busy; each gets its result.

    Args:
        work: Called with the items waiting; returns their results in the same order.
            What it raises, each of their callers gets.
    """

    def __init__(self, work: Callable[[list[T]], Awaitable[Sequence[R]]]) -> None:
        self._work = work
        self._waiting: list[tuple[T, asyncio.Future[R]]] = []
        self._running: asyncio.Future[None] | None = None

    async def __call__(self, item: T) -> R:
        """``item``'s result, worked on with the others waiting then."""
        waiter: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, waiter))
        if self._running is None or self._running.done():
            self._running = asyncio.ensure_future(self._run())
        return await waiter

    async def _run(self) -> None:
        while self._waiting:  # who came meanwhile waits for the next round
            waiting, self._waiting = self._waiting, []
            try:
                results = await self._work([item for item, _ in waiting])
            except Exception as exc:
                for _, waiter in waiting:
                    if not waiter.done():
                        waiter.set_exception(exc)
            else:
                for (_, waiter), result in zip(waiting, results, strict=True):
                    if not waiter.done():
                        waiter.set_result(result)


class Grouped(Batched[T, None]):
    """Does ``work`` once for all the items given while it was busy (see the module).

    Args:
        work: Called with the items waiting; what it raises, each of their callers gets.
    """

    def __init__(self, work: Callable[[list[T]], Awaitable[None]]) -> None:
        async def each(items: list[T]) -> list[None]:
            await work(items)
            return [None] * len(items)

        super().__init__(each)
