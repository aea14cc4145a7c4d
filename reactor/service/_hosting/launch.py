"""Every run the service starts goes through here: graphs by name, agents, reactions, resumes.

A :class:`RunRequest` says what to run (a registered graph, an agent, or a reaction
agent on an object's event; its input, what started it and for whom); :meth:`Runs.launch`
starts it as a run recorded to the service's store (``record=``: snapshots, the inbox,
the log's fence and the recording watch apply to every run alike) in the service's task
group, and returns its id once it has begun, with the task that ends with its result.
The request is plain data, so that a queue of jobs can carry it instead (a reaction's
scope, the object and the event it reacts to, is given beside it); what executes here
is kept apart in :attr:`Runs.live` (run id -> :class:`LiveRun`), while the store knows
every run.

Every run's agents have the service's objects as ``ctx.objects``: a reaction's as its
execution mode says (its scope), the others' changed at once, as the agent
(:class:`~reactor.service._reactions.view.RunObjects`).

Runs of agents also get a row of ``agent_runs`` (``trigger`` ``manual``, ``cron`` or
``api``), written when they start: which agent made the run, what started it, when. How
it ends is its row's in the store, the one place a run's status is kept. Runs are tagged
``service=<graph|agent>:<name>`` (and ``trigger``, ``user``), which is how a restarted
service finds the unfinished ones it should resume.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable, Collection, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

import sqlalchemy as sa

from reactor._agents.agent import Agent
from reactor._engine.result import RunResult
from reactor._graph.reactive import Reactive, reactive
from reactor._providers.base import Provider
from reactor._recording.info import RunInfo, new_run_id
from reactor._recording.roles import StoreRoles
from reactor._recording.store import Reporter, SignalStore
from reactor._signals.diagnostics import log
from reactor.exceptions import RecordingError, RunSuspendedError, ServiceConfigError
from reactor.service._hosting.controls import Controls
from reactor.service._hosting.live import RunFeed
from reactor.service._hosting.record import ServiceRecord
from reactor.service._objects.db import Database
from reactor.service._objects.objects import ObjectStore
from reactor.service._objects.schema import agent_runs
from reactor.service._reactions.view import RunObjects

__all__ = ["SERVICE_TAG", "LiveRun", "RunRequest", "Runs"]

SERVICE_TAG = "service"
"""The tag naming what a service run runs: ``graph:<name>`` or ``agent:<name>``."""

HISTORY = 10_000
"""Signals a run the service executes keeps in memory (its result's ``signals``): the
store has them all, so a run of millions of signals holds only its latest ones."""

Kind = Literal["graph", "agent", "reaction"]


@dataclasses.dataclass(frozen=True)
class RunRequest:
    """What to run: everything a job queue would need to carry.

    Attributes:
        kind: ``graph`` (registered with ``graphs=``), ``agent`` (by name), or
            ``reaction`` (a reaction agent on an object's event: its processing-log
            entry is retried, the run is never resumed by the service on its own).
        name: The graph's or the agent's name.
        input: The run's input.
        trigger: What started it: ``api``, ``manual``, ``cron``.
        user: Who asked for it (the API's user id), if anyone.
        resume: The id of an unfinished run to continue instead of starting one.
        tags: More tags for the recording.
        run_id: The new run's id, when it was chosen before it started (a queued job).
        fresh: ``run_id`` was made just now (a reaction's): its empty inbox is not read.
        force: Resume even if the graph changed what the run's log says was done.
        fork: Start the run as a fork: ``{"run_id", "at", "state"}`` of the source.
    """

    kind: Kind
    name: str
    input: Any = None
    trigger: str = "api"
    user: str | None = None
    resume: str | None = None
    tags: Mapping[str, str] = dataclasses.field(default_factory=dict)
    run_id: str | None = None
    force: bool = False
    fork: Mapping[str, Any] | None = None
    fresh: bool = False

    def run_tags(self) -> dict[str, str]:
        """The recording's tags: what it runs, what started it, for whom."""
        tags = {**self.tags, SERVICE_TAG: f"{self.kind}:{self.name}", "trigger": self.trigger}
        if self.user is not None:
            tags["user"] = self.user
        return tags

    @classmethod
    def resuming(cls, info: RunInfo) -> RunRequest | None:
        """The request that continues an unfinished run the service started (else None)."""
        kind, _, name = info.tags.get(SERVICE_TAG, "").partition(":")
        if kind not in ("graph", "agent") or not name:
            return None
        return cls(
            "graph" if kind == "graph" else "agent",
            name,
            trigger=info.tags.get("trigger", "api"),
            user=info.tags.get("user"),
            resume=info.run_id,
            tags=dict(info.tags),
        )


@dataclasses.dataclass
class LiveRun:
    """A run executing in this process: its request, feed of signals, task and controls."""

    run_id: str
    request: RunRequest
    feed: RunFeed
    task: asyncio.Task[RunResult | None]
    started_at: datetime
    controls: Controls


class Runs:
    """Starts the service's runs and keeps those executing here.

    Args:
        graphs: The graphs started by name.
        agents: Looks an agent up by name (raises when there is none).
        db: Where ``agent_runs`` is.
        objects: The object store the runs' agents see as ``ctx.objects``.

    Raises:
        ServiceConfigError: A value of ``graphs`` is not a graph.
    """

    def __init__(
        self,
        graphs: Mapping[str, Reactive],
        agents: Callable[[str], Agent],
        db: Database,
        objects: ObjectStore | None = None,
    ) -> None:
        for name, graph in graphs.items():
            if not isinstance(graph, Reactive):
                raise ServiceConfigError(
                    f"graphs must map names to graphs built with reactor.reactive(...); "
                    f"{name!r} is {graph!r}."
                )
            for agent_name, member in graph.agents.items():
                if member.schedule is not None:  # only the service's own agents are cron agents
                    log(
                        "reactor.service",
                        "warning",
                        "schedule of a graph's agent not run",
                        graph=name,
                        agent=agent_name,
                        schedule=member.schedule,
                        fix="give the agent to ReactionService(agents=...) to run it on its "
                        "schedule",
                    )
        self.graphs = dict(graphs)
        self.reporters: list[Reporter] = []  # of every run, besides the run's own feed
        self.live: dict[str, LiveRun] = {}
        self.tasks: set[asyncio.Task[RunResult | None]] = set()
        self._agents = agents
        self.db = db
        self.objects = objects
        self._single: dict[str, tuple[Agent, Reactive]] = {}
        self.fenced: ServiceRecord | None = None
        """The fenced log of the service's store (the host's, once it is open)."""

    def graph(self, request: RunRequest) -> Reactive:
        """The graph a request runs (an agent runs as a graph of itself).

        Raises:
            ServiceConfigError: No graph has that name.
            AgentNotFoundError: No agent has that name.
        """
        if request.kind == "graph":
            graph = self.graphs.get(request.name)
            if graph is None:
                known = ", ".join(sorted(self.graphs)) or "none"
                raise ServiceConfigError(
                    f"No graph named {request.name!r} (the service has: {known}); register "
                    "graphs with ReactionService(graphs={name: graph})."
                )
            return graph
        agent = self._agents(request.name)
        cached = self._single.get(request.name)
        if cached is None or cached[0] is not agent:
            cached = (agent, reactive({request.name: agent}, name=request.name))
            self._single[request.name] = cached
        return cached[1]

    async def submit(
        self,
        group: asyncio.TaskGroup,
        request: RunRequest,
        *,
        provider: Provider | None,
        record: SignalStore | None,
        done: Callable[[], None],
    ) -> str:
        """Start ``request`` in ``group``; return the run's id once it has begun.

        Raises:
            ServiceConfigError: No graph has that name.
            AgentNotFoundError: No agent has that name.
            RunNotFoundError: The run to resume is not in the store.
            RunFinishedError: The run to resume has ended.
        """
        run_id, _ = await self.launch(group, request, provider=provider, record=record, done=done)
        return run_id

    async def launch(
        self,
        group: asyncio.TaskGroup,
        request: RunRequest,
        *,
        provider: Provider | None,
        record: SignalStore | None,
        done: Callable[[], None],
        scope: Mapping[str, Any] | None = None,
        graph: Reactive | None = None,
    ) -> tuple[str, asyncio.Task[RunResult | None]]:
        """Start ``request`` in ``group``: its id once it has begun, and its task.

        The task ends with the run's result, or ``None`` when the run did not end here
        (suspended, to resume later). ``scope``: what the run's agents see beside
        the request (a reaction's object and event); ``graph``: the graph the request
        names, when the caller holds it already (a reaction's).

        Raises:
            ServiceConfigError: No graph has that name.
            AgentNotFoundError: No agent has that name.
            RunNotFoundError: The run to resume is not in the store.
            RunFinishedError: The run to resume has ended.
        """
        graph = graph if graph is not None else self.graph(request)
        feed = RunFeed()
        fed, key = self._fed(record, request), ""
        if fed is not None:  # the service's log feeds it, by the id the run will have
            if request.resume is None and request.run_id is None:
                request = dataclasses.replace(request, run_id=new_run_id(), fresh=True)
            key = request.resume or request.run_id or ""
            fed.feeds[key] = feed

        def unfed() -> None:
            if fed is not None and fed.feeds.get(key) is feed:
                del fed.feeds[key]

        try:
            handle = await graph.astart(
                **self._given(graph, request, scope),
                keep_open=False,
                fresh=request.fresh,
                provider=provider,
                record=record,
                reporters=self.reporters if fed is not None else [feed, *self.reporters],
                history_limit=HISTORY,
                tags=request.run_tags(),
                resume=request.resume,
                run_id=None if request.resume else request.run_id,
                on_change="force" if request.force else "fail",
            )
        except BaseException:  # options the run refused, a run to resume not found
            unfed()
            raise
        run_id, controls = handle.run_id, Controls(handle)
        following = self._follow(request, controls)
        try:
            task = group.create_task(following)
        except RuntimeError:  # the service's task group is closing: it stops at once
            following.close()
            unfed()
            await controls.suspend()
            raise
        self.tasks.add(task)
        self.live[run_id] = LiveRun(run_id, request, feed, task, datetime.now(UTC), controls)

        def finished(task: asyncio.Task[RunResult | None]) -> None:
            self.tasks.discard(task)
            feed.end()
            unfed()
            self.live.pop(run_id, None)
            done()

        task.add_done_callback(finished)
        return run_id, task

    def _fed(self, record: SignalStore | None, request: RunRequest) -> ServiceRecord | None:
        """The service's log, when it feeds the run's feed (it records to it, and is no fork).

        A fork's log begins with its source's signals, copied as it starts: its feed is
        a reporter, which sees only what the fork itself says.
        """
        fenced = self.fenced
        if fenced is None or request.fork is not None:
            return None
        return fenced if isinstance(record, StoreRoles) and record.log is fenced else None

    async def _follow(self, request: RunRequest, controls: Controls) -> RunResult | None:
        """Wait for a run that has begun to end; its result (``None``: it did not end here)."""
        handle = controls.handle
        try:
            await handle.wait()
        except asyncio.CancelledError:
            # Stopped by the service (a shutdown, a lost lease) or its task group going
            # away: a fault, never an outcome. The run is suspended, to resume later.
            await controls.suspend()
            with contextlib.suppress(asyncio.CancelledError):
                await handle.wait()
            raise
        try:
            result = await handle.result()
        except RunSuspendedError:  # suspended through its handle: it resumes later
            return None
        except Exception as exc:  # the engine failed outside any agent: say so, go on
            log("reactor.service", "error", "run failed", run=request.name, error=repr(exc))
            return None
        self._ended(request, result)
        return result

    def _given(
        self, graph: Reactive, request: RunRequest, scope: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """What ``graph.run`` is given beside the service's own arguments.

        A resumed run takes its recorded input (``run`` reads it from the log when no
        ``input=`` is given); a new one the request's, and one without input (None)
        the graph's default (``reactive(..., input=...)``).
        """
        given: dict[str, Any] = {}
        if request.resume is None and request.fork is None:
            if request.input is not None:
                given["input"] = request.input
        elif request.resume is None:
            given["fork"] = request.fork  # a fork that has begun is resumed instead
        if scope is None and self.objects is not None:  # a reaction's scope has its own
            allowed = {name: member.capabilities for name, member in graph.agents.items()}
            scope = {"objects": RunObjects(self.objects, allowed)}
        if scope is not None:
            given["scope"] = scope
        return given

    def _ended(self, request: RunRequest, result: RunResult) -> None:
        """What follows a run that ended here: its unwritten tail, and its warning."""
        fenced = self.fenced
        if isinstance(result.error, RecordingError) and fenced is not None and result.signals:
            fenced.unwritten(result.run_id, result.signals[-1], result.error)  # written later
        if not result.ok and request.kind != "reaction":  # a reaction's entry says it
            log(
                "reactor.service",
                "warning",
                "run did not complete",
                run=f"{request.kind}:{request.name}",
                run_id=result.run_id,
                status=result.status,
                reason=result.reason,
            )

    async def started(self, request: RunRequest, run_id: str) -> None:
        """Write the ``agent_runs`` row of an agent's run as it starts (once per run)."""
        if request.kind != "agent":
            return
        try:
            async with self.db.write() as conn:
                exists = await conn.scalar(
                    sa.select(agent_runs.c.id).where(agent_runs.c.run_id == run_id)
                )
                if exists is None:
                    await conn.execute(
                        agent_runs.insert().values(
                            agent=request.name,
                            run_id=run_id,
                            trigger=request.trigger,
                            started_at=datetime.now(UTC),
                        )
                    )
        except sa.exc.IntegrityError:
            pass  # another process wrote it meanwhile (a resumed run's start)

    async def abort(self, run_id: str, reason: str, source: str) -> RunResult | None:
        """Abort a run executing here, as ``source``; its result once it has ended.

        Its log says who and why (``session:abort {reason}``), and it ends ``aborted``
        with that reason (unless it had ended already: see the result). ``None``: the
        run does not execute here.

        Raises:
            PayloadError: The log cannot hold ``reason`` (nothing is aborted).
        """
        live = self.live.get(run_id)
        if live is None or live.task.done():
            return None
        live.controls.abort(reason, source)
        await asyncio.wait([live.task])
        return None if live.task.cancelled() else live.task.result()

    def hold_waiting(
        self,
        grace: float,
        reactions: int,
        waiting_in_store: Collection[str] = (),
    ) -> list[str]:
        """Hold the runs that wait for a person or a timer at once (they live in the log).

        ``waiting_in_store``: runs the store says are ``waiting`` (for a scheduled
        message, too). The others are given ``grace`` seconds: the log names them, so a
        stop that takes long says why.
        """
        waiting = [
            run_id
            for run_id, live in self.live.items()
            if live.feed.waiting or run_id in waiting_in_store
        ]
        held = self.hold(waiting)
        busy = sorted(set(self.live) - set(held))
        if busy or reactions:
            log(
                "reactor.service",
                "info",
                "waiting for work in flight",
                grace_s=grace,
                runs=",".join(busy) or "-",
                reactions=reactions,
                held_waiting=len(held),
            )
        return held

    def hold(self, only: Collection[str] | None = None, reason: str | None = None) -> list[str]:
        """Stop live runs (``only`` these) without ending them: they resume later.

        Each is suspended (``harness:suspended {reason}`` last in its log) as its task
        stops; ``reason`` is why (by default, the service stopped).
        """
        held = sorted(self.live if only is None else set(only) & set(self.live))
        for run_id in held:
            live = self.live[run_id]
            if reason is not None:
                live.controls.reason = reason
            live.task.cancel()
        return held
