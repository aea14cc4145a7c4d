"""The runs half of a service: where runs are recorded, how they start, stop and resume.

:class:`RunHost` is the one place the service starts runs from (the API, schedules,
resumption after a restart); it refuses new runs while the service stops, and on the
way out suspends those still running (``harness:suspended``, never ``aborted``) so that
they resume at the next start. With a job queue (``REACTOR_REDIS_URL``) it only queues
them: workers execute them (reactions too), and resume those a dead worker left.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from reactor._backends.memory import MemorySignalStore
from reactor._backends.sqlite import SQLiteSignalStore
from reactor._engine.collector import freeze_long_lived
from reactor._engine.result import RunResult
from reactor._graph.reactive import Reactive
from reactor._providers.base import Provider
from reactor._recording.info import RunInfo, new_run_id
from reactor._recording.store import SignalStore
from reactor._signals.diagnostics import log
from reactor._signals.settings import settings
from reactor.exceptions import (
    AgentConflictError,
    GraphChangedError,
    ServiceConfigError,
    ServiceStateError,
)
from reactor.exceptions._extras import importing
from reactor.service._hosting.launch import RunRequest, Runs
from reactor.service._hosting.record import ServiceRecord, service_store
from reactor.service._hosting.retention import Retention
from reactor.service._objects.blocks import BlockedRuns
from reactor.service._objects.db import Database
from reactor.service._reactions.catalog import AgentCatalog
from reactor.service._reactions.dispatcher import HandOff
from reactor.service._scaleout.durable import Flushes
from reactor.service._scaleout.leases import claim_tick, claim_wakeup

if TYPE_CHECKING:
    from reactor._backends.postgres import PostgresSignalStore
    from reactor.service._scaleout.queue import JobQueue

__all__ = [
    "WAKE_MARGIN",
    "RunHost",
    "blocked_reason",
    "check_positive",
    "close_record",
    "default_record",
    "job_queue",
]

WAKE_MARGIN = 2.0
"""Seconds past its time before a suspended run's wakeup is taken up (a run executing
somewhere fires its own timers on time, and is then no longer due)."""


async def default_record(db: Database) -> tuple[SignalStore, bool]:
    """A signal store in ``db`` (in memory for an in-memory one); whether it is owned."""
    if db.path is not None:
        return SQLiteSignalStore(db.path), True
    if db.dialect == "postgresql":
        from reactor._backends.postgres import PostgresSignalStore  # psycopg's pool: only here

        url = db.driver_url.set(drivername="postgresql").render_as_string(hide_password=False)
        store: PostgresSignalStore = await asyncio.to_thread(PostgresSignalStore, url)
        return store, True
    return MemorySignalStore(), False


def job_queue(db: Database) -> JobQueue | None:
    """The job queue ``REACTOR_REDIS_URL`` names (the ``scaleout`` extra's), or None."""
    if settings().redis_url is None:
        return None  # runs execute in this process (and taskiq is never imported)
    with importing("scaleout", what="A job queue (REACTOR_REDIS_URL)"):
        from reactor.service._scaleout.queue import JobQueue, QueueSettings
    found = QueueSettings.from_env()
    return None if found is None else JobQueue(found, db)


async def close_record(record: SignalStore | None, owned: SignalStore | None) -> None:
    """Close the store a service opened (``owned``), or make the one it was given durable."""
    if owned is not None:
        await asyncio.to_thread(owned.close)
    elif record is not None:
        try:
            await asyncio.to_thread(record.flush)
        except Exception as exc:  # the store reports what it lost
            log("reactor.service", "error", "runs not recorded", error=repr(exc))


def blocked_reason(error: GraphChangedError) -> str:
    """Why a run is blocked, in a line: each agent its graph refused over, and why."""
    changes = "; ".join(f"agent {agent!r}: {why}" for agent, why in error.changes.items())
    return f"the graph changed what its log says was done ({changes})"


class RunHost:
    """Starts the service's runs and stops them (see the module's docstring).

    Args:
        runs: The graphs and agents runs are made of, and the live runs.
        catalog: The agents, and whether each is enabled.
        provider: The provider of the runs' model calls.
    """

    def __init__(self, runs: Runs, catalog: AgentCatalog, provider: Provider | None) -> None:
        self.runs = runs
        self.catalog = catalog
        self.provider = provider
        self.record: SignalStore | None = None
        """The service's store, as its runs record to it (their log fenced: :attr:`fenced`)."""
        self.fenced: ServiceRecord | None = None
        """The fenced log of the runs (what held runs say is dropped; ends kept to write)."""
        self.queue: JobQueue | None = None
        self.stopping = False
        self._group: asyncio.TaskGroup | None = None
        self._changed: Callable[[], None] = lambda: None
        self.retention = Retention.from_env()  # REACTOR_RETENTION: how long ended runs stay
        self.wake_every = 1.0  # seconds between looks for suspended runs whose time came
        self.wake_margin = WAKE_MARGIN
        self._waking: asyncio.Task[None] | None = None
        self._requeueing: asyncio.Task[None] | None = None
        self._woken: set[tuple[str, datetime]] = set()  # wakeups looked at already
        self.flushes = Flushes(lambda: self.record)  # one flush for the starts answered at once

    def open(
        self, group: asyncio.TaskGroup, record: SignalStore, changed: Callable[[], None]
    ) -> None:
        """Start runs in ``group``, recorded to ``record``; ``changed`` when one ends.

        What the process holds by now lives as long as it: it is frozen out of the
        collector's walks (see :func:`~reactor._engine.collector.freeze_long_lived`).
        """
        freeze_long_lived()
        self._group, self._changed = group, changed
        self.record, self.fenced = service_store(record)
        self.runs.fenced = self.fenced
        self.stopping = False
        if self.queue is None:
            self.queue = job_queue(self.runs.db)
        if self.retention is not None:
            retention, store, db = self.retention, self.record, self.runs.db
            self.catalog.cron.daily("retention", lambda: retention.prune(store, db))
        self._waking = group.create_task(self._wake_loop())
        if self.queue is not None:  # jobs Redis lost are queued again, from here too
            every = self.queue.settings.reclaim_after
            self._requeueing = group.create_task(self.queue.requeue_every(every))

    @property
    def handoff(self) -> HandOff | None:
        """Where reactions go with a job queue: to the workers (else None: run here)."""
        return None if self.queue is None else self.queue.enqueue_reactions

    async def queued(self, run_id: str) -> RunInfo | None:
        """A run queued and not started by a worker yet, as ``queued`` (else None)."""
        return None if self.queue is None else await self.queue.queued(run_id)

    async def queued_runs(self, limit: int) -> list[RunInfo]:
        """The runs queued and not started by a worker yet, newest first."""
        return [] if self.queue is None else await self.queue.queued_runs(limit)

    async def aclose(self) -> None:
        """Close the connections to the job queue, if there is one."""
        if self.queue is not None:
            queue, self.queue = self.queue, None
            await queue.aclose()

    def close(self) -> list[str]:
        """Take no more runs, and suspend the live ones (they resume at the next start)."""
        self.stopping = True
        for task in (self._waking, self._requeueing):
            if task is not None:
                task.cancel()
        self._waking = self._requeueing = None
        held = self.runs.hold()
        self._group = None
        return held

    async def hold_waiting(self, grace: float, reactions: int) -> list[str]:
        """Hold at once the runs that wait for a person, a timer or a scheduled message."""
        record, waiting = self.record, set()
        if record is not None and self.runs.live:
            try:
                infos = await asyncio.to_thread(record.runs, status="waiting")
            except Exception as exc:  # the store is away: the runs get the grace period
                log("reactor.service", "warning", "waiting runs not read", error=repr(exc))
            else:
                waiting = {info.run_id for info in infos}
        return self.runs.hold_waiting(grace, reactions, waiting)

    async def _wake_loop(self) -> None:
        while True:
            await asyncio.sleep(self.wake_every)
            try:
                await self.wake()
            except Exception as exc:  # the store or the database is away: next time
                log("reactor.service", "error", "wakeups not read", error=repr(exc))
            fenced = self.fenced
            if fenced is not None and fenced.unended:  # runs that ended on a full disk
                try:
                    for run_id in await asyncio.to_thread(fenced.write_ends):
                        log("reactor.service", "info", "run's end recorded", run_id=run_id)
                except Exception as exc:  # the store is still away: next time
                    log("reactor.service", "warning", "ends not recorded", error=repr(exc))

    async def wake(self) -> list[str]:
        """Resume the suspended runs whose timer or scheduled message is due; their ids.

        Each wakeup (a run and its due time) is claimed in the database first, so of
        several serving processes (and workers) one resumes it; a run executing in this
        process is left alone, and a run executing in another one has fired its timer
        before ``wake_margin`` seconds have passed, so it is not due any more.
        """
        record = self.record
        if record is None or self.stopping:
            return []
        before = datetime.now(UTC) - timedelta(seconds=self.wake_margin)
        resumed = []
        for wakeup in await asyncio.to_thread(record.wakeups, before=before):
            key = (wakeup.run_id, wakeup.due_at)
            if wakeup.run_id in self.runs.live or self.stopping or key in self._woken:
                continue
            info = await asyncio.to_thread(record.info, wakeup.run_id)
            request = RunRequest.resuming(info)  # None: a run the service did not start
            claimed = request is not None and await claim_wakeup(self.runs.db, wakeup)
            self._woken.add(key)
            if request is None or not claimed:
                continue
            try:
                resumed.append(await self.submit(request, "resume"))
            except Exception as exc:  # its graph changed, or is gone: it stays as it is
                log("reactor.service", "error", "run not woken", run_id=info.run_id, error=str(exc))
            else:
                log(
                    "reactor.service",
                    "info",
                    "run woken",
                    run_id=info.run_id,
                    due=str(wakeup.due_at),
                )
        return resumed

    async def submit(self, request: RunRequest, what: str) -> str:
        """Start ``request``; return its run id once it has begun.

        Raises:
            ServiceStateError: The service is not running, or is stopping.
            ServiceConfigError: No graph has that name.
            AgentNotFoundError: No agent has that name.
        """
        if self._group is None:
            raise ServiceStateError(
                f"service.{what}() needs the service running: use `async with service:`."
            )
        if self.stopping:
            raise ServiceStateError(
                f"The service is stopping: it starts no new runs (service.{what}()); try "
                "again once it has started again."
            )
        if self.queue is not None:
            if request.resume is None and request.run_id is None:
                request = dataclasses.replace(request, run_id=new_run_id())
            run_id = request.resume or request.run_id
            assert run_id is not None
            await self.runs.started(request, run_id)
            await self.queue.enqueue(request)
            return run_id
        # A new run is answered once its row is written; a resumed one has its row.
        return await self.execute(request, accepted=request.resume is None)

    async def execute(self, request: RunRequest, *, accepted: bool = False) -> str:
        """Start ``request`` in this process; return its run id once it has begun.

        With ``accepted`` (a ``202`` follows), once its start is written in the store:
        an accepted run id is never a ``404``. A resume the run's graph refuses
        (``GraphChangedError``: the code changed what its log says was done) blocks the
        run, with the reason, before it is raised.

        Raises:
            ServiceStateError: ``accepted``, and the store could not write its start.
        """
        assert self._group is not None
        blocks = BlockedRuns(self.runs.db)
        try:
            run_id = await self.runs.submit(
                self._group, request, provider=self.provider, record=self.record, done=self._changed
            )
        except GraphChangedError as exc:
            await blocks.block(exc.run_id, blocked_reason(exc))
            raise
        if request.resume is not None:
            await blocks.unblock(request.resume)
        await self.runs.started(request, run_id)
        if accepted:
            await self._recorded(run_id)
        return run_id

    async def _recorded(self, run_id: str) -> None:
        """Return once the run's row is written in the store (one flush for all waiting).

        Raises:
            ServiceStateError: The store could not write it (the run stops at once).
        """
        record = self.record
        if record is None:
            return
        await self.flushes.durable()
        try:
            await asyncio.to_thread(record.info, run_id)
        except Exception as exc:  # not written (RunNotFoundError), or the store is away
            raise ServiceStateError(
                f"Run {run_id} could not be recorded: the store ({record!r}) failed to write "
                "it (a full disk, a database away: the service's log says which), so it was "
                "stopped at once and nothing of it is kept. Try again once the store records."
            ) from exc

    async def react(
        self,
        graph: Reactive,
        *,
        input: Any,
        scope: Mapping[str, Any],
        tags: Mapping[str, str],
        run_id: str,
        resume: bool = False,
        fresh: bool = False,
    ) -> RunResult | None:
        """Run a reaction in this process, as every run of the service: its result.

        The dispatcher (here, or a worker's) calls it once it has taken the entry: the
        run is recorded to the service's store, shows among the live runs, and is held
        with the others when the service stops. ``None``: it did not end here (it was
        suspended: its entry is taken up again). ``resume``: go on with run ``run_id``,
        which an attempt cut off by a crash recorded. ``fresh``: ``run_id`` was made just
        now (nothing was posted to it: its inbox is not read at its start).

        Raises:
            ServiceStateError: The service is not running.
            GraphChangedError: ``resume``, and the graph changed what its log says.
        """
        if self._group is None:
            raise ServiceStateError(
                "A reaction needs the service running: use `async with service:`."
            )
        name = str(graph.name)
        request = RunRequest(
            "reaction",
            name,
            input=input,
            trigger="reaction",
            tags=tags,
            resume=run_id if resume else None,
            run_id=None if resume else run_id,
            fresh=fresh and not resume,
        )
        _, task = await self.runs.launch(
            self._group,
            request,
            provider=self.provider,
            record=self.record,
            done=self._changed,
            scope=scope,
            graph=graph,
        )
        return await task

    async def run_agent(self, request: RunRequest) -> str:
        """Start an agent's run, if it may run now.

        Raises:
            AgentNotFoundError: The service has no agent of that name.
            AgentConflictError: It is disabled, or it is a reaction agent.
            ServiceStateError: The service is not running, or is stopping.
        """
        name = request.name
        agent = self.catalog.agent(name)
        if agent.reaction is not None:
            raise AgentConflictError(
                f"Agent {name!r} is a reaction agent: it runs when its objects change, so "
                "change an object (POST /api/objects) to run it."
            )
        if not self.catalog.enabled.get(name, True):
            raise AgentConflictError(
                f'Agent {name!r} is disabled; enable it first (PATCH {{"enabled": true}}).'
            )
        return await self.submit(request, "run_agent")

    async def abort(self, run_id: str, reason: str, user: str) -> RunResult | None:
        """Abort a run executing here as ``user`` (its source); its result once it ended.

        ``None``: it does not execute here (it is told through its inbox instead).

        Raises:
            PayloadError: The log cannot hold ``reason`` (nothing is aborted).
        """
        result = await self.runs.abort(run_id, reason, user)
        if result is not None:
            log(
                "reactor.service",
                "info",
                "run aborted",
                run_id=run_id,
                reason=reason,
                user=user,
                status=result.status,
            )
        return result

    async def scheduled(self, name: str) -> None:
        """A cron agent's time has come: run it (a failure to start is logged, not raised).

        Each tick is claimed in the database first: of several serving processes, one
        runs it.
        """
        try:
            if not await claim_tick(self.runs.db, name):
                log("reactor.service", "info", "scheduled run taken elsewhere", agent=name)
                return
            run_id = await self.run_agent(RunRequest("agent", name, trigger="cron"))
        except Exception as exc:  # the scheduler must go on: say why this one did not run
            log("reactor.service", "error", "scheduled run not started", agent=name, error=str(exc))
        else:
            log("reactor.service", "info", "scheduled run started", agent=name, run_id=run_id)

    async def resume(self) -> list[str]:
        """Continue the runs the service started that did not finish; return their ids.

        With a job queue the workers do it: a job stays queued until its run has ended.
        """
        record = self.record
        assert record is not None
        if self.queue is not None:
            return []
        found = await asyncio.to_thread(
            lambda: [*record.runs(status="running"), *record.runs(status="waiting")]
        )
        resumed = []
        for info in sorted(found, key=lambda info: info.started_at):
            request = RunRequest.resuming(info)
            if request is None:
                continue
            try:
                resumed.append(await self.submit(request, "resume"))
            except Exception as exc:  # its graph or agent is gone: the run stays as it is
                log(
                    "reactor.service",
                    "error",
                    "run not resumed",
                    run_id=info.run_id,
                    error=str(exc),
                )
            else:
                log("reactor.service", "info", "run resumed", run_id=info.run_id)
        return resumed


def check_positive(**numbers: object) -> None:
    """Check that each option is a positive number.

    Raises:
        ServiceConfigError: One is not; the message names it.
    """
    for name, value in numbers.items():
        if not isinstance(value, int | float) or value <= 0:
            raise ServiceConfigError(f"{name} must be a positive number, got {value!r}.")
