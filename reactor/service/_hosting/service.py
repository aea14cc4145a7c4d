"""ReactionService: reaction agents on an object store, with their log and suggestions."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, Self

from reactor._agents.agent import Agent
from reactor._agents.reaction import Approval
from reactor._graph.reactive import Reactive
from reactor._providers.base import Provider
from reactor._recording.store import Reporter, SignalStore
from reactor._signals.bus import SignalBus, Subscription
from reactor._signals.names import OBJECT_SIGNALS
from reactor.exceptions import IdleTimeoutError, ServiceConfigError, ServiceStateError
from reactor.service._access.roles import require
from reactor.service._hosting.hosting import RunHost, check_positive, close_record, default_record
from reactor.service._hosting.launch import LiveRun, RunRequest, Runs
from reactor.service._hosting.upkeep import Upkeep, follow, switch_reaction
from reactor.service._objects.changes import Create, Lag, Operation, ProcessingEntry, Suggestion
from reactor.service._objects.db import Database
from reactor.service._objects.objects import ObjectStore
from reactor.service._objects.owners import Owners, process_id
from reactor.service._objects.processing import PAGE as ENTRIES_PAGE
from reactor.service._objects.processing import ProcessingLog
from reactor.service._objects.rows import Page
from reactor.service._objects.suggestions import PAGE as SUGGESTIONS_PAGE
from reactor.service._objects.suggestions import SuggestionPage, Suggestions
from reactor.service._objects.values import (
    AgentActor,
    ObjectEvent,
    Principal,
    User,
    actor_from_context,
)
from reactor.service._reactions import bulk as _bulk
from reactor.service._reactions import resolve as _resolve
from reactor.service._reactions.bulk import Rejected
from reactor.service._reactions.catalog import AgentCatalog
from reactor.service._reactions.cron import CronJobs
from reactor.service._reactions.dispatcher import Dispatcher
from reactor.service._reactions.reaction import ReactionServices
from reactor.service._reactions.registry import ReactionAgent, named_agents, register
from stores import current_actor

__all__ = ["ReactionService"]


class ReactionService:
    """Runs reaction agents when objects change, scheduled agents and runs by name.

    ::

        service = ReactionService(objects=objects, agents={"enrich": enrich}, provider=p)
        async with service:        # the dispatcher, the stuck-job detector, the scheduler
            await objects.create("Person", {"name": "Ada"}, actor=User("u1"))
            await service.idle()
            for suggestion in await service.suggestions(status="pending"):
                await service.approve(suggestion.id, actor=User("u1"))

    The dispatcher follows the store's change events (every stored one: those made
    before the service started too, and by other processes) and gives each to the
    agents whose ``reaction=`` matches, as a ``pending`` entry of the processing log;
    each entry is then processed as a recorded run of the agent. How far each agent
    got is kept in the database, so a restarted service goes on where it stopped and
    an event is never lost; the log's unique index makes an event delivered twice
    (by a restart, ``dispatch``, or a second process) run once per agent.

    Agents are those given here and those of rows alone (:attr:`catalog`, the API).
    Each run (:meth:`submit`, :meth:`run_agent`, the scheduler) is recorded; one
    unfinished when the service stops resumes when it starts again.

    Args:
        objects: The object store whose changes the agents react to.
        agents: Agents by name (or named agents). Those with ``reaction=`` react, those
            with ``schedule=`` are cron agents (the code's schedule, unless changed over
            the API); each is written as a row of ``agents`` when the service starts.
        graphs: Whole graphs to start by name (:meth:`submit`).
        reporters: Observers of every run the service executes (reactions too), e.g.
            an ``OpenTelemetryReporter`` (``reactor serve`` adds one if ``REACTOR_OTEL=1``).
        provider: The provider of the agents' model calls (unless an agent has its own).
        record: Where runs are recorded: by default a signal store in the same
            database (SQLite or PostgreSQL; in memory for an in-memory database).
        db: Another database for the service's own tables (default: the store's).
        stuck_after: Seconds after which an entry still ``processing`` is ``abandoned``.
        stuck_check_every: Seconds between two runs of the stuck-job detector.
        max_running: Reactions running at once in this process.
        poll_every: Seconds between two looks for changes made by other processes
            (changes made through ``objects`` wake the dispatcher at once).
        max_reaction_depth: The deepest chain of reactions whose changes are
            dispatched (a loop of agents updating each other's objects stops there).
        max_attempts: Takes of a reaction cut off by a crash before it is ``failed``.

    Raises:
        AgentConfigError: An agent is defined badly (a reaction agent with
            ``activate_on``, too: the service starts it).
        ServiceConfigError: Another option is unusable.
    """

    def __init__(
        self,
        *,
        objects: ObjectStore,
        agents: Mapping[str, Agent] | Iterable[Agent] = (),
        graphs: Mapping[str, Reactive] | None = None,
        reporters: Iterable[Reporter] = (),
        provider: Provider | None = None,
        record: SignalStore | None = None,
        db: str | None = None,
        stuck_after: float = 300.0,
        stuck_check_every: float = 60.0,
        max_running: int = 64,
        poll_every: float = 1.0,
        max_reaction_depth: int = 8,
        max_attempts: int = 3,
    ) -> None:
        if not isinstance(objects, ObjectStore):
            raise ServiceConfigError(f"objects must be an ObjectStore, got {objects!r}.")
        check_positive(
            stuck_after=stuck_after,
            stuck_check_every=stuck_check_every,
            poll_every=poll_every,
            max_running=max_running,
            max_reaction_depth=max_reaction_depth,
            max_attempts=max_attempts,
        )
        self.objects = objects
        self.agents = named_agents(agents)
        self.reactions = {
            name: ReactionAgent.of(name, agent)
            for name, agent in self.agents.items()
            if agent.reaction is not None
        }
        self.db = Database(db) if db is not None else objects.db
        self._owns_db = db is not None  # closed on the way out (the store's is the store's)
        self.provider, self.record = provider, record
        self.cron = CronJobs(lambda name: self.host.scheduled(name))
        self.catalog = AgentCatalog(self.db, self.agents, self.cron, self._set_reaction)
        self.runs = Runs(graphs or {}, self.catalog.agent, self.db, objects)
        self.runs.reporters.extend(reporters)
        self.host = RunHost(self.runs, self.catalog, provider)
        self.stuck_after, self.stuck_check_every = float(stuck_after), float(stuck_check_every)
        self.poll_every, self.max_reaction_depth = float(poll_every), int(max_reaction_depth)
        self.log = ProcessingLog(self.db)
        self.log.owner = process_id()
        owners = Owners(self.db, self.log.owner)
        self.upkeep = Upkeep(
            self.log, owners, int(max_attempts), self._cancel, self._more, lambda: self.host.record
        )
        self.suggestion_store = Suggestions(self.db)
        self._max_running = int(max_running)
        self._owned_record: SignalStore | None = None
        self._group: asyncio.TaskGroup | None = None
        self._dispatcher: Dispatcher | None = None
        self._loops: list[asyncio.Task[None]] = []
        self._subscription: Subscription | None = None
        self._unwatch: Callable[[], None] = lambda: None
        self._wake = asyncio.Event()
        self._changed = asyncio.Event()

    @property
    def bus(self) -> SignalBus:
        """Where ``object:*``, ``suggestion:*`` and ``capability:denied`` are emitted."""
        return self.objects.bus

    @property
    def reporters(self) -> list[Reporter]:
        """The observers of every run the service executes (add to it before it starts)."""
        return self.runs.reporters

    @property
    def running(self) -> bool:
        """Whether the service is started (inside ``async with service:``)."""
        return self._group is not None

    @property
    def live(self) -> Mapping[str, LiveRun]:
        """The runs executing in this process, by id (the store has every run)."""
        return self.runs.live

    # -- lifetime ------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._group is not None:
            raise ServiceStateError("The service is running already; enter it once.")
        await self.objects.open()
        await self.db.open()
        if self.record is None:
            self.record, owned = await default_record(self.db)
            self._owned_record = self.record if owned else None
        await register(self.db, self.agents)
        loaded = await self.catalog.load()
        order = [*(name for name in self.agents if name in loaded), *sorted(loaded)]
        live = {name: ReactionAgent.of(name, loaded[name]) for name in dict.fromkeys(order)}
        self.reactions.update(live)
        cursors = await self.log.cursors(live)
        group = asyncio.TaskGroup()
        await group.__aenter__()
        self._group = group
        self.host.open(group, self.record, self._poke)
        services = ReactionServices(
            self.objects, self.suggestion_store, self.host, self.host.record
        )
        dispatcher = Dispatcher(
            services,
            self.log,
            live,
            cursors,
            group,
            max_running=self._max_running,
            changed=self._poke,
            handoff=self.host.handoff,
            max_depth=self.max_reaction_depth,
        )
        self._dispatcher = dispatcher
        self._subscription = self.bus.subscribe(OBJECT_SIGNALS, lambda _: self._wake.set())
        self._unwatch = self.objects.on_written(dispatcher.written)
        detecting = self.upkeep.detecting(self.stuck_after, self.stuck_check_every)
        following = follow(dispatcher, self._wake, self.poll_every, self._poke)
        for loop in (dispatcher.process(), detecting, following, self.upkeep.beating(True)):
            self._loops.append(group.create_task(loop))
        self._finishing = group.create_task(dispatcher.finishes.run())
        self.cron.start()
        with contextlib.suppress(Exception):  # the loop says why, and tries again
            await self.upkeep.beat()  # what dead processes left is taken up before idle()
        await self.host.resume()
        return self

    async def drain(self, grace: float) -> list[str]:
        """Stop taking work; let what is in flight finish for up to ``grace`` seconds.

        New events are no longer dispatched, schedules no longer fire and new runs are
        refused. Reactions still running after ``grace`` go back to ``pending`` when
        the service exits; runs still running are stopped without ending, so their
        logs show them unfinished and the next start resumes them. Returns the ids of
        those runs.
        """
        self.host.stopping = True
        self.cron.pause()
        for task in self._loops:
            task.cancel()
        dispatcher = self._dispatcher
        reactions = 0 if dispatcher is None else len(dispatcher.active)
        held = await self.host.hold_waiting(grace, reactions)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await self._until(
                    lambda: not self.runs.tasks and (dispatcher is None or not dispatcher.active)
                )
        return [*held, *self.host.close()]

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        group, dispatcher = self._group, self._dispatcher
        if group is None or dispatcher is None:
            return
        try:
            self.cron.stop()
            self.host.close()
            for task in [*self._loops, *dispatcher.active.values(), self._finishing]:
                task.cancel()
            await group.__aexit__(None, None, None)
        finally:
            self._group = self._dispatcher = None
            self._loops.clear()
            if self._subscription is not None:
                self._subscription.cancel()
                self._unwatch()
            with contextlib.suppress(Exception):  # a dead database cannot take them back
                await self.log.release(dispatcher.taken)  # taken up again at the next start
                await self.upkeep.owners.leave()
            await close_record(self.record, self._owned_record)
            await self.host.aclose()
            if self._owned_record is not None:
                self.record = self._owned_record = None
            if self._owns_db:
                await self.db.close()  # opened again if the service is entered again

    def _running(self, what: str) -> Dispatcher:
        if self._group is None or self._dispatcher is None:
            raise ServiceStateError(
                f"service.{what}() needs the service running: use `async with service:`."
            )
        return self._dispatcher

    def _poke(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def _until(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            await self._changed.wait()

    # -- dispatching ---------------------------------------------------------------

    async def dispatch(self, event: ObjectEvent) -> list[ProcessingEntry]:
        """Deliver one stored event again, as a redelivering queue would.

        Each matching agent gets an entry: ``pending`` (then processed), or
        ``skipped`` when the agent has the same (object, version, event) pending,
        processing or completed already.

        Raises:
            ServiceStateError: The service is not running.
        """
        return await self._running("dispatch").dispatch(event)

    # -- stuck and cut-off entries -------------------------------------------------

    async def detect_stuck(self) -> list[ProcessingEntry]:
        """Mark entries ``processing`` for longer than ``stuck_after`` as ``abandoned``.

        The detector does it every ``stuck_check_every`` s (this process's are cancelled).
        """
        await self.db.open()
        return await self.upkeep.detect_stuck(self.stuck_after)

    async def retry(self, entry_id: int, *, principal: Principal | None = None) -> ProcessingEntry:
        """Process a ``failed`` or ``abandoned`` entry again (its attempts start anew).

        Raises:
            PermissionDeniedError: ``principal`` is given and is not an ``admin``.
            EntryNotFoundError: No entry has that id.
            RetryRefusedError: The entry is in another status, or its event is pending,
                processing or completed for its agent in another entry already.
        """
        require(principal, "admin", f"Retrying processing-log entry {entry_id}")
        await self.db.open()
        entry = await self.upkeep.owners.retry(entry_id)
        self._more([entry])
        return entry

    def _cancel(self, entry_id: int) -> None:
        if self._dispatcher is not None:
            self._dispatcher.cancel(entry_id)

    def _more(self, entries: list[ProcessingEntry]) -> None:  # back to pending: take them
        if (dispatcher := self._dispatcher) is not None:
            dispatcher.more_work(entries)

    # -- waiting, reading ----------------------------------------------------------

    async def idle(self, timeout: float | None = None) -> None:  # noqa: ASYNC109 (the documented API)
        """Wait until every stored event is dispatched and no reaction or run is in flight.

        Raises:
            IdleTimeoutError: Still busy after ``timeout`` seconds.
            ServiceStateError: The service is not running.
        """
        dispatcher = self._running("idle")
        latest = 0
        try:
            async with asyncio.timeout(timeout):
                while True:
                    latest = await self.objects.last_event_id()
                    self._wake.set()
                    dispatcher.nudge()
                    await self._until(functools.partial(self._settled, latest))
                    if await self.objects.last_event_id() == latest:
                        return
        except TimeoutError:
            raise IdleTimeoutError(
                f"The service was still busy after {timeout:g} s: {len(dispatcher.active)} "
                f"reactions and {len(self.runs.tasks)} runs in flight, events dispatched "
                f"through {dispatcher.position} of {latest}. Wait longer, or look at "
                "service.processing_log(status='processing')."
            ) from None

    def _settled(self, latest: int) -> bool:
        if (dispatcher := self._dispatcher) is None:
            return True
        caught_up = not dispatcher.agents or dispatcher.position >= latest
        return caught_up and dispatcher.settled and not self.runs.tasks

    async def processing_log(
        self, *, agent: str | None = None, object_id: str | None = None, status: str | None = None
    ) -> list[ProcessingEntry]:
        """Entries of the processing log, oldest first, filtered by any of the three."""
        await self.db.open()
        return await self.log.entries(agent=agent, object_id=object_id, status=status)

    async def suggestions(self, status: str | None = None) -> list[Suggestion]:
        """Suggestions, newest first (``pending``, ``completed``, ``rejected``, or all)."""
        await self.db.open()
        return await self.suggestion_store.list(status)

    async def suggestion_page(
        self,
        *,
        status: str | None = None,
        agent: str | None = None,
        object_id: str | None = None,
        after: str | None = None,
        limit: int = SUGGESTIONS_PAGE,
        with_objects: bool = False,
    ) -> SuggestionPage:
        """One page of suggestions, the newest first, filtered by status, agent and object.

        Pass a page's ``next`` as ``after`` for the next page (1 to 500 a page).
        ``with_objects``: the page's ``objects`` are those its suggestions are about or
        change, as they are now (read with the page when the service keeps its tables in
        the objects' database, the default).

        Raises:
            ServiceConfigError: ``after`` is not a cursor a page gave, or ``limit`` is
                out of range.
        """
        await self.db.open()
        together = with_objects and self.db is self.objects.db
        page = await self.suggestion_store.page(
            status=status,
            agent=agent,
            object_id=object_id,
            after=after,
            limit=limit,
            with_objects=together,
        )
        if not with_objects or together:
            return page
        wanted = {s.object_id for s in page.items if s.object_id}
        wanted.update(
            op.id for s in page.items for op in s.operations if not isinstance(op, Create)
        )
        return SuggestionPage(page.items, page.next, await self.objects.get_many(wanted))

    async def processing_page(
        self,
        *,
        agent: str | None = None,
        object_id: str | None = None,
        status: str | None = None,
        after: str | None = None,
        limit: int = ENTRIES_PAGE,
    ) -> Page[ProcessingEntry]:
        """One page of the processing log, the newest first, filtered by any of the three.

        Pass a page's ``next`` as ``after`` for the next page (1 to 500 a page).

        Raises:
            ServiceConfigError: ``after`` is not a cursor a page gave, or ``limit`` is
                out of range.
        """
        await self.db.open()
        return await self.log.page(
            agent=agent, object_id=object_id, status=status, after=after, limit=limit
        )

    async def lag(self, agent: str | None = None) -> dict[str, Lag]:
        """How far behind the reaction agents are (``agent``'s alone, when given).

        Each agent's waiting entries, how long the oldest has waited, its entries by
        outcome and status, those a spend cap holds and what it spent this period (its
        spend cap's, else an hour), from the processing log (grouped, indexed queries).
        Every reaction agent is listed, and every other agent with entries.
        """
        await self.db.open()
        periods = {
            name: period
            for name, target in self.reactions.items()
            if (period := target.admission.period) is not None
        }
        if agent is not None:
            return await self.log.lag([agent], periods)
        found = await self.log.lag(None, periods)
        for name in self.reactions:
            found.setdefault(name, Lag(agent=name))
        return dict(sorted(found.items()))

    # -- resolving suggestions -----------------------------------------------------

    async def approve(
        self,
        suggestion_id: str,
        *,
        actor: User | AgentActor | None = None,
        force: bool = False,
        principal: Principal | None = None,
        justification: str | None = None,
    ) -> Suggestion:
        """Approve a pending suggestion; once approved enough, apply its changes as its agent.

        Who may approve, how many must, until when, and with what justification, is the
        agent's ``Approval`` (see :mod:`reactor.service`'s docs on approvals); the
        changes are checked against the agent's capabilities again and applied in one
        transaction, as ``AgentActor(agent)`` with ``approved_by`` the decider; if they
        cannot be (an object was deleted meanwhile, or changed since the agent saw it
        and ``force`` is not set), nothing changes and the suggestion stays pending.

        Args:
            suggestion_id: The suggestion.
            actor: Who approves, without a principal (by default, who runs now).
            force: Approve even if its object changed since (an override).
            principal: Who approves, as authenticated: held to the agent's ``Approval``
                (``by``, ``distinct_from_proposer``); its id is the actor.
            justification: Why (required as the agent's ``Approval`` says).

        Raises:
            SuggestionNotFoundError: No suggestion has that id.
            PermissionDeniedError: The principal may not approve it.
            SuggestionResolvedError: It was resolved already, it expired, or the
                decider approved it already.
            SuggestionStaleError: Its object changed since (approve with ``force=True``).
            PayloadError: A required justification is missing, or it is too long.
            CapabilityError: A change is outside the agent's capabilities.
            ObjectNotFoundError: A change names an object that no longer exists.
        """
        asked = _resolve.Asked(self._decider(actor, principal), force, justification)
        return await self._decide(_resolve.approve, suggestion_id, asked)

    async def modify(
        self,
        suggestion_id: str,
        operations: Sequence[Operation],
        *,
        actor: User | AgentActor | None = None,
        force: bool = False,
        principal: Principal | None = None,
        justification: str | None = None,
    ) -> Suggestion:
        """Approve a pending suggestion with edited changes (``operations``).

        The edit is checked like the agent's own changes (its capabilities, the
        objects' types) and recorded as a diff against the proposed ones; approvals
        given to the changes before the edit no longer count. Otherwise as
        :meth:`approve`.

        Raises:
            ObjectValidationError: An edited change does not fit its object's type.
            (and what :meth:`approve` raises)
        """
        decider = self._decider(actor, principal)
        asked = _resolve.Asked(decider, force, justification, tuple(operations))
        return await self._decide(_resolve.approve, suggestion_id, asked)

    async def reject(
        self,
        suggestion_id: str,
        *,
        actor: User | AgentActor | None = None,
        principal: Principal | None = None,
        justification: str | None = None,
    ) -> Suggestion:
        """Mark a pending suggestion ``rejected``; nothing changes.

        Raises:
            SuggestionNotFoundError: No suggestion has that id.
            PermissionDeniedError: The principal may not decide on it.
            SuggestionResolvedError: It was approved or rejected already.
            PayloadError: A required justification is missing, or it is too long.
        """
        asked = _resolve.Asked(self._decider(actor, principal), justification=justification)
        return await self._decide(_resolve.reject, suggestion_id, asked)

    async def reject_many(
        self,
        ids: Sequence[str] | None = None,
        *,
        agent: str | None = None,
        object_id: str | None = None,
        actor: User | AgentActor | None = None,
        principal: Principal | None = None,
        justification: str | None = None,
    ) -> Rejected:
        """Reject many suggestions: those of ``ids``, or the pending ones of a filter.

        Each is decided as :meth:`reject` decides one (its agent's ``Approval``, a
        justification it requires) and recorded the same way; those that cannot be
        rejected are refused, each with why, and the rest are rejected all the same, in
        one transaction. At most 1,000 a call: a filter that finds more says ``more``.

        Args:
            ids: The suggestions to reject.
            agent: Or the pending suggestions of this agent...
            object_id: ...and/or about this object (neither: every pending one).
            actor: Who rejects, without a principal (by default, who runs now).
            principal: Who rejects, as authenticated (held to each agent's ``Approval``).
            justification: Why (required as an agent's ``Approval`` says).

        Raises:
            ServiceConfigError: Both ids and a filter, or more than 1,000 ids.
            PayloadError: The justification is too long, or a value cannot be stored.
        """
        asked = _resolve.Asked(self._decider(actor, principal), justification=justification)
        await self.db.open()
        agents = {**self.agents, **self.catalog.agents}
        return await _bulk.reject_many(
            self.objects,
            self.suggestion_store,
            agents,
            asked,
            ids=ids,
            agent=agent,
            object_id=object_id,
        )

    def approval_of(self, agent: str) -> Approval:
        """Who may decide on ``agent``'s suggestions (``Approval()`` for an agent gone)."""
        found = self.catalog.agents.get(agent) or self.agents.get(agent)
        return found.approval if found is not None else Approval()

    @staticmethod
    def _decider(actor: User | AgentActor | None, principal: Principal | None) -> _resolve.Decider:
        if principal is not None:
            return _resolve.Decider(principal.user, principal)
        return _resolve.Decider(actor if actor is not None else actor_from_context(current_actor()))

    async def _decide(
        self, decide: _resolve.Decide, suggestion_id: str, asked: _resolve.Asked
    ) -> Suggestion:
        await self.db.open()
        agents = {**self.agents, **self.catalog.agents}
        return await decide(self.objects, self.suggestion_store, agents, suggestion_id, asked)

    # -- runs ----------------------------------------------------------------------

    async def submit(self, graph: str, input: Any = None, *, user: str | None = None) -> str:
        """Start a registered graph as a recorded run; return its ``run_id`` at once.

        Without ``input`` (``None``) the run takes the graph's default (its ``input=``).

        Raises:
            ServiceConfigError: No graph has that name.
            ServiceStateError: The service is not running, or is stopping.
        """
        return await self.host.submit(RunRequest("graph", graph, input, "api", user), "submit")

    async def run_agent(
        self,
        name: str,
        input: Any = None,
        *,
        trigger: Literal["manual", "cron", "api"] = "manual",
        user: str | None = None,
    ) -> str:
        """Run one agent (as a graph of itself), recorded, with a row in ``agent_runs``.

        Raises:
            AgentNotFoundError: The service has no agent of that name.
            AgentConflictError: It is disabled, or it is a reaction agent (those run
                when their objects change).
            ServiceStateError: The service is not running, or is stopping.
        """
        return await self.host.run_agent(RunRequest("agent", name, input, trigger, user))

    async def _set_reaction(
        self, name: str, agent: Agent | None, how: Literal["keep", "new", "gone"]
    ) -> None:
        """Start or stop dispatching to a reaction agent (it was changed through the catalog)."""
        found = await switch_reaction(self.log, self.objects, name, agent, how)
        if found is not None:
            self.reactions[name] = found[0]
        if self._dispatcher is not None and found is None:
            self._dispatcher.remove(name)
        elif self._dispatcher is not None and found is not None:
            self._dispatcher.add(*found)

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<ReactionService {state} agents={sorted(self.agents)} objects={self.objects!r}>"
