"""Registered graphs started by name (``service.submit``): each a recorded run in a task."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from reactor._diagnostics import log
from reactor._graph import Reactive
from reactor._names import HARNESS_START
from reactor._providers.base import Provider
from reactor._recording.info import RunInfo
from reactor._recording.store import SignalStore
from reactor._signal import Signal
from reactor.exceptions import ServiceConfigError

__all__ = ["GraphRuns"]


class _Started:
    """A reporter that hands over the run's id as the run begins."""

    patterns = (HARNESS_START,)

    def __init__(self, started: asyncio.Future[str]) -> None:
        self._started = started

    def start(self, info: RunInfo) -> None:
        if not self._started.done():
            self._started.set_result(info.run_id)

    def on_signal(self, signal: Signal) -> None:
        """Nothing to watch: the id came with :meth:`start`."""


class GraphRuns:
    """The graphs a service starts by name, and their runs in flight.

    Raises:
        ServiceConfigError: A value of ``graphs`` is not a graph.
    """

    def __init__(self, graphs: Mapping[str, Reactive]) -> None:
        for name, graph in graphs.items():
            if not isinstance(graph, Reactive):
                raise ServiceConfigError(
                    f"graphs must map names to graphs built with reactor.reactive(...); "
                    f"{name!r} is {graph!r}."
                )
        self.graphs = dict(graphs)
        self.tasks: set[asyncio.Task[None]] = set()

    async def submit(
        self,
        group: asyncio.TaskGroup,
        name: str,
        input: Any,
        *,
        provider: Provider | None,
        record: SignalStore | None,
        done: Callable[[], None],
    ) -> str:
        """Start graph ``name`` in ``group``; return its run id once it has begun.

        Raises:
            ServiceConfigError: No graph has that name.
        """
        graph = self.graphs.get(name)
        if graph is None:
            known = ", ".join(sorted(self.graphs)) or "none"
            raise ServiceConfigError(
                f"No graph named {name!r} (the service has: {known}); register graphs with "
                "ReactionService(graphs={name: graph})."
            )
        started: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        task = group.create_task(self._run(graph, name, input, provider, record, started))
        self.tasks.add(task)

        def finished(task: asyncio.Task[None]) -> None:
            self.tasks.discard(task)
            done()

        task.add_done_callback(finished)
        return await started

    @staticmethod
    async def _run(
        graph: Reactive,
        name: str,
        input: Any,
        provider: Provider | None,
        record: SignalStore | None,
        started: asyncio.Future[str],
    ) -> None:
        try:
            result = await graph.run(
                input=input, provider=provider, record=record, reporters=[_Started(started)]
            )
            if not result.ok:
                log(
                    "reactor.service",
                    "warning",
                    "submitted run did not complete",
                    graph=name,
                    run_id=result.run_id,
                    status=result.status,
                    reason=result.reason,
                )
        except Exception as exc:  # options the run refused: the caller hears of it
            if not started.done():
                started.set_exception(exc)
            else:
                log("reactor.service", "error", "submitted run failed", graph=name, error=repr(exc))
        finally:
            if not started.done():
                started.cancel()
